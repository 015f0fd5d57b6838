// CUDA schedule for the fused convolution: one GPU block per output tile of 32 channels x
// 16 pixels x 2 rows, one thread per (channel, 4-pixel register tile).
//
// Threads of a warp take consecutive output channels, so their weight loads are coalesced
// (Co is innermost in the HWIO weights) and their input loads hit one address (a broadcast).
#include "conv_schedule.h"

namespace kiln::schedules {

void schedule_conv_cuda(const ConvFuncs& f, const Halide::Target& /*target*/) {
  using Halide::TailStrategy;
  using Halide::Var;
  Halide::Func output = f.output;
  Halide::Func acc = f.acc;
  const Var &co = f.co, &x = f.x, &y = f.y, &n = f.n;
  Var xo("xo"), xi("xi"), yn("yn"), bco("bco"), bx("bx"), by("by"), tco("tco"), tx("tx"),
      ty("ty");

  constexpr int kPixelsPerThread = 4;
  output.split(x, xo, xi, kPixelsPerThread, TailStrategy::GuardWithIf)
      .fuse(y, n, yn)
      .reorder(xi, co, xo, yn)
      .gpu_tile(co, xo, yn, bco, bx, by, tco, tx, ty, 32, 4, 2, TailStrategy::GuardWithIf)
      .unroll(xi);

  // Per-thread accumulators: kPixelsPerThread registers through the whole reduction.
  acc.compute_at(output, tco).unroll(x);
  acc.update().reorder(x, f.r.x, f.r.y, f.r.z).unroll(x);
  // input_padded stays inline: the zero-padding test is a select on the load, cheaper on a
  // GPU than staging; shared-memory staging is left for when it can be measured on a device.
}

}  // namespace kiln::schedules
