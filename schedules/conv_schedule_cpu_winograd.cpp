// CPU schedule of Winograd convolution (family winograd, generators/ops/winograd.h): parallel
// over tasks of `rows` tile rows; per task the input transform, then the batched matrix
// multiply in register blocks, then the output transform and epilogue per tile. With split=1
// a task is one register block of output channels of those rows, and the input is transformed
// once per image, before the image's parallel loop: each task then reads only its channels'
// transformed weights, not all of them (a small image's few row tasks each streamed the whole
// [alpha^2, Ci, Co] block, megabytes, from memory).
//
// The matrix multiply is the direct schedule's outer product: per input channel it loads
// `vectors` weight vectors (U is [alpha, alpha, Ci, Co], so a position's Ci x Co matrix has Co
// innermost) and broadcasts `pixels` transformed inputs (one per tile), into accumulators that
// stay in registers for the whole reduction. The loop over register blocks of tiles runs inside
// the loop over channel blocks, so one position's weight block (Ci x vectors x 8 floats) is
// reused from L1 by every tile of the task.
#include "conv_params.h"
#include "conv_schedule.h"

namespace kiln::schedules {

using Halide::Func;
using Halide::TailStrategy;
using Halide::Target;
using Halide::Var;

void schedule_conv_cpu_winograd(generators::ops::WinogradAlgorithm w, Func output,
                                const ConvParams& p, const Target& target) {
  const int vec = vector_lanes(p, target);
  const int m = p.tile;
  Var yo("yo"), yi("yi"), ty("ty"), yt("yt"), xo("xo"), xi("xi"), coo("coo"), coi("coi"),
      task("task");
  // Output tiles in order, every channel of a tile after the other: the output transform of a
  // tile (A^T along x for all channels, computed at the tile) is then read from L1. Tiles
  // overhanging the output's edge are guarded, never shifted: a shifted tile would not start
  // at a multiple of m and its pixels would fall into two tiles.
  const int channels = p.block.vectors * vec;
  output.split(w.y, yo, yi, m * p.rows, TailStrategy::GuardWithIf)
      .split(yi, ty, yt, m)
      .split(w.x, xo, xi, m, TailStrategy::GuardWithIf);
  if (p.split_channels) {
    // One image at a time (the batch loop outermost, serial), so the transformed input shared
    // by the tasks is one image's, whatever the batch.
    Var cot("cot"), cob("cob");
    output.split(w.co, cot, cob, channels, TailStrategy::ShiftInwards)
        .split(cob, coo, coi, vec)
        .reorder(coi, xi, yt, coo, xo, ty, cot, yo, w.n)
        .fuse(cot, yo, task);
  } else {
    output.split(w.co, coo, coi, vec, TailStrategy::ShiftInwards)
        .reorder(coi, xi, yt, coo, xo, ty, yo, w.n)
        .fuse(yo, w.n, task);
  }
  output.parallel(task).vectorize(coi).unroll(xi).unroll(yt);
  w.output_x.compute_at(output, xo)
      .reorder(w.co, w.i, w.b)
      .vectorize(w.co, vec, TailStrategy::ShiftInwards)
      .unroll(w.i)
      .unroll(w.b);

  // The task's products M, alpha^2 x tiles x Co (at most ~150 KB on ResNet layers: L2): per
  // position (a, b), per block of channels, per block of tiles, one register tile.
  Var pco("pco"), pci("pci"), to("to"), ti("ti");
  w.products.compute_at(output, task)
      .split(w.co, pco, pci, channels, TailStrategy::ShiftInwards)
      .split(w.t, to, ti, p.block.pixels, TailStrategy::ShiftInwards)
      .reorder(pci, ti, to, pco, w.a, w.b, w.n)
      .vectorize(pci, vec)
      .unroll(pci)
      .unroll(ti);
  w.product.compute_at(w.products, to).vectorize(w.co, vec).unroll(w.co).unroll(w.t);
  w.product.update()
      .reorder(w.co, w.t, w.r.x, w.a, w.b, w.n)
      .vectorize(w.co, vec)
      .unroll(w.co)
      .unroll(w.t);

  // The task's transformed input V, alpha^2 x tiles x Ci, a vector of input channels at a time:
  // B^T along x (alpha^2 vectors) then along y, from the input read in place (zero outside).
  // With split=1, an image's at a time, in parallel over tiles, before the tasks that share it.
  Var vco("vco"), vci("vci");
  if (p.split_channels)
    w.input.compute_at(output, w.n).parallel(w.t);
  else
    w.input.compute_at(output, task);
  w.input.split(w.c, vco, vci, vec, TailStrategy::GuardWithIf)
      .reorder(vci, w.a, w.b, vco, w.t, w.n)
      .vectorize(vci)
      .unroll(w.a)
      .unroll(w.b);
  w.input_x.compute_at(w.input, vco)
      .reorder(w.c, w.a, w.y)
      .vectorize(w.c, vec, TailStrategy::GuardWithIf)
      .unroll(w.a)
      .unroll(w.y);
}

}  // namespace kiln::schedules
