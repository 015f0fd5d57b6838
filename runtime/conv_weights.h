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

// Grouped convolutions whose groups are not whole vectors of 16 output channels (ResNeXt's 4,
// RegNet's 8, 24 or 56) run as convolutions of blocks of `merge` consecutive groups, the
// smallest number (up to 8) whose output channels are whole vectors: weights widened to the
// block's input channels, zero where an output channel's group does not read the input. Each
// vector of output channels then reads one block's inputs as broadcasts instead of gathering
// them, for merge x the multiply-adds. Returns merge; 1 when the groups are whole vectors
// already or no such block exists. Codegen and the runtime both decide with this.
int grouped_conv_merge(int groups, int64_t out_channels);

// HWIO weights [Kh, Kw, Ci / groups, Co] -> [Kh, Kw, merge * Ci / groups, Co] (see above).
std::vector<float> widen_grouped_conv_weights(const float* hwio, int64_t kh, int64_t kw,
                                              int64_t ci_per_group, int64_t co, int groups,
                                              int merge);

}  // namespace kiln::runtime
