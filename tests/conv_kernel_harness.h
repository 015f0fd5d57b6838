// What the convolution kernel tests share: a one-convolution problem and its reference
// output, the kernel generated for it on one CPU target, and a call with its buffers bound the
// way the runtime binds them (blocked or Winograd-transformed weights).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "HalideBuffer.h"
#include "codegen/kernel_library.h"
#include "conv_weights.h"
#include "graph/builder.h"
#include "graph/reference.h"
#include "halide_errors.h"
#include "kernels.h"
#include "kiln/runtime.h"

namespace kiln::conv_kernel_test {

using graph::Layout;
using HalideBuffer = Halide::Runtime::Buffer<float>;

struct ConvCase {
  const char* name;
  int64_t n, ci, h, w, co, kh, kw;
  int stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dil_h, dil_w;
};

inline const graph::Activation kEpilogues[] = {
    {}, {0.0f, INFINITY}, {0.0f, 6.0f}};

// A one-node graph in the kernel's own layouts; its reference output is the expectation.
struct Problem {
  graph::Graph g;
  graph::Tensor input;
  graph::Tensor expected;
};

inline Problem make_problem(const ConvCase& c, const graph::Activation& act, uint64_t seed,
                     bool residual = false) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {c.n, c.h, c.w, c.ci}, Layout::nhwc);
  const int64_t wsize = c.kh * c.kw * c.ci * c.co;
  const float bound = 1.0f / std::sqrt(static_cast<float>(c.ci * c.kh * c.kw));
  const graph::ValueId w = b.constant("w", {c.kh, c.kw, c.ci, c.co},
                                      graph::random_uniform(wsize, -bound, bound, seed), Layout::hwio);
  // Bias shifted negative so ReLU and ReLU6 both clip a real share of the outputs.
  const graph::ValueId bias = b.constant("b", {c.co}, graph::random_uniform(c.co, -0.6f, 0.4f, seed + 1));
  graph::Conv2d attrs{c.stride_h, c.stride_w, c.pad_top, c.pad_left, c.pad_bottom, c.pad_right,
                      c.dil_h, c.dil_w, act};
  std::vector<graph::ValueId> ins = {x, w, bias};
  if (residual) {
    attrs.residual = true;
    const int64_t oh = (c.h + c.pad_top + c.pad_bottom - c.dil_h * (c.kh - 1) - 1) / c.stride_h + 1;
    const int64_t ow = (c.w + c.pad_left + c.pad_right - c.dil_w * (c.kw - 1) - 1) / c.stride_w + 1;
    ins.push_back(b.constant("residual", {c.n, oh, ow, c.co},
                             graph::random_uniform(c.n * oh * ow * c.co, -1.0f, 1.0f, seed + 3),
                             Layout::nhwc));
  }
  b.output(b.op("conv", attrs, ins));
  Problem p{b.finish(), {}, {}};
  // Inputs up to 8 in magnitude so that ReLU6 saturates too.
  p.input = {{c.n, c.h, c.w, c.ci}, Layout::nhwc,
             graph::random_uniform(c.n * c.h * c.w * c.ci, -8.0f, 8.0f, seed + 2)};
  p.expected = graph::run_reference(p.g, {p.input})[0];
  return p;
}

inline HalideBuffer wrap(const float* data, const graph::Shape& shape) {
  std::vector<int> sizes(shape.rbegin(), shape.rend());
  return HalideBuffer(const_cast<float*>(data), sizes);
}

// The problem's one convolution, lowered as the runtime lowers it, with `schedule` ("" for the
// default choice).
inline graph::KernelSpec conv_spec(const Problem& p, const std::string& schedule) {
  ModelOptions lower;
  lower.lower_only = true;
  graph::KernelSpec spec = Model(p.g, lower).kernels().at(0);
  std::get<graph::ConvKernelSpec>(spec).schedule = schedule;
  return spec;
}

// The generated kernel of `spec` for CPU target `target` (an index into runtime::cpu_targets(),
// or -1: every target behind a dispatch wrapper). `keep` holds the loaded code.
// `half_width`: which half-width kernels (GeneratedKernel::half_fn) it gets.
inline const GeneratedKernel& generate_kernel(const graph::KernelSpec& spec, int target,
                                              std::shared_ptr<const GeneratedKernels>* keep,
                                              HalfWidth half_width = HalfWidth::where_faster) {
  codegen::CodegenOptions o;
  o.cache_dir = KILN_TEST_CACHE_DIR;
  if (target < 0) o.targets = runtime::cpu_targets();
  KernelRequest request;
  request.half_width = half_width;
  if (target >= 0) request.cpu_target = runtime::cpu_targets()[static_cast<size_t>(target)];
  *keep = codegen::kernel_generator(o)({spec}, request);
  return (*keep)->kernels.at(0);
}

