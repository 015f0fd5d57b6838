// Micro-benchmarks for the FMA and memory-bandwidth peaks, and their on-disk cache.
#include "peaks.h"

#include "cli.h"

#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

namespace kiln::cli {
namespace {

constexpr int64_t kFmaIters =
    10'000'000;  // ~30 ms per thread at 3 GHz: short, yet well above timer noise

// The sum of 16 accumulator chains, stored and summed by hand (GCC 12's _mm512_reduce_add_ps
// trips -Wuninitialized), returned so the compiler must compute every chain.
__attribute__((target("avx512f"))) double sum_of_chains(const __m512 (&acc)[16]) {
  alignas(64) float out[16];
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  _mm512_store_ps(out, s);
  return out[0] + out[15];
}

// Independent accumulators cover the FMA latency times the number of FMA pipes (4 x 2 on
// current cores), so the loop is bound by throughput, not by one dependency chain.
__attribute__((target("avx512f"))) double fma_avx512(int64_t iters) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(1.0f + i * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  return sum_of_chains(acc);
}

// The same with bf16 dot products: each vdpbf16ps adds two products per float32 lane.
__attribute__((target("avx512f,avx512bf16"))) double dot_avx512bf16(int64_t iters) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(1.0f + i * 1e-3f);
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-7f), _mm512_set1_ps(1e-7f));
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  return sum_of_chains(acc);
}

// CPUID leaf 7, sub-leaf 1, EAX bit 5.
bool has_avx512_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return false;
  __asm__ volatile("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(7), "c"(1));
  return (eax >> 5) & 1u;
}

__attribute__((target("avx2,fma"))) double fma_avx2(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(1.0f + i * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  alignas(32) float out[8];
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_store_ps(out, s);
  return out[0] + out[7];
}

double fma_scalar(int64_t iters) {
  float acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = 1.0f + i * 1e-3f;
  for (int64_t it = 0; it < iters; ++it)
    for (float& x : acc) x = std::fma(x, 0.999999f, 1e-7f);
  return acc[0] + acc[7];
}

// Runs fn(t) on `threads` threads and returns the wall time in seconds.
template <typename Fn>
double timed_on_threads(int threads, Fn fn) {
  std::vector<std::thread> pool;
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) pool.emplace_back(fn, t);
  for (std::thread& th : pool) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string cache_key(int threads) { return cpu_model_name() + "\t" + std::to_string(threads); }

bool load_cached(const std::string& file, const std::string& key, Peaks* p) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size() + 1, key + "\t") != 0) continue;
    std::istringstream rest(line.substr(key.size() + 1));
    Peaks c;
    if (rest >> c.fma_gflops >> c.bandwidth_gbs >> c.fma_isa >> c.dot_gflops && c.fma_gflops > 0 &&
        c.bandwidth_gbs > 0 && std::isfinite(c.fma_gflops) && std::isfinite(c.bandwidth_gbs)) {
      *p = c;
      return true;
    }
  }
  return false;
}

// Rewrites the file with this key's line replaced; via a temp file and rename, so a reader
// (another kiln bench) never sees half a file. Failing to cache is not an error.
void store(const std::string& file, const std::string& key, const Peaks& p) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ec);
  if (ec) return;
  std::string kept, line;
  std::ifstream in(file);
  while (std::getline(in, line))
    if (line.compare(0, key.size() + 1, key + "\t") != 0) kept += line + "\n";
  const std::string tmp = file + ".tmp" + std::to_string(::getpid());
  std::ofstream out(tmp, std::ios::trunc);
  out << kept << key << "\t" << p.fma_gflops << "\t" << p.bandwidth_gbs << "\t" << p.fma_isa
      << "\t" << p.dot_gflops << "\n";
  out.close();
  if (!out || std::rename(tmp.c_str(), file.c_str()) != 0) std::filesystem::remove(tmp, ec);
}

}  // namespace

