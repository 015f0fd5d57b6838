// What the runtime and codegen share about the CPU kernels: the build's CPU targets and the
// run-time check of which this CPU supports, and the weight layouts the convolution schedules
// read best.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::runtime {

// CPU targets kernels are compiled for, best first (KILN_CPU_TARGETS).
const std::vector<std::string>& cpu_targets();
// Whether this CPU has every feature a target needs.
bool cpu_target_supported(int index);
// The best target this CPU supports: the one the multi-target wrappers pick.
int best_cpu_target();
// The Halide target of the CUDA kernels (KILN_CUDA_TARGET).
const std::string& cuda_target();

// Distance in floats between consecutive input channels of the HWIO weights a CPU dense conv
// kernel reads best: the output-channel count, plus one 64-byte line when that count is a
// multiple of 128 floats. The kernel walks the weights one input channel at a time; at a stride
// of 512 bytes or a multiple of it, every step lands in the same few L1 cache sets and the
// lines evict each other (measured: 14x14, 256 -> 256 channels 3x3 on 1 thread, 219 -> 253
// GFLOP/s). The kernels take any stride; this is only the layout they are fastest with.
int64_t conv_weight_ci_stride(int64_t out_channels);

}  // namespace kiln::runtime
