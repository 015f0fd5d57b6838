// Algorithm builder for Resize (ONNX Resize and Upsample), with the semantics the reference
// interpreter states (graph/reference_ops_data.cpp). The input is a Func indexed innermost first
// (Halide dimension d is row-major axis rank - 1 - d).
#pragma once

#include "Halide.h"
#include "graph/ir.h"

namespace kiln::generators::ops {

// out(i) = x at the source coordinates of i: per axis the nearest input index, or for linear
// mode on the last two axes the weighted pair of neighbours (edge values past the ends). Axes the
// resize leaves alone are read directly.
Halide::Func resize(const Halide::Func& x, const graph::Shape& in_shape, const graph::Resize& r);

}  // namespace kiln::generators::ops
