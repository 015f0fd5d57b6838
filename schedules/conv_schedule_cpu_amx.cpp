// The AMX schedule of bf16 convolutions (family amx): Halide's tile extraction turns a matrix
// multiply whose accumulator is stored in MemoryType::AMXTile, 16 x 16 float32 sums updated 32
// bf16 steps at a time, into tileloadd / tdpbf16ps / tilestored. Its pattern is narrow: the
// operands must be plain loads with affine 2-D indices, which is why the windows are gathered
// into a buffer first (a convolution's taps, indexed directly, did not match), and the tile is
// stored through a wrapper Func before the epilogue reads it.
#include "conv_params.h"
#include "conv_schedule.h"

namespace kiln::schedules {

using Halide::Func;
using Halide::RVar;
using Halide::TailStrategy;
using Halide::Var;

void schedule_conv_cpu_amx(const ConvMatmulFuncs& f, const ConvParams& p) {
  constexpr int kTile = 16;   // output channels and pixels of one AMX accumulator tile
  constexpr int kSteps = 32;  // bf16 reduction steps of one tdpbf16ps
  Func output = f.output, acc = f.acc, windows = f.windows;
  Var yo("yo"), yi("yi"), cb("cb"), cc("cc"), task("task"), ci("ci"), pi("pi"), aci("aci"),
      api("api");
  RVar ko("ko"), ki("ki");
  output.split(f.out_y, yo, yi, p.rows, TailStrategy::GuardWithIf);
  if (p.columns > 0) {
    output.split(f.out_co, cb, cc, p.columns, TailStrategy::ShiftInwards)
        .reorder(cc, yi, cb, yo, f.out_n)
        .fuse(cb, yo, task)
        .fuse(task, f.out_n, task)
        .vectorize(cc, kTile, TailStrategy::GuardWithIf);
  } else {
    output.fuse(yo, f.out_n, task).vectorize(f.out_co, kTile, TailStrategy::GuardWithIf);
  }
  output.parallel(task);
  // The tiles of the task's pixels and channels, rounded up to whole tiles (the extra pixels
  // read the windows of the next rows, or of the last image: computed, never stored).
  Func tiles = acc.in();
  // Rows of the stored tiles at least 32 channels apart: a row stride of 16 would fold the
  // store's 16 x 16 index into a 1-D one, which Halide's AMX pattern does not take.
  tiles.compute_at(output, task)
      .align_storage(f.co, 2 * kTile)
      .tile(f.co, f.p, ci, pi, kTile, kTile, TailStrategy::RoundUp)
      .vectorize(ci)
      .vectorize(pi);
  acc.compute_at(tiles, f.co).store_in(Halide::MemoryType::AMXTile);
  acc.tile(f.co, f.p, aci, api, kTile, kTile).vectorize(aci).vectorize(api);
  acc.update()
      .tile(f.co, f.p, aci, api, kTile, kTile, TailStrategy::GuardWithIf)
      .split(f.r.x, ko, ki, kSteps)
      .reorder({ki, aci, api, ko, f.co, f.p})
      .atomic()
      .vectorize(ki)
      .vectorize(aci)
      .vectorize(api);
  // The windows a tap at a time: each tap's input channels are one contiguous run of the
  // input, so the gather becomes dense vector loads (k vectorized across taps computed k / Ci
  // and k % Ci per lane: 1.1-1.24x on 3x3 layers of 16-256 channels, the same on 1x1).
  Var tap("tap"), ci_tap("ci_tap");
  if (p.windows_per_task) {
    windows.compute_at(output, task);
  } else {
    Var po("po"), pii("pii");
    windows.compute_root().split(f.p, po, pii, kTile, TailStrategy::GuardWithIf).parallel(po);
  }
  windows.split(f.k, tap, ci_tap, f.in_channels, TailStrategy::GuardWithIf)
      .vectorize(ci_tap, kTile, TailStrategy::GuardWithIf);
}

}  // namespace kiln::schedules