inline GeneratedKernelFn generate(const graph::KernelSpec& spec, int target,
                           std::shared_ptr<const GeneratedKernels>* keep) {
  return generate_kernel(spec, target, keep).fn;
}

// Runs the problem's kernel with `schedule` on `target` and returns the output; the output
// starts as NaN everywhere. The weights are bound as the runtime binds them: Winograd-transformed
// or blocked by output channels where the kernel reads them so. `half`: its half-width kernel
// (GeneratedKernel::half_fn), which it must have, instead of its main one.
inline std::vector<float> run_kernel(const Problem& p, const std::string& schedule, int target,
                                     bool half = false) {
  std::shared_ptr<const GeneratedKernels> keep;
  const graph::KernelSpec spec = conv_spec(p, schedule);
  const GeneratedKernel& kernel =
      generate_kernel(spec, target, &keep, half ? HalfWidth::always : HalfWidth::never);
  std::vector<float> out(p.expected.data.size(), NAN);
  if (half && !kernel.half_fn) {
    ADD_FAILURE() << "no half-width kernel";
    return out;
  }
  const graph::Node& node = p.g.nodes()[0];
  const graph::Value& w = p.g.value(node.inputs[1]);
  const graph::Value& bias = p.g.value(node.inputs[2]);
  // The tensors under the kernel's shapes: a pointwise convolution's may hold the image's rows
  // merged (graph::PlanOptions::flat_pointwise), the same bytes.
  const graph::ConvKernelSpec& conv = std::get<graph::ConvKernelSpec>(spec);
  HalideBuffer in_b = wrap(p.input.data.data(), conv.input.shape);
  HalideBuffer w_b = wrap(w.data->data(), w.shape);
  const int kh = static_cast<int>(w.shape[0]), kw = static_cast<int>(w.shape[1]);
  const int ci = static_cast<int>(w.shape[2]), co = static_cast<int>(w.shape[3]);
  runtime::AlignedVector<float> copy;
  if (kernel.winograd_tile > 0) {
    copy =
        runtime::winograd_conv_weights(w.data->data(), ci, co, kernel.winograd_tile, conv.stride_w);
    const int alpha = runtime::winograd_alpha(kernel.winograd_tile, conv.stride_w);
    w_b = HalideBuffer(copy.data(), {co, ci, alpha, alpha});
  } else if (runtime::blocks_conv_weights(conv)) {
    copy = runtime::block_conv_weights(w.data->data(), kh, kw, ci, co,
                                       runtime::conv_weight_interleave(conv));
    w_b = HalideBuffer(copy.data(), 5, runtime::blocked_conv_weight_dims(kh, kw, ci, co).data());
  }
  HalideBuffer b_b = wrap(bias.data->data(), bias.shape);
  HalideBuffer out_b = wrap(out.data(), conv.output.shape);
  std::vector<void*> args = {in_b.raw_buffer(), w_b.raw_buffer(), b_b.raw_buffer()};
  HalideBuffer res_b;
  if (node.inputs.size() == 4) {
    const graph::Value& r = p.g.value(node.inputs[3]);
    res_b = wrap(r.data->data(), conv.residual->shape);
    args.push_back(res_b.raw_buffer());
  }
  args.push_back(out_b.raw_buffer());
  runtime::begin_halide_call();
  const int rc = (half ? kernel.half_fn : kernel.fn)(args.data());
  EXPECT_EQ(rc, 0) << runtime::last_halide_error();
  return out;
}

inline void expect_close(const std::vector<float>& got, const graph::Tensor& want,
                         double atol = 1e-5) {
  // fp32 accumulation in a different order than the double reference.
  const double ratio = graph::worst_error_ratio(got, want.data, 1e-4, atol);
  EXPECT_LE(ratio, 1.0) << "max abs error " << graph::max_abs_diff(got, want.data)
                        << " (a NaN means an output element was never written)";
}

}  // namespace kiln::conv_kernel_test
