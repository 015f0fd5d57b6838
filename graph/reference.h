// A plain reference interpreter: runs any graph (before or after the passes, NCHW or NHWC)
// node by node with naive loops and double accumulation. The independent check for every
// kernel and pass; never fast.
#pragma once

#include <vector>

#include "graph/ir.h"

namespace kiln::graph {

struct Tensor {
  Shape shape;
  Layout layout = Layout::any;
  std::vector<float> data;
};

// `inputs` in the order of g.inputs, each in its declared shape and layout. Returns the graph
// outputs in their graph layout.
std::vector<Tensor> run_reference(const Graph& g, const std::vector<Tensor>& inputs);

// NCHW <-> NHWC (any other pair throws); a copy when the layouts are equal.
Tensor to_layout(const Tensor& t, Layout to);
// The same from data the caller keeps (a runtime output): one copy, the converted one.
Tensor to_layout(const float* data, const Shape& shape, Layout from, Layout to);

// |got - want|, with ONNX's view of special values: 0 when both are NaN or both the same
// infinity, infinite when only one is NaN or an infinity.
double element_error(float got, float want);
// Largest element_error(a, b) / (atol + rtol * |b|): <= 1 means every element is within
// tolerance (NaN where the reference has NaN included).
double worst_error_ratio(const std::vector<float>& a, const std::vector<float>& b, double rtol,
                         double atol);
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace kiln::graph
