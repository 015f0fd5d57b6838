// `kiln bench`: latency of a whole model (median / p90 / min) and, with --per-layer, each
// kernel's time, throughput and fraction of this machine's measured peak.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "cli.h"
#include "commands.h"
#include "graph/builder.h"
#include "graph/kernel_spec.h"
#include "graph/passes/pipeline.h"
#include "kiln/runtime.h"
#include "peaks.h"

namespace kiln::cli {
namespace {

constexpr const char* kHelp = R"(usage: kiln bench MODEL [options]

Imports and optimizes MODEL (an .onnx file, or "example" for the built-in model), compiles
the kernels generated for its shapes (or loads them from the kernel cache, $XDG_CACHE_HOME/kiln
or ~/.cache/kiln; a [codegen] line on stderr per kernel compiled, outside the timing), runs it
on seeded random inputs: warm-up runs, then timed runs, and prints the median, p90 and minimum
latency.

options:
  --threads N          worker threads (default: one per core)
  --iterations N       timed runs (default 50)
  --warmup N           untimed runs first (default 5)
  --schedules FILE     a schedule database from `kiln tune`: kernels with a record for
                       their signature and this CPU's target get the tuned schedule
  --max-memory SIZE    refuse a model whose arena or inputs need more than SIZE bytes (e.g.
                       512M, 4G; default: this machine's physical memory)
  --target cpu|cuda|opencl
                       where the kernels run (default cpu); opencl runs the GPU schedules
                       through OpenCL (e.g. pocl on the CPU): a check, not a speed target
  --fallback           with a GPU target: use the CPU if no GPU or driver is usable
  --per-layer          time every kernel in the same runs and print a table: median time,
                       share of the summed kernel times, GFLOP/s (convolutions, Gemm, MatMul),
                       GB/s (bytes of every input, weights included, plus the output), and
                       the fraction of this machine's peak: FMA throughput for kernels whose
                       flops per byte exceed the machine's (compute-bound), memory bandwidth
                       for the rest. The peaks are measured once (under a second) and
                       cached in $XDG_CACHE_HOME/kiln/peaks.txt (else ~/.cache/kiln/) per CPU
                       model and thread count. GB/s above the DRAM peak means the data came
                       from caches. On cuda no peak is shown (the peaks are the CPU's), and
                       a kernel's time is what its call took on the host: GPU launches may be
                       asynchronous, so the time can land on a later kernel.
  --remeasure-peaks    with --per-layer: measure the peaks again and update the cache
  --json FILE          also write the results as JSON: model, target, threads, latencies,
                       per-layer rows and peaks
  -h, --help           this text
)";

struct BenchArgs {
  std::string model, json;
  ModelOptions options;
  int iterations = 50, warmup = 5;
  bool per_layer = false, remeasure = false;
};

BenchArgs parse(const Args& args) {
  BenchArgs a;
  a.model = single_model(args);
  parse_backend(args, &a.options);
  a.iterations = args.get_int("--iterations", 50, 1, 1000000);
  a.warmup = args.get_int("--warmup", 5, 0, 1000000);
  a.per_layer = args.has("--per-layer");
  a.remeasure = args.has("--remeasure-peaks");
  a.json = args.get("--json");
  if (args.has("--json") && a.json.empty()) throw UsageError("--json needs a file name");
  if (a.remeasure && !a.per_layer)
    throw UsageError("--remeasure-peaks only applies with --per-layer");
  a.options.profile = a.per_layer;
  return a;
}

struct Row {
  std::string kernel, op;
  double ms = 0, share = 0, flops = 0, bytes = 0;
  double peak_fraction = NAN;  // NAN: no peak to compare with
  bool compute_bound = false;
};

void describe_work(const graph::KernelSpec& k, Row& r) {
  const KernelWork w = kernel_work(k);
  r.op = w.op, r.flops = w.flops, r.bytes = w.bytes;
}

void rate_against(const Peaks& p, Row& r) {
  const Roofline f = roofline(p, {r.op, r.flops, r.bytes}, r.ms / 1e3);
  r.peak_fraction = f.fraction, r.compute_bound = f.compute_bound;
}

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
};

// The p-th percentile by nearest rank.
double percentile(const std::vector<double>& sorted, double p) {
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::max<size_t>(rank, 1) - 1];
}

Results measure(const BenchArgs& a, Model& model, const std::vector<graph::Tensor>& inputs) {
  auto run_once = [&] {
    const Status s = model.run(inputs);
    if (!s) throw graph::Error(s.message());
  };
  for (int i = 0; i < a.warmup; ++i) run_once();
  Results r;
  std::vector<std::vector<double>> kernel_ms(model.kernels().size());
  for (int i = 0; i < a.iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run_once();
    r.ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (a.per_layer)
      for (size_t k = 0; k < kernel_ms.size(); ++k)
        kernel_ms[k].push_back(model.kernel_seconds()[k] * 1e3);
  }
  std::sort(r.ms.begin(), r.ms.end());
  if (!a.per_layer) return r;
  double total = 0;
  for (size_t k = 0; k < kernel_ms.size(); ++k) {
    Row row;
    row.kernel = graph::kernel_name(model.kernels()[k]);  // JSON escapes it, the table below
    describe_work(model.kernels()[k], row);
    row.ms = median_of(kernel_ms[k]);
    total += row.ms;
    r.rows.push_back(row);
  }
  for (Row& row : r.rows) row.share = total > 0 ? row.ms / total : 0;
  return r;
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
            ? fixed(100 * row.peak_fraction, 1) + (row.compute_bound ? " FMA" : " BW")
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
      "  (share: of the summed kernel medians; %% peak: of the FMA peak (FMA) or of the DRAM "
      "bandwidth (BW), whichever bounds the kernel)\n");
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += static_cast<char>(c);
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";  // JSON has no inf or nan
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string to_json(const BenchArgs& a, const Results& r) {
  std::ostringstream j;
  j << "{\n  \"model\": " << json_string(a.model) << ",\n  \"target\": " << json_string(r.backend)
    << ",\n  \"cpu_target\": " << json_string(r.cpu_target) << ",\n  \"threads\": " << r.threads
    << ",\n  \"warmup\": " << a.warmup << ",\n  \"iterations\": " << a.iterations
    << ",\n  \"latency_ms\": {\"median\": " << json_number(r.ms[r.ms.size() / 2])
    << ", \"p90\": " << json_number(percentile(r.ms, 90))
    << ", \"min\": " << json_number(r.ms.front()) << "},\n  \"peaks\": ";
  if (r.peaks)
    j << "{\"cpu\": " << json_string(cpu_model_name())
      << ", \"fma_gflops\": " << json_number(r.peaks->fma_gflops)
      << ", \"fma_isa\": " << json_string(r.peaks->fma_isa)
      << ", \"bandwidth_gbs\": " << json_number(r.peaks->bandwidth_gbs)
      << ", \"from_cache\": " << (r.peaks->from_cache ? "true" : "false") << "}";
  else
    j << "null";
  j << ",\n  \"layers\": [";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    const double s = row.ms / 1e3;
    j << (i ? "," : "") << "\n    {\"kernel\": " << json_string(row.kernel)
      << ", \"op\": " << json_string(row.op) << ", \"median_ms\": " << json_number(row.ms)
      << ", \"share\": " << json_number(row.share) << ", \"flops\": " << json_number(row.flops)
      << ", \"bytes\": " << json_number(row.bytes)
      << ", \"gflops\": " << (row.flops > 0 ? json_number(row.flops / s / 1e9) : "null")
      << ", \"gbs\": " << json_number(row.bytes / s / 1e9) << ", \"bound\": "
      << (std::isfinite(row.peak_fraction) ? (row.compute_bound ? "\"fma\"" : "\"bandwidth\"")
                                           : "null")
      << ", \"peak_fraction\": " << json_number(row.peak_fraction) << "}";
  }
  j << (r.rows.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return j.str();
}

// Via a temp file and rename: a failed run never leaves a JSON file that looks complete.
void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::ofstream f(tmp, std::ios::trunc);
  f << text;
  f.close();
  std::error_code ec;
  if (f) std::filesystem::rename(tmp, path, ec);
  if (!f || ec) {
    std::filesystem::remove(tmp, ec);
    throw graph::Error("cannot write '" + path + "'");
  }
}

