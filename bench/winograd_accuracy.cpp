// Winograd's rounding error on a model's layers (docs/tuning.md quotes its output). Every dense
// 3x3 stride-1 or stride-2 convolution of the optimized model, with its real (BatchNorm-folded)
// weights and bias and no epilogue, on seeded random inputs in [-1, 1]: the default direct
// schedule and Winograd F(2x2) and F(4x4) (stride 1 only; "-" at stride 2) against the reference
// interpreter (double accumulation). Then the whole model with every such layer on each Winograd
// tile (stride-2 layers on F(2x2) in both) against the reference on one random input, at the
// tolerance of the end-to-end tests (rtol 1e-3, atol 1e-4). Last, the whole model's latency with
// the default schedules against the same with the direct default in place of every default Winograd
// kernel: alternating runs in this process, medians.
//   winograd_accuracy MODEL.onnx [MODEL.onnx ...]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "codegen/kernel_library.h"
#include "codegen/kernel_pipeline.h"
#include "graph/builder.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kiln/runtime.h"

namespace {

using namespace kiln;

bool eligible(const graph::ConvKernelSpec& c) {
  return !c.depthwise && c.groups == 1 && c.weights.shape[0] == 3 && c.weights.shape[1] == 3 &&
         c.stride_h == c.stride_w && c.stride_w <= 2 && c.dilation_h == 1 && c.dilation_w == 1;
}

codegen::CodegenOptions codegen_options() {
  codegen::CodegenOptions c;
  c.cache_dir = std::string(std::getenv("HOME") ? std::getenv("HOME") : "/tmp") + "/.cache/kiln";
  return c;
}

// The direct default in place of a Winograd default, for the lookup of a kernel on `target`.
std::string direct_schedule(const graph::KernelSpec& k, const std::string& target) {
  return std::holds_alternative<graph::ConvKernelSpec>(k)
             ? codegen::schedule_for_weight_tile(k, Halide::Target(target), "", 0)
             : std::string();
}

// Runs `g` on `inputs` with `schedule` for every eligible convolution ("direct": the direct
// default); the output in `layout`.
std::vector<float> run(const graph::Graph& g, const std::vector<graph::Tensor>& inputs,
                       const std::string& schedule, graph::Layout layout) {
  codegen::CodegenOptions c = codegen_options();
  c.schedules = [schedule](const graph::KernelSpec& k, const std::string& target) {
    const auto* conv = std::get_if<graph::ConvKernelSpec>(&k);
    if (schedule == "direct") return direct_schedule(k, target);
    if (!conv || !eligible(*conv)) return std::string();
    return conv->stride_w == 2 ? std::string("winograd tile=2") : schedule;
  };
  ModelOptions o;
  o.generate_kernels = codegen::kernel_generator(c);
  Model m(g, o);
  const Status s = m.run(inputs);
  if (!s) throw graph::Error(s.message());
  const TensorView out = m.output(0);
  if (out.layout == layout || out.shape.size() != 4)
    return std::vector<float>(out.data, out.data + graph::num_elements(out.shape));
  return graph::to_layout(out.data, out.shape, out.layout, layout).data;
}

struct Error {
  double abs = 0, rel = 0, ratio = 0;  // max |error|, that over max |reference|, tolerance ratio
};

Error error_of(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 0;
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  Error e;
  e.abs = graph::max_abs_diff(got, want);
  e.rel = scale > 0 ? e.abs / scale : e.abs;
  e.ratio = graph::worst_error_ratio(got, want, 1e-3, 1e-4);
  return e;
}

const char* const kSchedules[] = {"direct", "winograd tile=2", "winograd tile=4"};


// Median latencies (ms) of `g` with the default schedules and with the direct default wherever
// the default is Winograd, in alternating runs.
std::pair<double, double> time_defaults(const graph::Graph& g,
                                        const std::vector<graph::Tensor>& inputs) {
  codegen::CodegenOptions direct = codegen_options();
  direct.schedules = direct_schedule;
  ModelOptions o;
  o.generate_kernels = codegen::kernel_generator(codegen_options());
  Model winograd_model(g, o);
  o.generate_kernels = codegen::kernel_generator(direct);
  Model direct_model(g, o);
  std::vector<double> ms[2];
  for (int round = 0; round < 23; ++round)
    for (int m = 0; m < 2; ++m) {
      Model& model = (m + round) % 2 ? direct_model : winograd_model;
      const auto t0 = std::chrono::steady_clock::now();
      if (!model.run(inputs)) throw graph::Error("a timed run failed");
      const double t = std::chrono::duration<double, std::milli>(
                           std::chrono::steady_clock::now() - t0).count();
      if (round >= 3) ms[&model == &direct_model].push_back(t);
    }
  for (auto& v : ms) std::sort(v.begin(), v.end());
  return {ms[0][ms[0].size() / 2], ms[1][ms[1].size() / 2]};
}

int measure(const std::string& path) {
  const graph::Graph input = cli::load_model(path);
  const graph::Graph g = graph::run_passes(input);
  ModelOptions lower;
  lower.lower_only = true;
  const Model lowered(g, lower);
  std::printf("%s: max abs error, its ratio to max |output|, and max error / (atol + rtol |ref|)\n",
              path.c_str());
  std::printf("%-28s %-22s %-30s %-30s %-30s\n", "layer", "shape", "direct", "winograd tile=2",
              "winograd tile=4");
  uint64_t seed = 1;
  for (const graph::KernelSpec& k : lowered.kernels()) {
    const auto* c = std::get_if<graph::ConvKernelSpec>(&k);
    if (!c || !eligible(*c)) continue;
    const graph::Shape in = graph::conv_input_nhwc(*c);
    graph::GraphBuilder b;
    const graph::ValueId x = b.input("x", in, graph::Layout::nhwc);
    const graph::ValueId w = b.constant("w", c->weights.shape, *g.value(c->weights.value).data,
                                        graph::Layout::hwio);
    const graph::ValueId bias = b.constant("b", c->bias.shape, *g.value(c->bias.value).data);
    graph::Conv2d attrs;
    attrs.stride_h = c->stride_h, attrs.stride_w = c->stride_w;
    attrs.pad_top = c->pad_top, attrs.pad_left = c->pad_left;
    attrs.pad_bottom = c->pad_bottom, attrs.pad_right = c->pad_right;
    b.output(b.op("conv", attrs, {x, w, bias}));
    const graph::Graph layer = b.finish();
    const std::vector<graph::Tensor> xs = {
        {in, graph::Layout::nhwc, graph::random_uniform(graph::num_elements(in), -1, 1, seed++)}};
    const graph::Tensor want = graph::run_reference(layer, xs)[0];
    char shape[64];
    std::snprintf(shape, sizeof shape, "%lldx%lld %lld->%lld%s", (long long)in[1], (long long)in[2],
                  (long long)in[3], (long long)c->output.shape[3], c->stride_w == 2 ? " /2" : "");
    std::printf("%-28s %-22s", c->name.substr(0, 28).c_str(), shape);
    for (const char* s : kSchedules) {
      if (c->stride_w == 2 && std::string(s) == "winograd tile=4") {
        std::printf(" %-28s", "-");
        continue;
      }
      const Error e = error_of(run(layer, xs, s, want.layout), want.data);
      std::printf(" %9.2e %9.2e %6.3f  ", e.abs, e.rel, e.ratio);
    }
    std::printf("\n");
  }
  std::vector<graph::Tensor> xs;
  for (graph::ValueId v : input.inputs) {
    const graph::Value& iv = input.value(v);
    xs.push_back({iv.shape, iv.layout,
                  graph::random_uniform(graph::num_elements(iv.shape), -1, 1, seed++)});
  }
  const graph::Tensor want = graph::run_reference(input, xs)[0];
  std::printf("%-51s", "whole model, every eligible layer on the schedule");
  for (const char* s : kSchedules) {
    const Error e = error_of(run(g, xs, s, want.layout), want.data);
    std::printf(" %9.2e %9.2e %6.3f  ", e.abs, e.rel, e.ratio);
  }
  std::printf("\n");
  const auto [winograd_ms, direct_ms] = time_defaults(g, xs);
  std::printf("latency, 20 alternating runs, medians: defaults %.2f ms, direct in place of "
              "Winograd %.2f ms (%.2fx)\n", winograd_ms, direct_ms, direct_ms / winograd_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: winograd_accuracy MODEL.onnx [MODEL.onnx ...]\n");
    return 2;
  }
  try {
    for (int i = 1; i < argc; ++i) measure(argv[i]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
