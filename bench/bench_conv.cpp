// Every distinct convolution of ResNet-50 and MobileNetV2 (torchvision, batch 1, 224x224), as
// Kiln's graph passes fuse them, Kiln against oneDNN in one process: random interleaving,
// repetitions, medians, at 1 and 2 threads of kernel-internal parallelism.
//
//   bench_conv [--threads 1,2] [--filter-layer REGEX] [--quick] [--onednn-nhwc]
//              [Google Benchmark flags, e.g. --benchmark_format=json --benchmark_out=FILE]
//   bench_conv --check-table MODEL.onnx [--as resnet50|mobilenetv2]
//   bench_conv --print-table MODEL.onnx [--as resnet50|mobilenetv2]
//   bench_conv --list
//
// Benchmarks are named BM_conv/<model>_<layer>/<impl>/threads:<n>, impl kiln or onednn; <layer>
// is the torchvision module of the layer's first occurrence (see kLayers). "threads:<n>" is the
// kernel's own parallelism (Halide's thread pool and OpenMP for oneDNN, both set to n before
// each run), not Google Benchmark's ->Threads(), which would run n copies of the benchmark.
//
// The layer table is hard-coded so the binary needs no model file; `--check-table` imports a
// model with Kiln's ONNX importer and pass pipeline and fails unless the distinct convolution
// kernels it produces (shape, epilogue, residual, depthwise) and their counts are the table's.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "HalideRuntime.h"
#include "cli.h"
#include "conv_peers.h"
#include "graph/kernel_spec.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"

namespace {

using namespace kiln;
using runtime::ConvEpilogue;
constexpr ConvEpilogue kNone = ConvEpilogue::none, kRelu = ConvEpilogue::relu,
                       kRelu6 = ConvEpilogue::relu6;

// One distinct convolution kernel of a model: batch 1, square kernel, equal strides, symmetric
// padding, dilation 1 (--check-table refuses anything else). `residual`: the kernel adds a
// tensor of the output's shape before the activation (a fused residual Add). `count`: how
// many kernels of the model have exactly this shape and epilogue; `name` is the first one's.
struct Layer {
  const char* model;
  const char* name;
  int64_t ci, h, w, co, k;
  int stride, pad;
  bool depthwise;
  ConvEpilogue epilogue;
  bool residual;
  int count;