namespace {

// GFLOP/s of `loop` (iterations in, a value out that depends on every chain) run on `threads`
// threads at once, `flops_per_iter` each. Each thread's rate over its own CPU time, summed:
// what the cores deliver while they run, unaffected by other processes that share the machine
// (wall time would count their turns). More threads than CPUs do not add throughput, so the
// sum is scaled down to the CPU count.
double throughput_gflops(int threads, double flops_per_iter, double (*loop)(int64_t)) {
  std::vector<double> sink(threads), rate(threads);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {  // best of three: the first may pay for frequency ramp-up
    timed_on_threads(threads, [&](int t) {
      const double t0 = thread_cpu_seconds();
      sink[t] = loop(kFmaIters);
      rate[t] = flops_per_iter * kFmaIters / (thread_cpu_seconds() - t0) / 1e9;
    });
    double total = 0;
    for (double r : rate) total += r;
    best = std::max(best, total);
  }
  const int cpus = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  volatile double keep = sink[0];
  (void)keep;
  return threads > cpus ? best * cpus / threads : best;
}

}  // namespace

double measure_fma_gflops(int threads, std::string* isa) {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  *isa = avx512 ? "avx512f" : avx2 ? "avx2+fma" : "scalar";
  return avx512 ? throughput_gflops(threads, 2.0 * 16 * 16, fma_avx512)
         : avx2 ? throughput_gflops(threads, 2.0 * 12 * 8, fma_avx2)
                : throughput_gflops(threads, 2.0 * 8, fma_scalar);
}

double measure_dot_gflops(int threads) {
  return has_avx512_bf16() ? throughput_gflops(threads, 4.0 * 16 * 16, dot_avx512bf16) : 0;
}

double measure_bandwidth_gbs(int threads) {
  // 2 x 128 MiB: beyond the last-level cache of most CPUs, so this is DRAM bandwidth there; a
  // server's L3 can hold more (a VM on one reported 480 MiB), which then serves part of it.
  const size_t n = (size_t{128} << 20) / sizeof(float);
  std::unique_ptr<float[]> src(new float[n]), dst(new float[n]);
  const size_t chunk = (n + threads - 1) / threads;
  auto range = [&](int t, auto body) {
    const size_t lo = std::min(n, t * chunk), hi = std::min(n, lo + chunk);
    body(lo, hi);
  };
  // Each thread first touches the pages it streams later (first-touch NUMA placement).
  timed_on_threads(threads, [&](int t) {
    range(t, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) src[i] = static_cast<float>(i & 1023), dst[i] = 0.0f;
    });
  });
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double s = timed_on_threads(threads, [&](int t) {
      range(t, [&](size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; ++i) dst[i] = src[i] * 1.5f;
      });
    });
    best =
        std::max(best, 2.0 * n * sizeof(float) / s / 1e9);  // read + write, as kernels are counted
  }
  volatile float keep = dst[n / 2];
  (void)keep;
  return best;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    std::string name = line.substr(colon + 1);
    name.erase(0, name.find_first_not_of(" \t"));
    std::replace(name.begin(), name.end(), '\t', ' ');  // tabs separate the cache's fields
    if (!name.empty()) return name;
  }
  return "unknown cpu";
}

std::string peaks_cache_file() {
  const std::string dir = cache_dir();
  return dir.empty() ? "" : dir + "/peaks.txt";
}

Peaks machine_peaks(int threads, bool remeasure) {
  Peaks p;
  const std::string file = peaks_cache_file();
  const std::string key = cache_key(threads);
  if (!file.empty() && !remeasure && load_cached(file, key, &p)) {
    p.from_cache = true;
    p.cache_file = file;
    return p;
  }
  p.fma_gflops = measure_fma_gflops(threads, &p.fma_isa);
  p.dot_gflops = measure_dot_gflops(threads);
  p.bandwidth_gbs = measure_bandwidth_gbs(threads);
  if (!file.empty()) {
    store(file, key, p);
    p.cache_file = file;
  }
  return p;
}

namespace {

double bytes_of(const graph::TensorDesc& t) { return 4.0 * graph::num_elements(t.shape); }

// Multiply-adds per output element of a convolution: Kh * Kw * Ci / groups, i.e. the weights
// divided by the output channels (HWIO: Co last; OIHW: Co first).
double conv_macs_per_output(const graph::TensorDesc& w) {
  const double co = static_cast<double>(w.layout == graph::Layout::hwio ? w.shape[3] : w.shape[0]);
  return graph::num_elements(w.shape) / co;
}

}  // namespace

