// Shared pieces of the convolution benchmarks: the machine's measured FMA peak, Kiln kernel
// launches on prepared buffers, and oneDNN's fused convolution + bias + ReLU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/kernel_spec.h"
#include "kernels.h"

namespace kiln::bench {

struct ConvShape {
  int64_t n, ci, h, w, co, kh, kw;
  int stride, pad;
  int64_t out_h() const { return (h + 2 * pad - kh) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - kw) / stride + 1; }
  double flops() const { return 2.0 * n * out_h() * out_w() * co * ci * kh * kw; }
};

// fp32 FMA GFLOP/s of this machine on `threads` threads, measured now (tools/peaks.h).
double measured_fma_peak_gflops(int threads);

// A Kiln conv kernel with its buffers bound: run() is one launch.
class KilnConv {
 public:
  KilnConv(const ConvShape& s, runtime::ConvSchedule schedule, int cpu_target = -1);
  ~KilnConv();
  int run();
  const std::vector<float>& output() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// oneDNN convolution_forward (inference) with a fused ReLU post-op, on the same data.
// `nhwc_activations`: src/dst in NHWC like Kiln; otherwise format `any` (oneDNN's choice,
// usually a channel-blocked layout; reorders are outside the timed call).
class OneDnnConv {
 public:
  OneDnnConv(const ConvShape& s, bool nhwc_activations);
  ~OneDnnConv();
  void run();
  std::vector<float> output_nhwc();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::bench
