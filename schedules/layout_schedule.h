// Schedules of the NCHW -> NHWC transform (generators/ops/layout.h).
#pragma once

#include "Halide.h"

namespace kiln::schedules {

struct LayoutFuncs {
  Halide::Func output;  // (c, x, y, n)
  Halide::Var c, x, y, n;
};

// Square register tiles transposed with shuffles, parallel over rows.
void schedule_layout_cpu(const LayoutFuncs& f, const Halide::Target& target);
// 32x8 tiles, one thread per element.
void schedule_layout_cuda(const LayoutFuncs& f, const Halide::Target& target);

}  // namespace kiln::schedules
