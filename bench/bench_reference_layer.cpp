// The reference example's layer (N=1, C=64, 56x56, Co=64, 3x3, stride 2, pad 1, + bias + ReLU)
// with Kiln's naive and tuned schedules and oneDNN, interleaved in one process. Reports
// GFLOP/s, the fraction of this machine's measured FMA peak, and the ratio to oneDNN.
//
//   bench_reference_layer [--threads N] [--shape N,Ci,H,W,Co,K,stride,pad] [benchmark flags]
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "HalideRuntime.h"
#include "conv_peers.h"
#include "graph/reference.h"

namespace {

using namespace kiln;

// Overridable with --shape for schedule experiments on other layers.
bench::ConvShape kLayer{1, 64, 56, 56, 64, 3, 3, 2, 1};
double g_peak = 0;

void report(benchmark::State& state) {
  state.counters["GFLOP/s"] = benchmark::Counter(kLayer.flops() * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_fraction"] = benchmark::Counter(
      kLayer.flops() * 1e-9 / g_peak, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_kiln(benchmark::State& state, Schedule schedule) {
  bench::KilnConv conv(kLayer, schedule);
  if (conv.run() != 0) {
    state.SkipWithError("Kiln kernel failed");
    return;
  }
  for (auto _ : state) conv.run();
  report(state);
}

void BM_onednn(benchmark::State& state, bool nhwc) {
  bench::OneDnnConv conv(kLayer, nhwc);
  conv.run();
  for (auto _ : state) conv.run();
  report(state);
}

// Collects the median of each benchmark and prints the ratios at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs)
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name == "median")
        medians_[r.run_name.function_name] = r.GetAdjustedRealTime();
  }
  void print_summary() const {
    const auto find = [&](const std::string& impl) {
      auto it = medians_.find("BM_reference_layer/" + impl);
      return it == medians_.end() ? 0.0 : it->second;
    };
    const double onednn = find("onednn");
    std::printf("\nmeasured FMA peak: %.1f GFLOP/s\n", g_peak);
    for (const char* impl : {"naive", "kiln", "onednn", "onednn_nhwc"}) {
      const double t = find(impl);
      if (t <= 0) continue;
      const double gflops = kLayer.flops() / (t * 1e-9) * 1e-9;  // times are in ns
      std::printf("%-12s median %9.1f us  %7.1f GFLOP/s  %5.1f%% of peak  speed vs onednn %.3fx\n",
                  impl, t / 1e3, gflops, 100.0 * gflops / g_peak, onednn > 0 ? onednn / t : 0.0);
    }
  }

 private:
  std::map<std::string, double> medians_;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  std::vector<char*> args = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
      long v[8];
      if (std::sscanf(argv[++i], "%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld", &v[0], &v[1], &v[2], &v[3],
                      &v[4], &v[5], &v[6], &v[7]) != 8) {
        std::fprintf(stderr, "--shape expects N,Ci,H,W,Co,K,stride,pad\n");
        return 2;
      }
      kLayer = {v[0], v[1], v[2], v[3], v[4], v[5], v[5], static_cast<int>(v[6]),
                static_cast<int>(v[7])};
    } else {
      args.push_back(argv[i]);
    }
  }
  // Defaults that make the comparison survive a noisy machine; command-line flags override.
  std::vector<std::string> defaults = {"--benchmark_repetitions=7",
                                       "--benchmark_enable_random_interleaving=true",
                                       "--benchmark_report_aggregates_only=true",
                                       "--benchmark_min_time=0.2"};
  std::vector<char*> all = {args[0]};
  for (std::string& d : defaults) all.push_back(d.data());
  all.insert(all.end(), args.begin() + 1, args.end());
  int n = static_cast<int>(all.size());

  kiln::set_kernel_threads(threads);
  omp_set_num_threads(threads);
  g_peak = bench::measured_fma_peak_gflops(threads);

  // Not a test, but a benchmark of wrong code is worthless: compare the outputs once.
  {
    bench::KilnConv k(kLayer, Schedule::tuned);
    bench::OneDnnConv d(kLayer, true);
    k.run();
    d.run();
    const double err = graph::max_abs_diff(k.output(), d.output_nhwc());
    std::printf("threads: %d, Kiln vs oneDNN max abs difference: %g\n", threads, err);
    if (err > 1e-3) {
      std::fprintf(stderr, "outputs disagree; not benchmarking\n");
      return 1;
    }
  }

  benchmark::RegisterBenchmark("BM_reference_layer/naive", BM_kiln, Schedule::naive)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_reference_layer/kiln", BM_kiln, Schedule::tuned)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_reference_layer/onednn", BM_onednn, false)->UseRealTime();
  benchmark::RegisterBenchmark("BM_reference_layer/onednn_nhwc", BM_onednn, true)->UseRealTime();

  benchmark::Initialize(&n, all.data());
  if (benchmark::ReportUnrecognizedArguments(n, all.data())) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_summary();
  benchmark::Shutdown();
  return 0;
}
