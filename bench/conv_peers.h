// Shared pieces of the convolution benchmarks: the machine's measured FMA peak, Kiln kernel
// launches on prepared buffers, and oneDNN's fused convolution + bias (+ residual sum) +
// activation, on the same random data.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/kernel_spec.h"
#include "kiln/runtime.h"

namespace kiln::bench {

// One convolution, batch n, a kh x kw kernel window, equal strides, symmetric padding. `depthwise`:
// groups == channels (ci == co, one kh x kw filter per channel), else groups == 1.
struct ConvShape {
  int64_t n, ci, h, w, co, kh, kw;
  int stride, pad;
  bool depthwise = false;
  int64_t out_h() const { return (h + 2 * pad - kh) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - kw) / stride + 1; }
  int64_t input_elements() const { return n * h * w * ci; }
  int64_t weight_elements() const { return kh * kw * (depthwise ? 1 : ci) * co; }
  int64_t output_elements() const { return n * out_h() * out_w() * co; }
  // Multiply-adds of the convolution itself, 2 flops each (bias, residual and activation are
  // not counted).
  double flops() const { return 2.0 * n * out_h() * out_w() * co * (depthwise ? 1 : ci) * kh * kw; }
  // Compulsory traffic: input + weights + output, fp32 (the bias and a residual not counted).
  double bytes() const { return 4.0 * (input_elements() + weight_elements() + output_elements()); }
};

enum class ConvEpilogue { none, relu, relu6 };
// The activation Kiln fused into a convolution: none, relu or relu6 (anything else throws).
ConvEpilogue conv_epilogue(const graph::Activation& a);

// What follows the convolution + bias: out = act(conv(x) + b [+ residual]).
struct ConvEpilogueSpec {
  ConvEpilogue activation = ConvEpilogue::relu;
  bool residual = false;  // dense convolutions only (Kiln has no depthwise residual kernel)
};

// fp32 FMA GFLOP/s of this machine on `threads` threads, measured now (tools/peaks.h).
double measured_fma_peak_gflops(int threads);
// Streaming-copy GB/s (bytes read + written) on `threads` threads, measured now.
double measured_bandwidth_gbs(int threads);

// The benchmarks' data: deterministic random input in [-1, 1), weights in [-b, b) with
// b = 9 / sqrt(fan-in) (outputs with a standard deviation of about 3, so ReLU and ReLU6 both
// clamp some), bias in [-0.1, 0.1), residual in [-1, 1); input, residual and output NHWC,
// weights HWIO ([Kh, Kw, 1, C] for depthwise). Kiln and oneDNN are fed the same values.
std::vector<float> conv_input(const ConvShape& s);
std::vector<float> conv_weights(const ConvShape& s);
std::vector<float> conv_bias(const ConvShape& s);
std::vector<float> conv_residual(const ConvShape& s);

// A Kiln conv kernel with its buffers bound: run() is one launch. The one-node graph of the
// convolution runs in a kiln::Model, so the kernel is the one codegen generates for the shape
// (`schedule`: tuned, the default choice for the shape, or naive; weights at the runtime's row
// stride), compiled on construction or loaded from the kernel cache (`kiln run`'s). `cpu_target`:
// an index into runtime::cpu_targets(), or -1 for the best this CPU supports.
class KilnConv {
 public:
  KilnConv(const ConvShape& s, Schedule schedule, int cpu_target = -1,
           ConvEpilogueSpec epilogue = {});
  ~KilnConv();
  int run();
  const std::vector<float>& output() const;  // NHWC

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// oneDNN convolution_forward (inference, direct) with the epilogue as post-ops: a sum post-op
// for the residual (dst is filled with the residual at construction, so the first run()
// computes exactly what Kiln does; later runs keep accumulating into dst, the same memory
// traffic), then an eltwise ReLU or clip(0, 6). Depthwise shapes are grouped convolutions with
// groups == channels. `nhwc_activations`: src/dst in NHWC like Kiln; otherwise format `any`
// (oneDNN's choice, usually a channel-blocked layout; reorders are outside the timed call).
// oneDNN fixes its parallelisation when the primitive is created: create it after setting the
// OpenMP thread count it will run with.
class OneDnnConv {
 public:
  OneDnnConv(const ConvShape& s, bool nhwc_activations, ConvEpilogueSpec epilogue = {});
  ~OneDnnConv();
  void run();
  std::vector<float> output_nhwc();
  std::string implementation()
      const;  // oneDNN's name for the chosen kernel, e.g. "jit:avx512_core"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::bench
