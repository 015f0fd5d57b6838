// Schedules of the normalizations of generators/ops/norm.h.
#pragma once

#include <cstdint>
#include <vector>

#include "Halide.h"

namespace kiln::schedules {

// A LayerNorm: `out` over the tensor (`extents` innermost first), the per-row Funcs
// (sum, mean, square_sum, inv_std, each at the row's point) and the RDom `r` over a row's
// `normalized_dims` innermost dimensions.
struct LayerNormFuncs {
  Halide::Func out, sum, mean, square_sum, inv_std;
  Halide::RDom r;
  int normalized_dims = 0;
  std::vector<int64_t> extents;
};

// CPU: parallel over blocks of rows; per row, the two sums vectorized along the innermost axis
// (a vector of partial sums added across at the end), then the normalized row written in vectors.
// The row is read three times while it sits in L1, so the kernel costs one pass over memory.
// One row of at least 32K elements over two or more dimensions (a GroupNorm(1) of one image):
// bands of it along its outermost dimension in parallel, each sum as partial sums per band; the
// row is then read three times from memory (or the last-level cache).
void schedule_layer_norm_cpu(const LayerNormFuncs& f, const Halide::Target& target);
// GPU: one thread per row for each sum (and the row statistics), one per element for the output.
void schedule_layer_norm_gpu(const LayerNormFuncs& f, const Halide::Target& target);

}  // namespace kiln::schedules
