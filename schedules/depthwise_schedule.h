// Schedules of the depthwise convolution (generators/depthwise_generator.cpp): the Funcs and
// loop variables a schedule may touch.
#pragma once

#include "Halide.h"

namespace kiln::schedules {

struct DepthwiseFuncs {
  Halide::Func input_padded;  // zero-padded NHWC input, (c, x, y, n)
  Halide::Func acc;           // bias + sum over (kx, ky), (c, x, y, n)
  Halide::Func output;        // epilogue(acc)
  Halide::Var c, x, y, n;
  Halide::RDom r;  // r.x = kx, r.y = ky
  Halide::Expr channels, out_width, out_height;
};

// Memory-bound: vectors of channels by a few pixels held in registers over the taps, rows in
// parallel, the padded input strip staged once per task.
void schedule_depthwise_cpu(const DepthwiseFuncs& f, const Halide::Target& target);
// One thread per channel and pixel column, blocks of 32 channels x 8 pixels.
void schedule_depthwise_cuda(const DepthwiseFuncs& f, const Halide::Target& target);

}  // namespace kiln::schedules
