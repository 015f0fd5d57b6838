// What the runtime and codegen share about the CPU kernels: the build's CPU targets and the
// run-time check of which this CPU supports, the convolution schedules and the default choice
// among them, and the weight layouts the convolution schedules read best.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::runtime {

// naive: Halide's default schedule (a baseline). tuned: the CPU schedule for wide outputs
// (schedules/conv_schedule_cpu.cpp). tuned_deep: the CPU schedule for small outputs with long
// reductions (schedules/conv_schedule_cpu_deep.cpp). Both are correct for every shape.
// tuned_1x1: the wide schedule reading the input in place instead of staging a zero-padded
// copy; it takes only 1x1 windows without padding.
enum class ConvSchedule { naive, tuned, tuned_deep, tuned_1x1 };
const char* to_string(ConvSchedule s);
// The schedule called `name` (to_string's spelling), or nothing.
std::optional<ConvSchedule> parse_conv_schedule(const std::string& name);

// The faster tuned CPU schedule for a dense conv of this shape: tuned_deep for outputs of at
// most 64 pixels, or at most 196 pixels (14x14) from a spatial kernel with at least 1024
// (input channel x tap) steps; tuned_1x1 for the other unpadded 1x1 windows; tuned otherwise.
// Measured, tuned_deep against tuned (1 thread, weights evicted between calls): 7x7 outputs of
// 512..2048 channels 1.25-1.30x, the stride-2 1x1 14x14 -> 7x7 1024 -> 2048 1.77x, 3x3 14x14
// 256 -> 256 1.12x, but 1x1 14x14 0.90-0.97x and 28x28 layers equal. tuned_1x1 against tuned
// (same run, 2 threads): 1.01-1.28x, most on thin layers where the staged copy was a large
// share; reading the input in place inside the deep schedule measured 0.44-1.01x, so deep 1x1
// layers keep their copy.
ConvSchedule tuned_conv_schedule(int64_t out_h, int64_t out_w, int64_t in_channels,
                                 int64_t kernel_h, int64_t kernel_w, bool padded);

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
