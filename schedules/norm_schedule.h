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

// A GroupNorm of a 4-D image (generators/ops/norm.h): `out` over the image (`extents`
// innermost first; NHWC when `nhwc`), the per-channel sums over the pixels (functions of
// (c, n), summed over the RDom of the two pixel dimensions) and the small per-group and
// per-channel Funcs between them and `out`.
struct GroupNormFuncs {
  Halide::Func out, channel_sum, channel_square_sum;
  std::vector<Halide::Func> statistics;  // mean, inv_std, channel_mean, channel_factor
  std::vector<int64_t> extents;
  bool nhwc = true;
};
// CPU: each sum once, over the whole image: NHWC in parallel bands of rows with the channels in
// vectors (the bands added up at the end), NCHW in vectors along each row of pixels, channels
// in parallel. The statistics at root (a few values per channel), then `out` as an elementwise
// kernel. The image is read three times, from the last-level cache when it fits there.
void schedule_group_norm_cpu(const GroupNormFuncs& f, const Halide::Target& target);
// GPU: one thread per (channel, image) for each sum, one per element for the output.
void schedule_group_norm_gpu(const GroupNormFuncs& f, const Halide::Target& target);

}  // namespace kiln::schedules
