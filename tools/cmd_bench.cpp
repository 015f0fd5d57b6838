// `kiln bench`: latency of a whole model (median / p90 / min) and, with --per-layer, each
// kernel's time, throughput and fraction of this machine's measured peak.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "cli.h"
#include "commands.h"
#include "graph/builder.h"
#include "graph/file_io.h"
#include "graph/kernel_spec.h"
#include "graph/passes/pipeline.h"
#include "kiln/runtime.h"
#include "peaks.h"

namespace kiln::cli {
namespace {

constexpr const char* kHelp = R"(usage: kiln bench MODEL [options]

Imports and optimizes MODEL (an .onnx file, or "example" for the built-in model), with the
Winograd output check of `kiln run` (or takes the result from the compile cache), compiles
the kernels generated for its shapes (or loads them from the kernel cache, $XDG_CACHE_HOME/kiln
or ~/.cache/kiln; a [codegen] line on stderr per kernel compiled, outside the timing), runs it
on seeded random inputs: warm-up runs, then timed runs, and prints the median, p90 and minimum
latency.

options:
  --threads N          worker threads (default: one per core)
  {input-shape:23}
  --iterations N       timed runs (default 50)
  --warmup N           untimed runs first (default 5), and more until 0.2 s have passed:
                       a worker thread can take that long to get a CPU of its own after
                       start-up (measured on a VM: 2x the latency for the first 10-80 ms of
                       a 0.1 ms model). --warmup 0: no warm-up at all
  --schedules FILE     a schedule database from `kiln tune`: kernels with a record for
                       their signature and this CPU's target get the tuned schedule
  --max-memory SIZE    refuse a model whose arena or inputs need more than SIZE bytes (e.g.
                       512M, 4G; default: this machine's physical memory)
  {half-width:23}
  --target cpu|cuda|opencl
                       where the kernels run (default cpu); opencl runs the GPU schedules
                       through OpenCL (e.g. pocl on the CPU): a check, not a speed target
  --fallback           with a GPU target: use the CPU if no GPU or driver is usable
  --per-layer          time every kernel in the same runs and print a table: median time,
                       share of the summed kernel times, GFLOP/s (convolutions, Gemm, MatMul;
                       a Winograd convolution, marked in the op column, counts the direct
                       convolution's flops, so its GFLOP/s and % peak are effective ones; "8
                       lanes" marks a kernel that runs with half-width vectors, --half-width),
                       GB/s (bytes of every input, weights included, plus the output), and
                       the fraction of this machine's peak: FMA throughput for kernels whose
                       flops per byte exceed the machine's (compute-bound; bf16 convolutions
                       that run AVX512_BF16 dot products: the dot-product throughput, DOT),
                       memory bandwidth for the rest. The peaks are measured once (about a
                       second) and
                       cached in $XDG_CACHE_HOME/kiln/peaks.txt (else ~/.cache/kiln/) per CPU
                       model and thread count. GB/s above the DRAM peak means the data came
                       from caches. On cuda no peak is shown (the peaks are the CPU's), and
                       a kernel's time is what its call took on the host: GPU launches may be
                       asynchronous, so the time can land on a later kernel.
  --remeasure-peaks    with --per-layer: measure the peaks again and update the cache
  --targets LIST       compare targets in one run: a comma-separated list of avx512, avx2,
                       baseline (or the build's Halide CPU target strings) and cuda. Each gets
                       the model's kernels compiled for it alone (dispatch forced), and the
                       rounds interleave the targets, so machine noise hits them alike.
                       Prints the latency of each, a table per kernel with each target's
                       median, and the speedup over the last target in the list (the
                       baseline). Implies --per-layer. A target this CPU cannot run is an
                       error.
  --precision P        f32 (default) or bf16: the convolutions' multiply-adds (see `kiln run
                       --help`); printed with the results. A list, bf16,f32, compares them like
                       --targets does (interleaved rounds, a table per kernel, the speedup over
                       the last one); not together with --targets. % of peak: see
                       --per-layer
  --json FILE          also write the results as JSON: model, target, precision, threads,
                       latencies, per-layer rows and peaks (with --targets or a list of
                       precisions: one entry per target or precision)
  -h, --help           this text
)";

struct BenchArgs {
  std::string model, json;
  InputShapes input_shapes;
  ModelOptions options;
  std::shared_ptr<const codegen::ScheduleDb> schedules;  // --schedules, or nullptr
  std::vector<std::string> targets;  // --targets: CPU target names, or "cuda"
  std::vector<graph::Precision> precisions{graph::Precision::f32};
  int iterations = 50, warmup = 5;
  bool per_layer = false, remeasure = false;
};

BenchArgs parse(const Args& args) {
  BenchArgs a;
  a.model = single_model(args);
  a.input_shapes = parse_input_shapes(args, a.model);
  a.schedules = parse_backend(args, &a.options);
  a.iterations = args.get_int("--iterations", 50, 1, 1000000);
  a.warmup = args.get_int("--warmup", 5, 0, 1000000);
  a.per_layer = args.has("--per-layer");
  a.remeasure = args.has("--remeasure-peaks");
  a.json = args.get("--json");
  if (args.has("--json") && a.json.empty()) throw UsageError("--json needs a file name");
  if (a.remeasure && !a.per_layer)
    throw UsageError("--remeasure-peaks only applies with --per-layer");
  if (args.has("--targets")) {
    std::stringstream list(args.get("--targets"));
    for (std::string t; std::getline(list, t, ',');)
      if (!t.empty()) a.targets.push_back(t);
    if (a.targets.size() < 2) throw UsageError("--targets needs at least two targets, e.g. avx2,sse41");
    if (args.has("--target")) throw UsageError("--targets and --target exclude each other");
    for (const std::string& t : a.targets)
      if (t != "cuda") parse_cpu_target("--targets", t);  // unknown or unrunnable: refused here
    a.per_layer = true;  // the per-kernel table is the point of the comparison
  }
  if (args.has("--precision")) {
    a.precisions.clear();
    std::stringstream list(args.get("--precision"));
    for (std::string p; std::getline(list, p, ',');)
      a.precisions.push_back(parse_precision_name(p, "f32, bf16 or a list of them"));
    if (a.precisions.empty() || a.precisions.size() > 2 ||
        (a.precisions.size() == 2 && a.precisions[0] == a.precisions[1]))
      throw UsageError("--precision takes f32, bf16, bf16,f32 or f32,bf16");
    if (a.precisions.size() == 2 && !a.targets.empty())
      throw UsageError("--targets and a list of precisions exclude each other");
    if (a.precisions.size() == 2) a.per_layer = true;
    const bool cuda_target = std::find(a.targets.begin(), a.targets.end(), "cuda") != a.targets.end();
    if (std::find(a.precisions.begin(), a.precisions.end(), graph::Precision::bf16) != a.precisions.end() &&
        (a.options.backend != Backend::cpu || cuda_target))
      throw UsageError("--precision bf16 is for CPU targets only");
  }
  a.options.profile = a.per_layer;
  return a;
}

struct Row {
  std::string kernel, op;
  double ms = 0, share = 0, flops = 0, bytes = 0;
  double peak_fraction = NAN;  // NAN: no peak to compare with
  bool compute_bound = false;
  bool bf16 = false, dot = false;  // a bf16 convolution; rated against the dot-product peak
};

void describe_work(const graph::KernelSpec& k, Row& r) {
  const KernelWork w = kernel_work(k);
  r.op = w.op, r.flops = w.flops, r.bytes = w.bytes, r.bf16 = w.bf16;
}

void rate_against(const Peaks& p, bool dot_products, Row& r) {
  const Roofline f = roofline(p, {r.op, r.flops, r.bytes, r.bf16}, r.ms / 1e3, dot_products);
  r.peak_fraction = f.fraction, r.compute_bound = f.compute_bound, r.dot = f.dot;
}

const char* bound_label(const Row& r) { return !r.compute_bound ? "BW" : r.dot ? "DOT" : "FMA"; }

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Results {
  std::vector<double> ms;  // sorted
  std::vector<Row> rows;
  std::optional<Peaks> peaks;
  int threads = 0;
  std::string backend, cpu_target;
  std::string precision;  // precision_note's line
  int warmup = 0;         // untimed rounds run
};

// Warm-up lasts at least this long (--warmup's help says why).
constexpr double kMinWarmupSeconds = 0.2;

// The p-th percentile by nearest rank.
double percentile(const std::vector<double>& sorted, double p) {
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::max<size_t>(rank, 1) - 1];
}

// Warm-up, then timed rounds in which every model runs once, the first one rotating, so that
// drift and noise hit all models alike (one model: plain repeated runs).
std::vector<Results> measure(const BenchArgs& a, const std::vector<Model*>& models,
                             const std::vector<graph::Tensor>& inputs) {
  auto run_once = [&](Model& m) {
    const Status s = m.run(inputs);
    if (!s) throw graph::Error(s.message());
  };
  // a.warmup rounds, and more until kMinWarmupSeconds have passed (none at all for 0).
  using Clock = std::chrono::steady_clock;
  const Clock::time_point warmup_start = Clock::now();
  const auto warm = [&] {
    return std::chrono::duration<double>(Clock::now() - warmup_start).count() >= kMinWarmupSeconds;
  };
  int warmup = 0;
  for (; warmup < a.warmup || (a.warmup > 0 && !warm()); ++warmup)
    for (Model* m : models) run_once(*m);
  std::vector<Results> results(models.size());
  for (Results& r : results) r.warmup = warmup;
  std::vector<std::vector<std::vector<double>>> kernel_ms(models.size());
  for (size_t m = 0; m < models.size(); ++m) kernel_ms[m].resize(models[m]->kernels().size());
  for (int i = 0; i < a.iterations; ++i) {
    for (size_t step = 0; step < models.size(); ++step) {
      const size_t m = (step + static_cast<size_t>(i)) % models.size();
      const auto t0 = std::chrono::steady_clock::now();
      run_once(*models[m]);
      results[m].ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (a.per_layer)
        for (size_t k = 0; k < kernel_ms[m].size(); ++k)
          kernel_ms[m][k].push_back(models[m]->kernel_seconds()[k] * 1e3);
    }
  }
  for (size_t m = 0; m < models.size(); ++m) {
    Results& r = results[m];
    std::sort(r.ms.begin(), r.ms.end());
    if (!a.per_layer) continue;
    double total = 0;
    for (size_t k = 0; k < kernel_ms[m].size(); ++k) {
      Row row;
      row.kernel = graph::kernel_name(models[m]->kernels()[k]);  // escaped where printed
      describe_work(models[m]->kernels()[k], row);
      // A Winograd kernel's GFLOP/s are effective ones: the direct convolution's flops.
      if (const int t = models[m]->winograd_tile(k))
        row.op += " winograd F(" + std::to_string(t) + "x" + std::to_string(t) + ")";
      if (models[m]->half_width(k)) row.op += " 8 lanes";
      row.ms = median_of(kernel_ms[m][k]);
      total += row.ms;
      r.rows.push_back(row);
    }
    for (Row& row : r.rows) row.share = total > 0 ? row.ms / total : 0;
  }
  return results;
}

std::string fixed(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void print_table(const Results& r) {
  int w = 6, wo = 2;
  for (const Row& row : r.rows)
    w = std::max(w, int(graph::printable(row.kernel).size())), wo = std::max(wo, int(row.op.size()));
  std::printf("\n  %-*s  %-*s  %9s  %6s  %9s  %8s  %9s\n", w, "kernel", wo, "op", "ms", "share",
              "GFLOP/s", "GB/s", "% peak");
  double ms = 0, flops = 0;
  for (const Row& row : r.rows) {
    const double s = row.ms / 1e3;
    ms += row.ms, flops += row.flops;
    const std::string peak =
        std::isfinite(row.peak_fraction)
            ? fixed(100 * row.peak_fraction, 1) + " " + bound_label(row)
            : "-";
    std::printf("  %-*s  %-*s  %9.4f  %5.1f%%  %9s  %8s  %9s\n", w,
                graph::printable(row.kernel).c_str(), wo,
                row.op.c_str(), row.ms, 100 * row.share,
                row.flops > 0 ? fixed(row.flops / s / 1e9, 1).c_str() : "-",
                fixed(row.bytes / s / 1e9, 1).c_str(), peak.c_str());
  }
  std::printf("  %-*s  %-*s  %9.4f  %5.1f%%  %9s\n", w, "total", wo, "", ms, 100.0,
              fixed(flops / (ms / 1e3) / 1e9, 1).c_str());
  std::printf(
      "  (share: of the summed kernel medians; %% peak: of the FMA peak (FMA), the bf16 "
      "dot-product peak (DOT) or the DRAM bandwidth (BW), whichever bounds the kernel)\n");
}

nlohmann::json results_json(const Results& r) {
  nlohmann::json j = {{"target", r.backend},
                      {"cpu_target", r.cpu_target},
                      {"precision", r.precision},
                      {"threads", r.threads},
                      {"latency_ms",
                       {{"median", r.ms[r.ms.size() / 2]},
                        {"p90", percentile(r.ms, 90)},
                        {"min", r.ms.front()}}}};
  j["peaks"] = nullptr;
  if (r.peaks)
    j["peaks"] = {{"cpu", cpu_model_name()},
                  {"fma_gflops", r.peaks->fma_gflops},
                  {"fma_isa", r.peaks->fma_isa},
                  {"dot_gflops", r.peaks->dot_gflops},
                  {"bandwidth_gbs", r.peaks->bandwidth_gbs},
                  {"from_cache", r.peaks->from_cache}};
  j["layers"] = nlohmann::json::array();
  for (const Row& row : r.rows) {
    const double s = row.ms / 1e3;
    const bool rated = std::isfinite(row.peak_fraction);
    // NaN and infinities are written as null (JSON has neither).
    j["layers"].push_back({{"kernel", row.kernel},
                           {"op", row.op},
                           {"median_ms", row.ms},
                           {"share", row.share},
                           {"flops", row.flops},
                           {"bytes", row.bytes},
                           {"gflops", row.flops > 0 ? nlohmann::json(row.flops / s / 1e9) : nullptr},
                           {"gbs", row.bytes / s / 1e9},
                           {"bound", rated ? nlohmann::json(!row.compute_bound ? "bandwidth"
                                                            : row.dot            ? "dot"
                                                                                 : "fma")
                                           : nullptr},
                           {"peak_fraction", row.peak_fraction}});
  }
  return j;
}

std::string to_json(const BenchArgs& a, const std::vector<Results>& all) {
  nlohmann::json j = {
      {"model", a.model}, {"warmup", all.front().warmup}, {"iterations", a.iterations}};
  if (all.size() == 1) {
    j.update(results_json(all[0]));
  } else {
    j["baseline"] = all.back().cpu_target.empty() ? all.back().backend : all.back().cpu_target;
    j["targets"] = nlohmann::json::array();
    for (const Results& r : all) j["targets"].push_back(results_json(r));
  }
  // Model names come from the command line: invalid UTF-8 is replaced, not an exception.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string target_label(const Results& r) { return r.cpu_target.empty() ? r.backend : r.cpu_target; }

// --targets: each target's latency and every kernel's time side by side, with the speedup over
// the last target.
void print_comparison(const std::vector<Results>& all, const std::vector<std::string>& names) {
  const Results& base = all.back();
  std::printf("\n  %-10s  %10s  %10s  %8s   %s\n", "target", "median ms", "p90 ms",
              "speedup", "Halide target");
  for (size_t t = 0; t < all.size(); ++t)
    std::printf("  %-10s  %10.3f  %10.3f  %7.2fx   %s\n", names[t].c_str(),
                all[t].ms[all[t].ms.size() / 2], percentile(all[t].ms, 90),
                base.ms[base.ms.size() / 2] / all[t].ms[all[t].ms.size() / 2],
                target_label(all[t]).c_str());
  int w = 6;
  for (const Row& row : base.rows) w = std::max(w, int(graph::printable(row.kernel).size()));
  std::printf("\n  %-*s", w, "kernel");
  for (const std::string& n : names) std::printf("  %10s", (n + " ms").c_str());
  std::printf("  %s\n", "speedup of each over the baseline");
  for (size_t k = 0; k < base.rows.size(); ++k) {
    std::printf("  %-*s", w, graph::printable(base.rows[k].kernel).c_str());
    for (const Results& r : all) std::printf("  %10.4f", r.rows[k].ms);
    std::string ratios;
    for (size_t t = 0; t + 1 < all.size(); ++t)
      ratios += (t ? " " : "") + fixed(base.rows[k].ms / all[t].rows[k].ms, 2) + "x";
    std::printf("  %s\n", ratios.c_str());
  }
}

int run(const BenchArgs& a) {
  std::vector<graph::Graph> graphs;  // one per precision
  const OutputCheck check{a.options, a.schedules};  // float32's: bf16 has a tolerance of its own
  for (graph::Precision p : a.precisions) {
    bool cached = false;
    graphs.push_back(compile_cached(a.model, a.input_shapes, to_string(a.options.backend), p,
                                    &cached, p == graph::Precision::f32 ? &check : nullptr));
  }
  const graph::Graph& optimized = graphs[0];
  std::vector<std::unique_ptr<Model>> models;
  std::vector<std::string> names = a.targets;
  std::vector<std::string> notes;  // precision_note per model
  std::vector<bool> dots;           // whether its bf16 convolutions run AVX512_BF16 dot products
  if (a.precisions.size() == 2) {
    for (size_t i = 0; i < graphs.size(); ++i) {
      names.push_back(graph::to_string(a.precisions[i]));
      std::fprintf(stderr, "[bench] kernels for %s\n", names.back().c_str());
      models.push_back(std::make_unique<Model>(graphs[i], a.options));
      notes.push_back(precision_note(graphs[i], a.options.cpu_target));
      dots.push_back(runs_bf16_dot_products(a.options.cpu_target));
    }
  } else if (a.targets.empty()) {
    models.push_back(std::make_unique<Model>(optimized, a.options));
    notes.push_back(precision_note(optimized, a.options.cpu_target));
    dots.push_back(runs_bf16_dot_products(a.options.cpu_target));
  } else {
    for (const std::string& t : a.targets) {
      ModelOptions o = a.options;
      if (t == "cuda") {
        o.backend = Backend::cuda;
      } else {
        o.cpu_target = parse_cpu_target("--targets", t);
      }
      std::fprintf(stderr, "[bench] kernels for %s\n", t.c_str());
      models.push_back(std::make_unique<Model>(optimized, o));
      notes.push_back(precision_note(optimized, o.cpu_target));
      dots.push_back(o.backend == Backend::cpu && runs_bf16_dot_products(o.cpu_target));
    }
  }
  check_inputs_fit(optimized, a.options);
  std::vector<graph::Tensor> inputs;
  for (size_t i = 0; i < models[0]->num_inputs(); ++i) {
    const TensorView v = models[0]->input_info(i);
    inputs.push_back({v.shape, v.layout,
                      graph::random_uniform(graph::num_elements(v.shape), -1.0f, 1.0f, 1 + i)});
  }
  std::vector<Model*> raw;
  for (auto& m : models) raw.push_back(m.get());
  std::vector<Results> all = measure(a, raw, inputs);
  const int threads = a.options.threads > 0 ? a.options.threads
                                            : static_cast<int>(std::thread::hardware_concurrency());
  for (size_t m = 0; m < models.size(); ++m) {
    Results& r = all[m];
    const Model& model = *models[m];
    r.threads = threads;
    r.backend = to_string(model.backend());
    r.cpu_target = model.backend() == Backend::cpu ? model.cpu_target() : "";
    r.precision = notes[m];
    std::printf("model    %s: %zu kernels on %s%s, %d threads\n", graph::printable(a.model).c_str(),
                model.kernels().size(), r.backend.c_str(),
                r.cpu_target.empty() ? "" : (" (" + r.cpu_target + ")").c_str(), r.threads);
    if (!model.fallback_reason().empty())
      std::printf("fallback %s\n", graph::printable(model.fallback_reason()).c_str());
    std::printf("%s\n", r.precision.c_str());
    std::printf(
        "latency  median %.3f ms, p90 %.3f ms, min %.3f ms over %d runs after %d warm-up%s\n",
        r.ms[r.ms.size() / 2], percentile(r.ms, 90), r.ms.front(), a.iterations, r.warmup,
        models.size() > 1 ? " (rounds interleaved with the others)" : "");
    if (a.per_layer && model.backend() == Backend::cpu) {
      r.peaks = machine_peaks(r.threads, a.remeasure);
      for (Row& row : r.rows) rate_against(*r.peaks, dots[m], row);
      if (m == 0)
        std::printf("peaks    FMA %.1f GFLOP/s (%s)%s, bandwidth %.1f GB/s on %d threads (%s%s)\n",
                    r.peaks->fma_gflops, r.peaks->fma_isa.c_str(),
                    r.peaks->dot_gflops > 0
                        ? (", bf16 dot products " + fixed(r.peaks->dot_gflops, 1) + " GFLOP/s").c_str()
                        : "",
                    r.peaks->bandwidth_gbs, r.threads,
                    r.peaks->from_cache ? "cached in " : "measured",
                    r.peaks->from_cache ? r.peaks->cache_file.c_str() : "");
    }
    if (a.per_layer && models.size() == 1) print_table(r);
  }
  if (models.size() > 1) print_comparison(all, names);
  // Via a temp file and rename: a failed run never leaves a JSON file that looks complete.
  if (!a.json.empty()) graph::write_file_atomically(a.json, to_json(a, all));
  return 0;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  const Args args(argc, argv, 2,
                  {"--threads", "--iterations", "--warmup", "--target", "--json", "--max-memory",
                   "--schedules", "--half-width", "--targets", "--input-shape", "--precision"},
                  {"--fallback", "--per-layer", "--remeasure-peaks"});
  if (args.help()) {
    print_help(kHelp);
    return 0;
  }
  return run(parse(args));
}

}  // namespace kiln::cli
