// Algorithm builder for Resize (ONNX Resize and Upsample), with the semantics the reference
// interpreter states (graph/reference_ops_data.cpp). The input is a Func indexed innermost first
// (Halide dimension d is row-major axis rank - 1 - d).
#pragma once

#include <vector>

#include "Halide.h"
#include "graph/ir.h"

namespace kiln::generators::ops {

// out(i) = x at the source coordinates of i: per axis the nearest input index, or for linear and
// cubic mode the weighted neighbours (edge values past the ends), one axis at a time. Axes the
// resize leaves alone are read directly. `passes` are the intermediate one-axis passes,
// innermost axis first (the last one is inlined into `out`), for the schedule to compute
// ahead; `pass_shapes` their row-major shapes.
struct ResizeAlgorithm {
  Halide::Func out;
  std::vector<Halide::Func> passes;
  std::vector<graph::Shape> pass_shapes;
};
ResizeAlgorithm resize(const Halide::Func& x, const graph::Shape& in_shape, const graph::Resize& r);

}  // namespace kiln::generators::ops
