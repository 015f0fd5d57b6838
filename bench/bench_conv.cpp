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
#include "conv_layers.h"
#include "conv_peers.h"
#include "graph/kernel_spec.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "runtime/kernels.h"

namespace {

using namespace kiln;
using Layer = bench::ConvLayer;
using bench::epilogue_name;
const Layer* const kLayers = bench::kConvLayers;
const size_t kNumLayers = bench::kNumConvLayers;

// ---------------------------------------------------------------------------------------------
// Benchmarks

bool g_onednn_nhwc = false;
int g_cpu_target = -1;  // --target: Kiln's kernels for this CPU target (-1: the best it runs)
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
std::vector<Prepared> g_prepared(kNumLayers);

// The kernels' own parallelism: Kiln's thread pool (runtime/thread_pool.h), resized when the
// count changes (outside timed loops). OpenMP takes omp_set_num_threads for the next parallel
// region; oneDNN's primitives are made per thread count (see Prepared).
void set_threads(int n) {
  kiln::set_kernel_threads(n);
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
      p.kiln = std::make_unique<bench::KilnConv>(l.shape(), Schedule::tuned, g_cpu_target,
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
  if (g_cpu_target >= 0)
    std::fprintf(o, "Kiln's kernels for %s; oneDNN's instruction set: ONEDNN_MAX_CPU_ISA=%s\n",
                 runtime::cpu_targets()[static_cast<size_t>(g_cpu_target)].c_str(),
                 std::getenv("ONEDNN_MAX_CPU_ISA") ? std::getenv("ONEDNN_MAX_CPU_ISA")
                                                   : "(unset: the best it runs)");
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
  --target T             Kiln's kernels for CPU target T: avx512, avx2, baseline or one of
                         the build's Halide target strings (default: the best this CPU runs).
                         oneDNN picks its own instruction set: set ONEDNN_MAX_CPU_ISA (e.g.
                         AVX2) to compare like with like. %peak stays of the best FMA peak
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
    } else if (is(i, "--target")) {
      try {
        g_cpu_target = kiln::cli::parse_cpu_target("--target", value(i));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 2;
      }
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
    const std::string model = as_model.empty() ? bench::model_of_path(path) : as_model;
    try {
      return check_path.empty() ? bench::print_layer_table(path, model)
                               : bench::check_layer_table(path, model);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), e.what());
      return 1;
    }
  }
  if (list) {
    std::printf("%-36s %5s %5s %5s %5s %3s %6s %3s %-9s %-6s %-8s %5s %8s\n", "layer", "Ci", "H",
                "W", "Co", "K", "stride", "pad", "kind", "act", "residual", "count", "MFLOP");
    for (size_t i = 0; i < kNumLayers; ++i) {
      const Layer& l = kLayers[i];
      std::printf("%-36s %5ld %5ld %5ld %5ld %3ld %6d %3d %-9s %-6s %-8s %5d %8.2f\n",
                  l.id().c_str(), static_cast<long>(l.ci), static_cast<long>(l.h),
                  static_cast<long>(l.w), static_cast<long>(l.co), static_cast<long>(l.k), l.stride,
                  l.pad, l.depthwise ? "depthwise" : "dense", epilogue_name(l.epilogue),
                  l.residual ? "yes" : "no", l.count, l.shape().flops() * 1e-6);
    }
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
