// Schedules of the depthwise convolution (generators/ops/conv.h, depthwise_conv2d): the Funcs
// and loop variables a schedule may touch.
#pragma once

#include <vector>

#include "Halide.h"

namespace kiln::schedules {

struct ConvParams;  // schedules/conv_params.h: a schedule's family and knobs

struct DepthwiseFuncs {
  Halide::Func input_padded;  // zero-padded NHWC input, (c, x, y, n)
  Halide::Func acc;           // bias + sum over (kx, ky), (c, x, y, n)
  Halide::Func output;        // epilogue(acc)
  Halide::Var c, x, y, n;
  Halide::RDom r;  // r.x = kx, r.y = ky
  Halide::Expr channels, out_width, out_height;
  Halide::Expr stride_x, dilation_x;
  // The input computed in the kernel, a row at a time (an expansion, Conv2d::expand), or
  // undefined. The CPU schedule computes it per output row into a window stored per task
  // (Halide's sliding window: each row once per band, the band's first needing the halo rows
  // again), and reads its zero padding in place; the GPU schedule computes it first. Its own
  // loops are the caller's to schedule.
  Halide::Func computed_input;
  int batch = 1;  // images (the tasks of an expansion's schedule are per image)
  int window_rows = 3;  // input rows one output row reads: (Kh - 1) * dilation_y + 1
};

// The parallel tasks of a depthwise convolution with a computed_input (an expansion), on CPUs:
// blocks of `channels` output channels (2 vectors, or 1, or all of them when fewer) by bands of
// `rows` output rows, about 8 tasks per call. Each task computes the expansion of its own
// channels only, row after row down its band, so only the rows above a band's first (the
// window's halo) are computed twice; the expansion's register block fits the task's channels.
struct ExpansionTasks {
  int channels, rows;
};
ExpansionTasks expansion_tasks(int channels, int out_height, int batch, const Halide::Target& target);

// The loop variables of a banded tiling (tile_bands).
struct BandLoops {
  Halide::Var co{"co"}, ci{"ci"}, xo{"xo"}, xi{"xi"}, yi{"yi"}, task{"task"};
};

// The tiling the depthwise and grouped schedules share, of `output` (c, x, y, n): parallel
// tasks of bands of `rows` rows (0: about 8 bands per image, at least 2 rows each); in a band,
// tiles of
// one vector of `vec` channels (ci, vectorized) by `pixels` pixels (xi, unrolled), with the
// channel-vector loop co inside the pixel-tile loop xo when `channels_inside`, outside it
// otherwise. Each width of `pixels` (widest first) is a specialization for rows at least that
// wide, on full tiles only (ShiftInwards never clips one); fewer channels than a vector take one
// output at a time. 0 < inner_lanes < vec: the channel vector is vectorized as vec /
// inner_lanes runs of inner_lanes channels (nested), so that reading a Func whose channels are
// permuted by runs (an interleaved accumulator) is a dense load and a shuffle, not a gather.
BandLoops tile_bands(Halide::Func output, const Halide::Var& c, const Halide::Var& x,
                     const Halide::Var& y, const Halide::Var& n, const Halide::Expr& channels,
                     const Halide::Expr& out_width, const Halide::Expr& out_height, int vec,
                     const std::vector<int>& pixels, bool channels_inside, int rows = 0,
                     int inner_lanes = 0);

// Memory-bound: a channel vector by a row of p.block.pixels pixels held in registers over the
// taps, bands of p.rows rows in parallel. 3x3 kernels unroll their taps so neighbouring pixels
// share their input loads. p.stage_input stages the padded band per task, else the zero
// padding is read in place (Halide splits off the border pixels' loops); p.channels_inside
// runs every channel vector of a pixel tile before the next tile (its input rows stay in L1),
// else each channel vector walks the band (a computed_input is never staged: p.stage_input is
// ignored). Family naive: Halide's default. `p` must pass conv_params_error
// (schedules/conv_params.h).
void schedule_depthwise_cpu(const DepthwiseFuncs& f, const ConvParams& p,
                            const Halide::Target& target);
// One thread per channel and pixel column, blocks of 32 channels x 8 pixels.
void schedule_depthwise_cuda(const DepthwiseFuncs& f, const Halide::Target& target);

}  // namespace kiln::schedules
