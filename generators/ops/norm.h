// Algorithm builders for normalizations over a tensor's trailing axes (LayerNorm) and over
// groups of an image's channels (GroupNorm), with the
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

// A GroupNorm of a 4-D image (NHWC when `nhwc`, else NCHW): per image n and channel c, the sums
// over the pixels (`channel_sum`, then `channel_square_sum` of the deviations from the group's
// mean) over the RDom `r` (the two pixel dimensions, innermost first), both Funcs of (c, n); the
// group statistics from them (`mean`, `inv_std` of (group, n)), then per (c, n) the mean and
// the factor `scale[c] * inv_std` the output applies (`channel_mean`, `channel_factor`).
// out = post((x - channel_mean) * channel_factor + bias[c] + residual): `inputs` holds x, scale,
// bias, the residual (with gn.residual) and the post steps' scale and shift per affine step.
struct GroupNormAlgorithm {
  Halide::Func out, channel_sum, mean, channel_square_sum, inv_std, channel_mean, channel_factor;
  Halide::RDom r;
};
GroupNormAlgorithm group_norm(const std::vector<Halide::Func>& inputs, const graph::Shape& shape,
                              bool nhwc, const graph::GroupNorm& gn);

}  // namespace kiln::generators::ops
