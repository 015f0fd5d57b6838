// Schedules of the pooling kernels (generators/ops/pool.h): memory-bound, so vectors of
// channels (contiguous in NHWC), rows of the output in parallel, nothing staged.
#pragma once

#include <cstdint>

#include "Halide.h"
#include "generators/ops/pool.h"

namespace kiln::schedules {

// The output's constant extents, NHWC: channels, width, height, batch.
struct PoolShape {
  int64_t channels, width, height, batch;
};

void schedule_pool_cpu(const generators::ops::PoolAlgorithm& a, const PoolShape& out,
                       const Halide::Target& target);
// The height of schedule_pool_cpu_bands' bands of output rows (pool_schedule.cpp), for a
// producer whose rows are `producer_row_bytes` long.
int pool_band_rows(const PoolShape& out, const graph::Pool2d& window, int64_t producer_row_bytes);
// A pooling fused after the convolution `producer` (graph::Conv2d::pool, its window `window`):
// tasks of bands of output rows in parallel (about 8 per image, shared evenly by 2 and 4
// threads), `producer` computed per task for the band of its rows the task's windows cover
// (recomputing the rows two bands' windows share), channels in vectors.
void schedule_pool_cpu_bands(const generators::ops::PoolAlgorithm& a, const PoolShape& out,
                             const graph::Pool2d& window, Halide::Func producer,
                             int64_t producer_row_bytes, const Halide::Target& target);
// One thread per (channel, output pixel), 32 channels x 8 pixels a block.
void schedule_pool_gpu(const generators::ops::PoolAlgorithm& a, const PoolShape& out,
                       const Halide::Target& target);

}  // namespace kiln::schedules
