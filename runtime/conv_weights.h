// Dense conv weights in the layout the CPU kernels read best (runtime::conv_weight_ci_stride),
// for the callers that bind Halide buffers themselves: the runtime's Model and the benchmarks.
#pragma once

#include <cstdint>
#include <vector>

#include "HalideRuntime.h"

namespace kiln::runtime {

// Contiguous HWIO weights ([Kh, Kw, Ci, Co]) copied at conv_weight_ci_stride(Co) between input
// channels, with the Halide dimensions (co, ci, kx, ky, innermost first) of the copy. `data` is
// empty when that stride is Co: the weights are already laid out that way.
struct StridedConvWeights {
  std::vector<float> data;
  halide_dimension_t dims[4];
};
StridedConvWeights restride_conv_weights(const float* hwio, int64_t kh, int64_t kw, int64_t ci,
                                         int64_t co);

}  // namespace kiln::runtime
