// Shape inference's internals, shared by its files (shape_inference.cpp: the op dispatch and
// the tensor ops; shape_inference_image.cpp: convolution, pooling and resize). Not an API.
#pragma once

#include <string>

#include "graph/shape_inference.h"

namespace kiln::graph::shape_detail {

// Throws graph::Error naming the node and its op.
[[noreturn]] void fail(const Node& n, const std::string& what);
void expect_inputs(const Node& n, size_t count);
// Input 0, which must be a 4-D NCHW or NHWC tensor.
const Value& activation_input(const Graph& g, const Node& n);
// Input i, which must have shape [length]; `role` names it in the message.
void expect_vector(const Graph& g, const Node& n, size_t i, int64_t length, const char* role);
// Input i, which must not be NHWC or HWIO (the op indexes it in logical, row-major order).
const Value& logical_input(const Graph& g, const Node& n, size_t i);

// The output of pooling `p` over an image of dims `d` (shape `shape`, for messages).
ImageDims pooled_dims(const Node& n, const Pool2d& p, ImageDims d, const Shape& shape);
// A Resize's attributes against its input's shape `in` (in the order the Resize reads it).
void check_resize(const Node& n, const Resize& r, const Shape& in, Layout layout);
TypedShape infer_conv(const Graph& g, const Node& n, const Conv2d& c);
TypedShape infer_pool(const Graph& g, const Node& n, const Pool2d& p);

}  // namespace kiln::graph::shape_detail