int run(const BenchArgs& a) {
  const graph::Graph optimized = graph::run_passes(load_model(a.model));
  Model model(optimized, a.options);
  check_inputs_fit(optimized, a.options);
  std::vector<graph::Tensor> inputs;
  for (size_t i = 0; i < model.num_inputs(); ++i) {
    const TensorView v = model.input_info(i);
    inputs.push_back({v.shape, v.layout,
                      graph::random_uniform(graph::num_elements(v.shape), -1.0f, 1.0f, 1 + i)});
  }
  Results r = measure(a, model, inputs);
  r.threads = a.options.threads > 0 ? a.options.threads
                                    : static_cast<int>(std::thread::hardware_concurrency());
  r.backend = to_string(model.backend());
  r.cpu_target = model.backend() == Backend::cpu ? model.cpu_target() : "";
  std::printf("model    %s: %zu kernels on %s%s, %d threads\n", graph::printable(a.model).c_str(),
              model.kernels().size(), r.backend.c_str(),
              r.cpu_target.empty() ? "" : (" (" + r.cpu_target + ")").c_str(), r.threads);
  if (!model.fallback_reason().empty())
    std::printf("fallback %s\n", graph::printable(model.fallback_reason()).c_str());
  std::printf("latency  median %.3f ms, p90 %.3f ms, min %.3f ms over %d runs after %d warm-up\n",
              r.ms[r.ms.size() / 2], percentile(r.ms, 90), r.ms.front(), a.iterations, a.warmup);
  if (a.per_layer && model.backend() == Backend::cpu) {
    r.peaks = machine_peaks(r.threads, a.remeasure);
    for (Row& row : r.rows) rate_against(*r.peaks, row);
    std::printf("peaks    FMA %.1f GFLOP/s (%s), bandwidth %.1f GB/s on %d threads (%s%s)\n",
                r.peaks->fma_gflops, r.peaks->fma_isa.c_str(), r.peaks->bandwidth_gbs, r.threads,
                r.peaks->from_cache ? "cached in " : "measured",
                r.peaks->from_cache ? r.peaks->cache_file.c_str() : "");
  }
  if (a.per_layer) print_table(r);
  if (!a.json.empty()) write_file(a.json, to_json(a, r));
  return 0;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  const Args args(argc, argv, 2,
                  {"--threads", "--iterations", "--warmup", "--target", "--json", "--max-memory",
                   "--schedules"},
                  {"--fallback", "--per-layer", "--remeasure-peaks"});
  if (args.help()) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  return run(parse(args));
}

}  // namespace kiln::cli
