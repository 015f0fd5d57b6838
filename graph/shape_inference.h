// Output shapes and layouts of every op, from its inputs and attributes. Used by the builder
// to create output values and by the verifier to check them.
#pragma once

#include "graph/ir.h"

namespace kiln::graph {

// Activation dims independent of layout.
struct ImageDims {
  int64_t n = 0, c = 0, h = 0, w = 0;
};
ImageDims image_dims(const Shape& s, Layout l);  // l must be NCHW or NHWC
Shape image_shape(const ImageDims& d, Layout l);
int channel_axis(Layout l);  // 1 for NCHW, 3 for NHWC

struct FilterDims {
  int64_t co = 0, ci = 0, kh = 0, kw = 0;
};
FilterDims filter_dims(const Shape& s, Layout l);  // l must be OIHW or HWIO
Shape filter_shape(const FilterDims& d, Layout l);

// The filter layout a convolution over an activation layout expects.
Layout filter_layout_for(Layout activation);

// The layout of a tensor in logical (row-major ONNX) order: NCHW for rank 4, else any.
Layout logical_layout(size_t rank);
bool op_is_unary(const Op& op);
// numpy broadcasting; *ok is false when the shapes are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, bool* ok);

// Whether a LayerNorm scale or bias of shape `param` holds x's normalized shape x[axis:] (leading
// 1s on either side aside), so it is indexed by the normalized coordinates alone, or is one
// value, which applies to every element.
bool holds_normalized_shape(const Shape& param, const Shape& x, int axis);
// Whether node n is a LayerNorm of every axis but the first with one-value scale and bias (a
// GroupNorm of one group): it normalizes each sample whole, so its input's layout does not
// matter.
bool is_layout_free_layer_norm(const Graph& g, const Node& n);

struct TypedShape {
  Shape shape;
  Layout layout;
};
// Throws Error naming the node when inputs do not fit the op.
TypedShape infer_output(const Graph& g, const Node& n);

}  // namespace kiln::graph
