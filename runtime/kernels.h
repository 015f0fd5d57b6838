// The AOT kernel table: every compiled kernel, by epilogue, schedule and target, callable
// through Halide's uniform argv entry point.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::runtime {

using KernelFn = int (*)(void** args);

enum class ConvEpilogue { none, relu, relu6 };
enum class ConvSchedule { naive, tuned };

ConvEpilogue conv_epilogue(const graph::Activation& a);  // a must be supported

// CPU targets the kernels were compiled for, best first (KILN_CPU_TARGETS).
const std::vector<std::string>& cpu_targets();
// Whether this CPU has every feature a target needs.
bool cpu_target_supported(int index);
// The best target this CPU supports: the one the multi-target wrappers pick.
int best_cpu_target();

// target < 0: the multi-target wrapper (runtime dispatch). Argument order for conv kernels:
// input, weights, bias, stride_x, stride_y, pad_x, pad_y, dilation_x, dilation_y,
// [residual,] output.
KernelFn cpu_conv_kernel(ConvEpilogue e, ConvSchedule s, int target, bool residual = false);
KernelFn cpu_layout_kernel(int target);  // input, output
// Depthwise convolution (one filter per channel): same arguments as the conv kernels, without
// a residual; one schedule.
KernelFn cpu_depthwise_kernel(ConvEpilogue e, int target);

// nullptr when the build has no CUDA kernels.
KernelFn cuda_conv_kernel(ConvEpilogue e, bool residual = false);
KernelFn cuda_layout_kernel();
KernelFn cuda_depthwise_kernel(ConvEpilogue e);

}  // namespace kiln::runtime
