// The reference interpreter's per-op semantics (see reference.h): naive loops with double
// accumulation, written for clarity, never for speed. Each works on physical shapes: an NHWC
// tensor's shape is [N, H, W, C] and its layout tag says so.
#pragma once

#include <cmath>
#include <vector>

#include "graph/ir.h"
#include "graph/reference.h"
#include "graph/shape_inference.h"

namespace kiln::graph {

// Index of (n, c, h, w) in an NCHW or NHWC tensor.
struct ImageIndex {
  ImageDims d;
  Layout l;
  int64_t operator()(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return l == Layout::nchw ? ((n * d.c + c) * d.h + h) * d.w + w
                             : ((n * d.h + h) * d.w + w) * d.c + c;
  }
};

// ONNX's NaN semantics for clamps and maxima (numpy's): a NaN in gives NaN out. std::max and
// std::min would return the other operand instead.
inline double clamp_nan(double v, double lo, double hi) {
  return std::isnan(v) ? v : std::min(std::max(v, lo), hi);
}
inline double max_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

// One chain step (ElementwiseChain, Conv2d::post) as the op it came from computes it, in double.
// scale and shift: the step's per-channel values (affine steps only).
double reference_chain_step(const ChainStep& step, double v, double scale, double shift);

// An ElementwiseChain: inputs x, then each affine step's per-channel scale and shift. Each step
// is rounded to float, as the unfused ops would store it. Also a convolution's pre steps.
Tensor reference_chain(const ElementwiseChain& ch, const std::vector<const Tensor*>& inputs);

// Conv2d (any groups, residual, activation, pre and post steps), BatchNorm, Pool2d, GlobalPool, Gemm, MatMul.
bool is_compute_op(const Op& op);
Tensor reference_compute_op(const Op& op, const std::vector<const Tensor*>& inputs,
                            const Shape& out_shape, Layout out_layout);

// Softmax, LogSoftmax and Hardmax (reference_ops_reduce.cpp).
Tensor reference_softmax(const Softmax& sm, const Tensor& x);
// Every ReduceKind over the reduced axes (reference_ops_reduce.cpp).
Tensor reference_reduce(const Reduce& r, const Tensor& x, const Shape& out_shape, Layout layout);
Tensor reference_topk(const TopK& t, const Tensor& x, const Shape& out_shape, Layout layout);

// Every other op: unary and binary elementwise, Reshape, Transpose, Concat, Slice, Pad, Tile,
// Softmax, Reduce, LayerNorm, Resize, LayoutTransform.
Tensor reference_data_op(const Op& op, const std::vector<const Tensor*>& inputs,
                         const Shape& out_shape, Layout out_layout);

}  // namespace kiln::graph
