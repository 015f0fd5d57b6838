// Schedules of the layout transforms: NCHW -> NHWC (generators/ops/layout.h) and back.
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

// The NHWC -> NCHW transform, `output` (x, y, c, n) of an input (c, x, y, n): vectors along
// x (strided loads), tasks of 8 output rows. Vectorizing a tile along the channels too made
// Halide load the tile's whole span densely and shuffle it, which LLVM scalarized for channel
// counts that are not a multiple of the vector (seg_tiny's 21).
void schedule_to_nchw_cpu(Halide::Func output, const Halide::Target& target);

}  // namespace kiln::schedules
