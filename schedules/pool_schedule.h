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
// One thread per (channel, output pixel), 32 channels x 8 pixels a block.
void schedule_pool_gpu(const generators::ops::PoolAlgorithm& a, const PoolShape& out,
                       const Halide::Target& target);

}  // namespace kiln::schedules
