// This machine's measured peaks (FMA throughput, memory bandwidth), the yardsticks `kiln bench
// --per-layer` divides each kernel's rate by; cached on disk per CPU model and thread count.
#pragma once

#include <cmath>
#include <string>

#include "graph/kernel_spec.h"

namespace kiln::cli {

struct Peaks {
  double fma_gflops = 0;     // fp32, all threads: 2 flops per FMA lane
  double bandwidth_gbs = 0;  // streaming copy, bytes read + bytes written per second
  std::string fma_isa;       // "avx512f", "avx2+fma" or "scalar"
  // bf16 dot products (vdpbf16ps), all threads, 4 flops per lane (two products, two adds); 0
  // where the CPU has no AVX512_BF16. The yardstick of bf16 convolutions that run them.
  double dot_gflops = 0;
  bool from_cache = false;
  std::string cache_file;  // empty when no cache directory could be used
};

// From the cache when it has an entry for this CPU model and thread count (unless `remeasure`);
// else measured (well under a second) and written to the cache.
Peaks machine_peaks(int threads, bool remeasure);

double measure_fma_gflops(int threads, std::string* isa);
double measure_dot_gflops(int threads);
double measure_bandwidth_gbs(int threads);

// /proc/cpuinfo's "model name", or "unknown cpu".
std::string cpu_model_name();

// $XDG_CACHE_HOME/kiln/peaks.txt, else ~/.cache/kiln/peaks.txt; empty if neither is set.
std::string peaks_cache_file();

// What one call of a kernel does: a short label of its op and fusions ("conv 3x3/s2 +relu"),
// its flops (0 for kernels without multiply-adds) and the bytes it must move (every input,
// weights included, and the output).
struct KernelWork {
  std::string op;
  double flops = 0, bytes = 0;
  bool bf16 = false;  // a bf16 convolution: its weights count 2 bytes each
};
KernelWork kernel_work(const graph::KernelSpec& k);

// Roofline: a kernel whose flops per byte exceed the machine's is bound by the arithmetic peak,
// any other by bandwidth; `fraction` is taken of the bound that applies (NAN without a time).
// The arithmetic peak is the FMA one, or the dot-product one for a bf16 convolution when
// `dot_products` (the kernels run AVX512_BF16) and the CPU has a measured one (`dot` says so).
struct Roofline {
  double fraction = NAN;
  bool compute_bound = false;
  bool dot = false;
};
Roofline roofline(const Peaks& p, const KernelWork& w, double seconds, bool dot_products = false);

}  // namespace kiln::cli
