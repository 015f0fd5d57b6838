// Algorithm builders for normalizations over a tensor's trailing axes (LayerNorm), with the
// semantics the reference interpreter states (graph/reference_ops_data.cpp). Inputs are Funcs
// indexed innermost first (Halide dimension d is row-major axis rank - 1 - d).
#pragma once

#include <vector>

#include "Halide.h"
#include "graph/ir.h"

namespace kiln::generators::ops {

// A row is one point of the leading axes [0, axis); the normalized axes [axis, rank) are Halide
// dimensions 0 .. `normalized_dims` - 1. The per-row results are Funcs over the output's
// coordinates with the normalized ones 0, so a schedule can compute each once per row:
// `sum` and `square_sum` (of the deviations) reduce over `r`, `mean` and `inv_std` follow.
struct LayerNormAlgorithm {
  Halide::Func out, sum, mean, square_sum, inv_std;
  Halide::RDom r;  // the normalized axes, innermost first
  int normalized_dims = 0;
};
// out = (x - mean) * inv_std * scale + bias with inv_std = 1 / sqrt(var + epsilon), var the mean
// squared deviation from the mean (computed about the mean, so large offsets cancel exactly
// before squaring). `params` holds scale and optionally bias, with their row-major shapes.
LayerNormAlgorithm layer_norm(const Halide::Func& x, const graph::Shape& shape,
                              const graph::LayerNorm& ln, const std::vector<Halide::Func>& params,
                              const std::vector<graph::Shape>& param_shapes);

}  // namespace kiln::generators::ops