KernelWork kernel_work(const graph::KernelSpec& k) {
  KernelWork r;
  if (const auto* c = std::get_if<graph::ConvKernelSpec>(&k)) {
    const bool pooled_first = graph::pools_before_conv(*c);
    r.op = c->expand ? "1x1 expand > " : "";  // Conv2d::expand
    if (pooled_first) r.op += c->pool->kind == graph::PoolKind::max ? "maxpool > " : "avgpool > ";
    if (c->input_scale) r.op += "scale > ";  // Conv2d::input_scale
    r.op +=
        "conv " + std::to_string(c->weights.shape[0]) + "x" + std::to_string(c->weights.shape[1]);
    if (c->stride_h > 1 || c->stride_w > 1) r.op += "/s" + std::to_string(c->stride_h);
    if (c->depthwise) r.op += " dw";
    if (c->groups > 1 && !c->depthwise) r.op += " g" + std::to_string(c->groups);
    if (c->residual) r.op += " +add";
    if (!c->activation.is_identity()) r.op += c->activation.is_relu6() ? " +relu6" : " +relu";
    for (const graph::ChainStep& st : c->post) r.op += std::string(" +") + graph::to_string(st.kind);
    if (c->shortcut) r.op += " +shortcut";
    if (c->pool && !pooled_first) r.op += c->pool->kind == graph::PoolKind::max ? " +maxpool" : " +avgpool";
    if (c->resize) r.op += std::string(" +resize ") + graph::to_string(c->resize->mode);
    // A convolution pooled after computes its whole output (conv_output_nhwc) and writes the
    // pooled one; pooled first, it computes the pooled output alone.
    r.flops = 2.0 * graph::num_elements(graph::conv_output_nhwc(*c)) * conv_macs_per_output(c->weights);
    r.bf16 = c->bf16;
    r.bytes = bytes_of(c->input) + (c->bf16 ? 0.5 : 1.0) * bytes_of(c->weights) + bytes_of(c->bias) +
              bytes_of(c->output) +
              (c->residual ? bytes_of(*c->residual) : 0.0) + (c->shortcut ? bytes_of(*c->shortcut) : 0.0);
    if (c->expand) {  // the expanded input, computed in the kernel and never stored
      r.flops += 2.0 * graph::num_elements(graph::conv_input_nhwc(*c)) * conv_macs_per_output(*c->expand_weights);
      r.bytes += bytes_of(*c->expand_weights) + bytes_of(*c->expand_bias);
    }
    return r;
  }
  if (const auto* t = std::get_if<graph::LayoutKernelSpec>(&k)) {
    r.op = "NCHW->NHWC";
    r.bytes = bytes_of(t->input) + bytes_of(t->output);
    return r;
  }
  const auto& o = std::get<graph::OpKernelSpec>(k);
  const auto* t = std::get_if<graph::LayoutTransform>(&o.op);
  r.op = t ? std::string(graph::to_string(t->from)) + "->" + graph::to_string(t->to)
           : graph::op_label(o.op);
  r.bytes = bytes_of(o.output);
  for (const graph::TensorDesc& in : o.inputs) r.bytes += bytes_of(in);
  const double outputs = static_cast<double>(graph::num_elements(o.output.shape));
  if (std::holds_alternative<graph::Conv2d>(o.op)) {
    r.flops = 2.0 * outputs * conv_macs_per_output(o.inputs[1]);
  } else if (const auto* g = std::get_if<graph::Gemm>(&o.op)) {
    const graph::Shape& a = o.inputs[0].shape;
    r.flops = 2.0 * outputs * static_cast<double>(g->trans_a ? a[0] : a[1]);
  } else if (std::holds_alternative<graph::MatMul>(o.op)) {
    r.flops = 2.0 * outputs * static_cast<double>(o.inputs[0].shape.back());
  }
  return r;
}

Roofline roofline(const Peaks& p, const KernelWork& w, double seconds, bool dot_products) {
  Roofline r;
  if (seconds <= 0 || p.fma_gflops <= 0 || p.bandwidth_gbs <= 0) return r;
  r.dot = w.bf16 && dot_products && p.dot_gflops > 0;
  const double peak = r.dot ? p.dot_gflops : p.fma_gflops;
  r.compute_bound = w.flops > 0 && w.flops / w.bytes >= peak / p.bandwidth_gbs;
  r.fraction = r.compute_bound ? w.flops / seconds / 1e9 / peak : w.bytes / seconds / 1e9 / p.bandwidth_gbs;
  return r;
}

}  // namespace kiln::cli