  bench::ConvShape shape() const { return {1, ci, h, w, co, k, k, stride, pad, depthwise}; }
  bench::ConvEpilogueSpec epilogue_spec() const { return {epilogue, residual}; }
  std::string id() const { return std::string(model) + "_" + name; }
};

// Derived from Kiln's optimized graphs of build/release/tests/models/{resnet50,mobilenetv2}.onnx
// (`bench_conv --print-table FILE` prints these rows; the bench_conv_table_* tests check them).
// What Kiln fuses, as `kiln inspect` shows it: in a ResNet bottleneck with a downsample branch
// torch.onnx exports the downsample conv after conv3, so the downsample conv absorbs the
// residual Add + ReLU and conv3 keeps no epilogue; in the other blocks conv3 absorbs them.
// MobileNetV2's residual Adds are fused into the projection 1x1 conv (epilogue none).
// clang-format off
const Layer kLayers[] = {
    // model, layer, Ci, H, W, Co, K, stride, pad, depthwise, epilogue, residual, count
    {"resnet50", "conv1",                     3, 224, 224,   64, 7, 2, 3, false, kRelu,  false, 1},
    {"resnet50", "layer1.0.conv1",           64,  56,  56,   64, 1, 1, 0, false, kRelu,  false, 1},
    {"resnet50", "layer1.0.conv2",           64,  56,  56,   64, 3, 1, 1, false, kRelu,  false, 3},
    {"resnet50", "layer1.0.conv3",           64,  56,  56,  256, 1, 1, 0, false, kNone,  false, 1},
    {"resnet50", "layer1.0.downsample",      64,  56,  56,  256, 1, 1, 0, false, kRelu,  true,  3},
    {"resnet50", "layer1.1.conv1",          256,  56,  56,   64, 1, 1, 0, false, kRelu,  false, 2},
    {"resnet50", "layer2.0.conv1",          256,  56,  56,  128, 1, 1, 0, false, kRelu,  false, 1},
    {"resnet50", "layer2.0.conv2",          128,  56,  56,  128, 3, 2, 1, false, kRelu,  false, 1},
    {"resnet50", "layer2.0.conv3",          128,  28,  28,  512, 1, 1, 0, false, kNone,  false, 1},
    {"resnet50", "layer2.0.downsample",     256,  56,  56,  512, 1, 2, 0, false, kRelu,  true,  1},
    {"resnet50", "layer2.1.conv1",          512,  28,  28,  128, 1, 1, 0, false, kRelu,  false, 3},
    {"resnet50", "layer2.1.conv2",          128,  28,  28,  128, 3, 1, 1, false, kRelu,  false, 3},
    {"resnet50", "layer2.1.conv3",          128,  28,  28,  512, 1, 1, 0, false, kRelu,  true,  3},
    {"resnet50", "layer3.0.conv1",          512,  28,  28,  256, 1, 1, 0, false, kRelu,  false, 1},
    {"resnet50", "layer3.0.conv2",          256,  28,  28,  256, 3, 2, 1, false, kRelu,  false, 1},
    {"resnet50", "layer3.0.conv3",          256,  14,  14, 1024, 1, 1, 0, false, kNone,  false, 1},
    {"resnet50", "layer3.0.downsample",     512,  28,  28, 1024, 1, 2, 0, false, kRelu,  true,  1},
    {"resnet50", "layer3.1.conv1",         1024,  14,  14,  256, 1, 1, 0, false, kRelu,  false, 5},
    {"resnet50", "layer3.1.conv2",          256,  14,  14,  256, 3, 1, 1, false, kRelu,  false, 5},
    {"resnet50", "layer3.1.conv3",          256,  14,  14, 1024, 1, 1, 0, false, kRelu,  true,  5},
    {"resnet50", "layer4.0.conv1",         1024,  14,  14,  512, 1, 1, 0, false, kRelu,  false, 1},
    {"resnet50", "layer4.0.conv2",          512,  14,  14,  512, 3, 2, 1, false, kRelu,  false, 1},
    {"resnet50", "layer4.0.conv3",          512,   7,   7, 2048, 1, 1, 0, false, kNone,  false, 1},
    {"resnet50", "layer4.0.downsample",    1024,  14,  14, 2048, 1, 2, 0, false, kRelu,  true,  1},
    {"resnet50", "layer4.1.conv1",         2048,   7,   7,  512, 1, 1, 0, false, kRelu,  false, 2},
    {"resnet50", "layer4.1.conv2",          512,   7,   7,  512, 3, 1, 1, false, kRelu,  false, 2},
    {"resnet50", "layer4.1.conv3",          512,   7,   7, 2048, 1, 1, 0, false, kRelu,  true,  2},

    {"mobilenetv2", "features.0",             3, 224, 224,   32, 3, 2, 1, false, kRelu6, false, 1},
    {"mobilenetv2", "features.1.conv.0",     32, 112, 112,   32, 3, 1, 1, true,  kRelu6, false, 1},
    {"mobilenetv2", "features.1.conv.1",     32, 112, 112,   16, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.2.conv.0",     16, 112, 112,   96, 1, 1, 0, false, kRelu6, false, 1},
    {"mobilenetv2", "features.2.conv.1",     96, 112, 112,   96, 3, 2, 1, true,  kRelu6, false, 1},
    {"mobilenetv2", "features.2.conv.2",     96,  56,  56,   24, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.3.conv.0",     24,  56,  56,  144, 1, 1, 0, false, kRelu6, false, 2},
    {"mobilenetv2", "features.3.conv.1",    144,  56,  56,  144, 3, 1, 1, true,  kRelu6, false, 1},
    {"mobilenetv2", "features.3.conv.2",    144,  56,  56,   24, 1, 1, 0, false, kNone,  true,  1},
    {"mobilenetv2", "features.4.conv.1",    144,  56,  56,  144, 3, 2, 1, true,  kRelu6, false, 1},
    {"mobilenetv2", "features.4.conv.2",    144,  28,  28,   32, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.5.conv.0",     32,  28,  28,  192, 1, 1, 0, false, kRelu6, false, 3},
    {"mobilenetv2", "features.5.conv.1",    192,  28,  28,  192, 3, 1, 1, true,  kRelu6, false, 2},
    {"mobilenetv2", "features.5.conv.2",    192,  28,  28,   32, 1, 1, 0, false, kNone,  true,  2},
    {"mobilenetv2", "features.7.conv.1",    192,  28,  28,  192, 3, 2, 1, true,  kRelu6, false, 1},
    {"mobilenetv2", "features.7.conv.2",    192,  14,  14,   64, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.8.conv.0",     64,  14,  14,  384, 1, 1, 0, false, kRelu6, false, 4},
    {"mobilenetv2", "features.8.conv.1",    384,  14,  14,  384, 3, 1, 1, true,  kRelu6, false, 4},
    {"mobilenetv2", "features.8.conv.2",    384,  14,  14,   64, 1, 1, 0, false, kNone,  true,  3},
    {"mobilenetv2", "features.11.conv.2",   384,  14,  14,   96, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.12.conv.0",    96,  14,  14,  576, 1, 1, 0, false, kRelu6, false, 3},
    {"mobilenetv2", "features.12.conv.1",   576,  14,  14,  576, 3, 1, 1, true,  kRelu6, false, 2},
    {"mobilenetv2", "features.12.conv.2",   576,  14,  14,   96, 1, 1, 0, false, kNone,  true,  2},
    {"mobilenetv2", "features.14.conv.1",   576,  14,  14,  576, 3, 2, 1, true,  kRelu6, false, 1},
    {"mobilenetv2", "features.14.conv.2",   576,   7,   7,  160, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.15.conv.0",   160,   7,   7,  960, 1, 1, 0, false, kRelu6, false, 3},
    {"mobilenetv2", "features.15.conv.1",   960,   7,   7,  960, 3, 1, 1, true,  kRelu6, false, 3},
    {"mobilenetv2", "features.15.conv.2",   960,   7,   7,  160, 1, 1, 0, false, kNone,  true,  2},
    {"mobilenetv2", "features.17.conv.2",   960,   7,   7,  320, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.18",          320,   7,   7, 1280, 1, 1, 0, false, kRelu6, false, 1},
};
// clang-format on
constexpr size_t kNumLayers = sizeof(kLayers) / sizeof(kLayers[0]);

const char* epilogue_name(ConvEpilogue e) {
  return e == kNone ? "none" : e == kRelu ? "relu" : "relu6";
}

// ---------------------------------------------------------------------------------------------
// --check-table / --print-table

using LayerKey =
    std::tuple<bool, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, ConvEpilogue, bool>;
LayerKey key_of(const Layer& l) {
  return {l.depthwise, l.ci, l.h, l.w, l.co, l.k, l.stride, l.pad, l.epilogue, l.residual};
}
std::string describe_key(const LayerKey& k) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s %ldx%ldx%ld -> %ld, %ldx%ld stride %d pad %d, %s%s",
                std::get<0>(k) ? "depthwise" : "conv", static_cast<long>(std::get<1>(k)),
                static_cast<long>(std::get<2>(k)), static_cast<long>(std::get<3>(k)),
                static_cast<long>(std::get<4>(k)), static_cast<long>(std::get<5>(k)),
                static_cast<long>(std::get<5>(k)), std::get<6>(k), std::get<7>(k),
                std::get<9>(k) ? "residual + " : "", epilogue_name(std::get<8>(k)));
  return buf;
}

// "layer1.0.downsample.0.weight'_hwio" -> "layer1.0.downsample"; "features.2.conv.1.0.weight"
// -> "features.2.conv.1": the torchvision module, without the index of the conv inside a
// Sequential (Conv2dNormActivation, downsample).
std::string layer_name(const graph::ConvKernelSpec& c) {
  std::string n = c.weights.name;
  const size_t dot = n.find(".weight");
  if (dot == std::string::npos) return c.name;  // not a torch.onnx export: the node's name
  n.resize(dot);
  if (n.size() > 2 && n.compare(n.size() - 2, 2, ".0") == 0) n.resize(n.size() - 2);
  return n;
}

struct Found {
  std::string name;
  int count = 0;
  size_t order = 0;
};

// The distinct conv kernels Kiln makes of `path`, in first-occurrence order; throws
// graph::Error for a conv the table's form cannot describe.
std::map<LayerKey, Found> model_convs(const std::string& path) {
  const graph::Graph optimized = graph::run_passes(cli::load_model(path));
  std::map<LayerKey, Found> found;
  size_t order = 0;
  for (const graph::KernelSpec& k : graph::lower_to_kernels(optimized)) {
    if (const auto* op = std::get_if<graph::OpKernelSpec>(&k)) {
      if (std::holds_alternative<graph::Conv2d>(op->op))
        throw graph::Error("conv '" + op->name +
                           "' runs as a portable kernel, not a Halide kernel: not in the table's "
                           "form");
      continue;
    }
    const auto* c = std::get_if<graph::ConvKernelSpec>(&k);
    if (!c) continue;
    const graph::Shape& in = c->input.shape;
    const graph::Shape& w = c->weights.shape;
    const bool square = in.size() == 4 && w.size() == 4 && in[0] == 1 && w[0] == w[1] &&
                        c->stride_h == c->stride_w && c->pad_top == c->pad_left &&
                        c->pad_top == c->pad_bottom && c->pad_top == c->pad_right &&
                        c->dilation_h == 1 && c->dilation_w == 1 &&
                        c->input.layout == graph::Layout::nhwc;
    if (!square || !graph::conv_epilogue_supported(c->activation))
      throw graph::Error("conv '" + c->name +
                         "' is not in the table's form (batch 1, NHWC, square "
                         "kernel, equal strides, symmetric padding, dilation 1)");
    const LayerKey key{c->depthwise,
                       in[3],
                       in[1],
                       in[2],
                       w[3],
                       w[0],
                       c->stride_h,
                       c->pad_top,
                       runtime::conv_epilogue(c->activation),
                       c->residual.has_value()};
    Found& f = found[key];
    if (f.count++ == 0) {
      f.name = layer_name(*c);
      f.order = order++;
    }
  }
  return found;
}

std::string model_of_path(const std::string& path) {
  std::string stem = path.substr(path.find_last_of('/') + 1);
  return stem.substr(0, stem.find('.'));
}

int print_table(const std::string& path, const std::string& model) {
  const auto found = model_convs(path);
  std::vector<std::pair<LayerKey, Found>> rows(found.begin(), found.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
  for (const auto& [k, f] : rows) {
    const std::string head = "{\"" + model + "\", \"" + f.name + "\",";
    const ConvEpilogue e = std::get<8>(k);
    std::printf("    %-38s %4ld, %3ld, %3ld, %4ld, %ld, %d, %d, %-6s %-7s %-6s %d},\n",
                head.c_str(), static_cast<long>(std::get<1>(k)), static_cast<long>(std::get<2>(k)),
                static_cast<long>(std::get<3>(k)), static_cast<long>(std::get<4>(k)),
                static_cast<long>(std::get<5>(k)), std::get<6>(k), std::get<7>(k),
                std::get<0>(k) ? "true," : "false,",
                e == kNone   ? "kNone,"
                : e == kRelu ? "kRelu,"
                             : "kRelu6,",
                std::get<9>(k) ? "true," : "false,", f.count);
  }
  return 0;
}

int check_table(const std::string& path, const std::string& model) {
  const auto found = model_convs(path);
  std::map<LayerKey, const Layer*> table;
  int errors = 0;
  for (const Layer& l : kLayers) {
    if (model != l.model) continue;
    if (!table.emplace(key_of(l), &l).second) {
      std::fprintf(stderr, "table mismatch: %s_%s duplicates an earlier row (%s)\n", l.model,
                   l.name, describe_key(key_of(l)).c_str());
      ++errors;
    }
  }
  if (table.empty()) {
    std::fprintf(stderr, "table mismatch: the table has no layers of model '%s'\n", model.c_str());
    return 1;
  }
  int convs = 0;
  for (const auto& [key, f] : found) {
    convs += f.count;
    auto it = table.find(key);
    if (it == table.end()) {
      std::fprintf(stderr, "table mismatch: %s has %d x %s (first: %s), missing from the table\n",
                   path.c_str(), f.count, describe_key(key).c_str(), f.name.c_str());
      ++errors;
      continue;
    }
    const Layer& l = *it->second;
    if (l.count != f.count) {
      std::fprintf(stderr, "table mismatch: %s_%s (%s): the table says %d, the model has %d\n",
                   l.model, l.name, describe_key(key).c_str(), l.count, f.count);
      ++errors;
    }
    if (f.name != l.name) {
      std::fprintf(stderr,
                   "table mismatch: %s (%s) is named '%s' in the table, '%s' in the model\n",
                   describe_key(key).c_str(), model.c_str(), l.name, f.name.c_str());
      ++errors;
    }
  }
  for (const auto& [key, l] : table)
    if (!found.count(key)) {
      std::fprintf(stderr, "table mismatch: %s_%s (%s) is not a conv kernel of %s\n", l->model,
                   l->name, describe_key(key).c_str(), path.c_str());
      ++errors;
    }
  if (errors) {
    std::fprintf(stderr,
                 "%d table mismatches for %s (bench_conv --print-table %s prints the rows)\n",
                 errors, model.c_str(), path.c_str());
    return 1;
  }
  std::printf("table of %s matches %s: %zu distinct conv kernels, %d convs\n", model.c_str(),
              path.c_str(), found.size(), convs);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Benchmarks

bool g_onednn_nhwc = false;
std::map<int, double> g_peak;       // measured FMA GFLOP/s by thread count
std::map<int, double> g_bandwidth;  // measured copy GB/s by thread count
std::set<std::string> g_failed;     // layers whose check failed

// A layer's implementations, made on first use and kept (interleaving revisits them). oneDNN
// fixes its thread count when the primitive is created: one primitive per thread count.
struct Prepared {
  std::unique_ptr<bench::KilnConv> kiln;
  std::map<int, std::unique_ptr<bench::OneDnnConv>> onednn;
  bool checked = false;
  std::string error;
};
Prepared g_prepared[kNumLayers];

// The kernels' own parallelism. Halide's pool does not shrink once its workers exist:
// halide_set_num_threads(1) after a 2-thread run left Kiln at its 2-thread speed (measured, this
// Halide 21 runtime), so a change of thread count restarts the pool (outside timed loops).
// OpenMP takes omp_set_num_threads for the next parallel region; oneDNN's primitives are made
// per thread count (see Prepared).
int g_halide_threads = 0;
void set_threads(int n) {
  if (n != g_halide_threads) {
    halide_shutdown_thread_pool();
    halide_set_num_threads(n);
    g_halide_threads = n;
  }
  omp_set_num_threads(n);
}

// Runs both once on the same data and compares (max abs difference against a tolerance
// relative to the output's magnitude). Returns an error message, empty when they agree.
std::string check_layer(const Layer& l, bench::KilnConv& k, bench::OneDnnConv& d) {
  if (k.run() != 0) return "Kiln's kernel returned an error";
  d.run();
  const std::vector<float> ref = d.output_nhwc();
  double magnitude = 0;
  for (float v : ref) magnitude = std::max(magnitude, std::fabs(static_cast<double>(v)));
  const double err = graph::max_abs_diff(k.output(), ref);
  const double tol = 1e-4 * std::max(1.0, magnitude);
  std::fprintf(stderr,
               "check %-36s max |kiln - onednn| %.2e (max |out| %.2f, tolerance %.1e), oneDNN %s\n",
               l.id().c_str(), err, magnitude, tol, d.implementation().c_str());
  if (magnitude == 0) return "oneDNN's output is all zeros: the data cannot show a difference";
  if (!(err <= tol)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "Kiln and oneDNN disagree: max abs difference %g > %g", err,
                  tol);
    return buf;
  }
  return "";
}

// The layer's state for `threads` (which must be set already), checked on first use.
Prepared& prepare(size_t index, int threads) {
  const Layer& l = kLayers[index];
  Prepared& p = g_prepared[index];
  if (!p.error.empty()) return p;
  try {
    if (!p.kiln)
      p.kiln = std::make_unique<bench::KilnConv>(l.shape(), runtime::ConvSchedule::tuned, -1,
                                                 l.epilogue_spec());
    auto& d = p.onednn[threads];
    if (!d) d = std::make_unique<bench::OneDnnConv>(l.shape(), g_onednn_nhwc, l.epilogue_spec());
    if (!p.checked) {
      p.checked = true;
      p.error = check_layer(l, *p.kiln, *d);
    }
  } catch (const std::exception& e) {
    p.error = std::string("setup failed: ") + e.what();
  }
  if (!p.error.empty()) {
    std::fprintf(stderr, "%s: %s; not benchmarking it\n", l.id().c_str(), p.error.c_str());
    g_failed.insert(l.id());
  }
  return p;
}

// OpenMP's workers keep spinning for some milliseconds after oneDNN's last parallel region
// (libgomp's default spin count), on the core the next benchmark needs: measured, a Kiln
// 2-thread run of a 23 us layer took 26-40 us when it came right after oneDNN, and exactly 23 us
// with OMP_WAIT_POLICY=passive (which slows oneDNN 3x instead). So a benchmark that follows a
// different implementation or thread count first sleeps until they have gone to sleep (not
// timed, both ways for symmetry).
constexpr auto kSettle = std::chrono::milliseconds(30);
int g_last_run = -1;  // 2 * threads + kiln of the previous run

void BM_conv(benchmark::State& state, size_t index, bool kiln, int threads) {
  const Layer& l = kLayers[index];
  set_threads(threads);
  if (g_last_run != 2 * threads + kiln) std::this_thread::sleep_for(kSettle);
  g_last_run = 2 * threads + kiln;
  Prepared& p = prepare(index, threads);
  if (!p.error.empty()) {
    state.SkipWithError(p.error.c_str());
    return;
  }
  bench::KilnConv& k = *p.kiln;
  bench::OneDnnConv& d = *p.onednn[threads];
  // One untimed run: the data into cache, Halide's and OpenMP's workers awake.
  if (kiln ? k.run() != 0 : (d.run(), false)) {
    state.SkipWithError("Kiln's kernel returned an error");
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (kiln) {
    for (auto _ : state)
      if (k.run() != 0) state.SkipWithError("Kiln's kernel returned an error");
  } else {
    for (auto _ : state) d.run();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Plain counters from the wall time of the loop: the kernels run on their own thread pools,
  // so the main thread's CPU time (Google Benchmark's rate basis without UseRealTime, which
  // would add "/real_time" to the names) is not the measure.
  const bench::ConvShape s = l.shape();
  const double iters = static_cast<double>(state.iterations());
  const double gflops = s.flops() * iters / seconds * 1e-9;
  state.counters["GFLOP/s"] = gflops;
  state.counters["peak_pct"] = 100.0 * gflops / g_peak[threads];
  state.counters["MFLOP"] = s.flops() * 1e-6;
  state.counters["count"] = l.count;
  if (l.depthwise) state.counters["GB/s"] = s.bytes() * iters / seconds * 1e-9;
}

std::string bench_name(const Layer& l, bool kiln, int threads) {
  return "BM_conv/" + l.id() + (kiln ? "/kiln" : "/onednn") + "/threads:" + std::to_string(threads);
}

// Forwards everything to the reporter --benchmark_format asks for and keeps each benchmark's
// median real time (or its only run, with one repetition) for the summary.
class SummaryReporter : public benchmark::BenchmarkReporter {
 public:
  explicit SummaryReporter(std::unique_ptr<benchmark::BenchmarkReporter> inner)
      : inner_(std::move(inner)) {}
  bool ReportContext(const Context& c) override { return inner_->ReportContext(c); }
  void ReportRuns(const std::vector<Run>& runs) override {
    inner_->ReportRuns(runs);
    for (const Run& r : runs) {
      const std::string& name = r.run_name.function_name;
      if (r.error_occurred) {
        errors_.insert(name);
        continue;
      }
      const double t = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
      if (r.run_type == Run::RT_Iteration) {
        if (r.repetitions <= 1) seconds_[name] = t;
      } else if (r.aggregate_name == "median") {
        seconds_[name] = t;
      } else if (r.aggregate_name == "min") {
        min_[name] = t;
      }
    }
  }
  void Finalize() override { inner_->Finalize(); }

  double seconds(const std::string& name) const {
    auto it = seconds_.find(name);
    return it == seconds_.end() ? 0.0 : it->second;
  }
  // Median / fastest repetition - 1: how far the median sits above the best run. Near 0 on a
  // quiet machine; a contaminated median (most repetitions disturbed) shows up here, where a
  // single outlier (which the median ignores) does not. 0 with one repetition.
  double spread(const std::string& name) const {
    auto m = seconds_.find(name), lo = min_.find(name);
    return m == seconds_.end() || lo == min_.end() || lo->second <= 0
               ? 0.0
               : m->second / lo->second - 1.0;
  }
  bool any_error() const { return !errors_.empty(); }

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> inner_;
  std::map<std::string, double> seconds_, min_;
  std::set<std::string> errors_;
};

// The table of medians, to stderr (stdout may be JSON).
void print_summary(const SummaryReporter& rep, const std::vector<size_t>& layers,
                   const std::vector<int>& threads) {
  std::fflush(stdout);
  std::cout.flush();
  FILE* o = stderr;
  std::fprintf(
      o,
      "\nKiln vs oneDNN%s, medians; speed = oneDNN time / Kiln time (> 1: Kiln faster);\n"
      "GFLOP/s and %%peak are Kiln's; sprd%%: how far above its fastest repetition a median\n"
      "is, the larger of the two (a disturbed measurement when high)\n",
      g_onednn_nhwc ? " (NHWC activations)" : " (its own activation layout)");
  for (int t : threads) {
    std::fprintf(o, "measured FMA peak, %d thread%s: %.1f GFLOP/s", t, t > 1 ? "s" : "", g_peak[t]);
    if (g_bandwidth.count(t)) std::fprintf(o, "; copy bandwidth %.1f GB/s", g_bandwidth[t]);
    std::fprintf(o, "\n");
  }
  std::fprintf(o, "\n%-36s %3s %5s %8s %10s %10s %8s %6s %7s %5s %s\n", "layer", "thr", "count",
               "MFLOP", "kiln us", "onednn us", "GFLOP/s", "%peak", "speed", "sprd%",
               "GB/s kiln/onednn (depthwise)");
  struct Stat {
    double worst = 1e30;
    std::string worst_name;
    int good = 0, n = 0, noisy = 0;
    std::map<std::string, std::pair<double, double>> model_time;  // kiln, onednn: sum count x t
  };
  std::map<int, Stat> stats;
  for (size_t li : layers) {
    const Layer& l = kLayers[li];
    for (int t : threads) {
      const double tk = rep.seconds(bench_name(l, true, t));
      const double td = rep.seconds(bench_name(l, false, t));
      if (tk <= 0 || td <= 0) continue;
      const bench::ConvShape s = l.shape();
      const double gflops = s.flops() / tk * 1e-9, ratio = td / tk;
      const double spread =
          std::max(rep.spread(bench_name(l, true, t)), rep.spread(bench_name(l, false, t)));
      std::fprintf(o, "%-36s %3d %5d %8.2f %10.1f %10.1f %8.1f %5.1f%% %6.3fx %5.1f",
                   l.id().c_str(), t, l.count, s.flops() * 1e-6, tk * 1e6, td * 1e6, gflops,
                   100.0 * gflops / g_peak[t], ratio, 100.0 * spread);
      if (l.depthwise)
        std::fprintf(o, " %6.1f / %6.1f", s.bytes() / tk * 1e-9, s.bytes() / td * 1e-9);
      std::fprintf(o, "\n");
      Stat& st = stats[t];
      ++st.n;
      if (spread > 0.1) ++st.noisy;
      if (ratio >= 0.9) ++st.good;
      if (ratio < st.worst) {
        st.worst = ratio;
        st.worst_name = l.id();
      }
      auto& mt = st.model_time[l.model];
      mt.first += l.count * tk;
      mt.second += l.count * td;
    }
  }
  std::fprintf(o, "\n");
  for (auto& [t, st] : stats) {
    for (const auto& [model, mt] : st.model_time)
      std::fprintf(
          o,
          "threads %d, %s, sum of count x median over its benchmarked layers: kiln %.2f ms, "
          "onednn %.2f ms, speed %.3fx\n",
          t, model.c_str(), mt.first * 1e3, mt.second * 1e3, mt.second / mt.first);
    std::fprintf(o, "threads %d: worst speed %.3fx (%s); %d of %d layers >= 0.9x", t, st.worst,
                 st.worst_name.c_str(), st.good, st.n);
    if (st.noisy) std::fprintf(o, " (%d with sprd > 10%%)", st.noisy);
    std::fprintf(o, "\n");
  }
  // Whether the thread count took effect: the time ratio of n threads to 1, per implementation.
  if (threads.size() > 1 && std::count(threads.begin(), threads.end(), 1)) {
    for (int t : threads) {
      if (t == 1) continue;
      for (bool kiln : {true, false}) {
        double log_sum = 0;
        int n = 0;
        for (size_t li : layers) {
          const double t1 = rep.seconds(bench_name(kLayers[li], kiln, 1));
          const double tn = rep.seconds(bench_name(kLayers[li], kiln, t));
          if (t1 > 0 && tn > 0) {
            log_sum += std::log(t1 / tn);
            ++n;
          }
        }
        if (!n) continue;
        const double speedup = std::exp(log_sum / n);
        std::fprintf(o, "%s, 1 -> %d threads: geometric-mean speed-up %.2fx over %d layers%s\n",
                     kiln ? "kiln" : "onednn", t, speedup, n,
                     speedup < 1.2 ? " (WARNING: did the thread count take effect?)" : "");
      }
    }
  }
}

std::unique_ptr<benchmark::BenchmarkReporter> make_display_reporter(const std::string& format) {
  if (format == "json") return std::make_unique<benchmark::JSONReporter>();
  if (format == "csv") {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return std::make_unique<benchmark::CSVReporter>();
#pragma GCC diagnostic pop
  }
  return std::make_unique<benchmark::ConsoleReporter>(
      isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                            : benchmark::ConsoleReporter::OO_Tabular);
}

constexpr const char* kHelp = R"(usage: bench_conv [options] [Google Benchmark flags]

Every distinct convolution of ResNet-50 and MobileNetV2 (batch 1, 224x224), Kiln against
oneDNN, interleaved; a summary table of medians goes to stderr at the end.

options:
  --threads LIST         thread counts, comma-separated (default 1,2)
  --filter-layer REGEX   only layers whose <model>_<layer> matches (std::regex search)
  --quick                3 repetitions of at least 0.02 s (default 5 of 0.1 s)
  --onednn-nhwc          oneDNN on NHWC activations (default: the layout oneDNN prefers)
  --list                 print the layer table and exit
  --check-table MODEL    exit 1 unless Kiln's conv kernels of MODEL.onnx equal the table
  --print-table MODEL    print MODEL.onnx's conv kernels as table rows
  --as NAME              the table model for --check-table/--print-table (default: the
                         file name up to its first dot)
Benchmark names: BM_conv/<model>_<layer>/<kiln|onednn>/threads:<n>.
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2};
  std::string filter_layer, check_path, print_path, as_model, format = "console";
  bool quick = false, list = false;
  std::vector<char*> passthrough;
  auto value = [&](int& i) -> std::string {
    const char* eq = std::strchr(argv[i], '=');
    if (eq) return eq + 1;
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", argv[i]);
      std::exit(2);
    }
    return argv[++i];
  };
  auto is = [&](int i, const char* flag) {
    const size_t n = std::strlen(flag);
    return std::strncmp(argv[i], flag, n) == 0 && (argv[i][n] == 0 || argv[i][n] == '=');
  };
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (is(i, "--threads")) {
      threads.clear();
      const std::string v = value(i);
      for (size_t p = 0; p <= v.size();) {
        const size_t q = std::min(v.find(',', p), v.size());
        const int n = std::atoi(v.substr(p, q - p).c_str());
        if (n < 1 || n > 256) {
          std::fprintf(stderr, "--threads: expected a list like 1,2, got '%s'\n", v.c_str());
          return 2;
        }
        if (std::find(threads.begin(), threads.end(), n) == threads.end()) threads.push_back(n);
        p = q + 1;
      }
    } else if (is(i, "--filter-layer")) {
      filter_layer = value(i);
    } else if (is(i, "--check-table")) {
      check_path = value(i);
    } else if (is(i, "--print-table")) {
      print_path = value(i);
    } else if (is(i, "--as")) {
      as_model = value(i);
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--onednn-nhwc") == 0) {
      g_onednn_nhwc = true;
    } else if (std::strcmp(argv[i], "--list") == 0) {
      list = true;
    } else {
      if (std::strncmp(argv[i], "--benchmark_format=", 19) == 0) format = argv[i] + 19;
      passthrough.push_back(argv[i]);
    }
  }

  if (!check_path.empty() || !print_path.empty()) {
    const std::string& path = check_path.empty() ? print_path : check_path;
    const std::string model = as_model.empty() ? model_of_path(path) : as_model;
    try {
      return check_path.empty() ? print_table(path, model) : check_table(path, model);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), e.what());
      return 1;
    }
  }
  if (list) {
    std::printf("%-36s %5s %5s %5s %5s %3s %6s %3s %-9s %-6s %-8s %5s %8s\n", "layer", "Ci", "H",
                "W", "Co", "K", "stride", "pad", "kind", "act", "residual", "count", "MFLOP");
    for (const Layer& l : kLayers)
      std::printf("%-36s %5ld %5ld %5ld %5ld %3ld %6d %3d %-9s %-6s %-8s %5d %8.2f\n",
                  l.id().c_str(), static_cast<long>(l.ci), static_cast<long>(l.h),
                  static_cast<long>(l.w), static_cast<long>(l.co), static_cast<long>(l.k), l.stride,
                  l.pad, l.depthwise ? "depthwise" : "dense", epilogue_name(l.epilogue),
                  l.residual ? "yes" : "no", l.count, l.shape().flops() * 1e-6);
    return 0;
  }

  std::vector<size_t> layers;
  try {
    const std::regex re(filter_layer);
    for (size_t i = 0; i < kNumLayers; ++i)
      if (std::regex_search(kLayers[i].id(), re)) layers.push_back(i);
  } catch (const std::regex_error& e) {
    std::fprintf(stderr, "--filter-layer: bad regular expression: %s\n", e.what());
    return 2;
  }
  if (layers.empty()) {
    std::fprintf(stderr, "--filter-layer '%s' matches no layer (see --list)\n",
                 filter_layer.c_str());
    return 2;
  }

  // Defaults that make the comparison survive a noisy machine; command-line flags override
  // (they come later). The whole table at 1 and 2 threads: about 3.5 minutes on 2 idle cores.
  std::vector<std::string> defaults = {
      quick ? "--benchmark_repetitions=3" : "--benchmark_repetitions=5",
      "--benchmark_enable_random_interleaving=true", "--benchmark_report_aggregates_only=true",
      quick ? "--benchmark_min_time=0.02" : "--benchmark_min_time=0.1"};
  std::vector<char*> all = {argv[0]};
  for (std::string& d : defaults) all.push_back(d.data());
  all.insert(all.end(), passthrough.begin(), passthrough.end());
  int n = static_cast<int>(all.size());
  benchmark::Initialize(&n, all.data());
  if (benchmark::ReportUnrecognizedArguments(n, all.data())) return 2;

  bool any_depthwise = false;
  for (size_t li : layers) any_depthwise |= kLayers[li].depthwise;
  // The best of three short measurements, so that a moment of disturbance on a shared machine
  // does not lower the yardstick.
  auto best_of_3 = [](double (*measure)(int), int t) {
    return std::max({measure(t), measure(t), measure(t)});
  };
  for (int t : threads) {
    g_peak[t] = best_of_3(bench::measured_fma_peak_gflops, t);
    benchmark::AddCustomContext("fma_peak_gflops_threads_" + std::to_string(t),
                                std::to_string(g_peak[t]));
    if (any_depthwise) {
      g_bandwidth[t] = best_of_3(bench::measured_bandwidth_gbs, t);
      benchmark::AddCustomContext("copy_bandwidth_gbs_threads_" + std::to_string(t),
                                  std::to_string(g_bandwidth[t]));
    }
  }
  benchmark::AddCustomContext("onednn_activations", g_onednn_nhwc ? "nhwc" : "any");

  for (size_t li : layers)
    for (int t : threads)
      for (bool kiln : {true, false})
        benchmark::RegisterBenchmark(bench_name(kLayers[li], kiln, t).c_str(), BM_conv, li, kiln, t)
            ->Unit(benchmark::kMicrosecond)
            ->ComputeStatistics("min", [](const std::vector<double>& v) {
              return *std::min_element(v.begin(), v.end());
            });

  SummaryReporter reporter(make_display_reporter(format));
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_summary(reporter, layers, threads);
  benchmark::Shutdown();
  for (const std::string& f : g_failed) std::fprintf(stderr, "FAILED: %s\n", f.c_str());
  return g_failed.empty() && !reporter.any_error() ? 0 : 1;
}
