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

}  // namespace kiln::runtime
