// Depthwise convolution schedules. Each output element needs only Kh*Kw multiply-adds, so the
// kernel is bound by memory: the goal is to read each input line from memory once, stream the
// output once, and keep the accumulators in registers.
#include "depthwise_schedule.h"

#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>

#include "conv_params.h"

namespace kiln::schedules {
namespace {
constexpr int kTasks = 8;  // parallel tasks to aim for: 2 threads get 4 each
}  // namespace

BandLoops tile_bands(Halide::Func output, const Halide::Var& c, const Halide::Var& x,
                     const Halide::Var& y, const Halide::Var& n, const Halide::Expr& channels,
                     const Halide::Expr& out_width, const Halide::Expr& out_height, int vec,
                     const std::vector<int>& pixels, bool channels_inside, int band_rows,
                     int inner_lanes) {
  using Halide::TailStrategy;
  BandLoops v;
  Halide::Var yo("yo");
  const Halide::Var& yi = v.yi;
  // About kTasks bands (a staged band re-reads Kh - 1 halo rows, so taller bands waste less:
  // 2-row bands re-read 2 of every 4 input rows of a 3x3 stride-1 layer).
  const Halide::Expr rows =
      band_rows > 0 ? Halide::Expr(band_rows) : Halide::max(2, (out_height + kTasks - 1) / kTasks);
  auto tile = [&](Halide::Stage s, int tile_channels, int tile_pixels) {
    s.split(c, v.co, v.ci, tile_channels, TailStrategy::ShiftInwards)
        .split(x, v.xo, v.xi, tile_pixels, TailStrategy::ShiftInwards)
        .split(y, yo, yi, rows, TailStrategy::GuardWithIf);
    if (channels_inside) {
      s.reorder(v.ci, v.xi, v.co, v.xo, yi, yo, n);
    } else {
      s.reorder(v.ci, v.xi, v.xo, v.co, yi, yo, n);
    }
    s.fuse(yo, n, v.task).parallel(v.task);
  };
  std::set<int> done;  // one specialization per width: Halide refuses a repeated condition
  for (int px : pixels) {
    if (!done.insert(px).second) continue;
    Halide::Stage s = output.specialize(channels >= vec && out_width >= px);
    tile(s, vec, px);
    if (inner_lanes > 0 && inner_lanes < vec) {
      Halide::Var run("run"), lane("lane");
      s.split(v.ci, run, lane, inner_lanes).vectorize(lane).vectorize(run).unroll(v.xi);
    } else {
      s.vectorize(v.ci, vec).unroll(v.xi);
    }
  }
  tile(output, 1, 1);
  return v;
}

ExpansionTasks expansion_tasks(int channels, int out_height, int batch, const Halide::Target& target) {
  const int vec = target.natural_vector_size<float>();
  ExpansionTasks t;
  t.channels = channels >= 2 * vec ? 2 * vec : channels >= vec ? vec : channels;
  const int blocks = (channels + t.channels - 1) / t.channels;
  const int max_bands = std::max(1, out_height / 4);  // of 4+ rows
  int bands = std::clamp((kTasks + blocks * batch - 1) / (blocks * batch), 1, max_bands);
  // The thread pool gives each thread a contiguous share of the tasks: an odd count leaves one
  // of 2 threads a task more. The fewest bands, at least as many, that give an even count,
  // where there is one: MobileNetV2's 112x112 expansion into 3 channel blocks, 4 bands (12
  // tasks) instead of 3 (9 tasks), 0.215-0.217 -> 0.166-0.182 ms in the network (2 threads,
  // alternating runs). Requiring a multiple of 4 (for 4 threads as well) made the 14x14
  // expansions, already even, split into more bands, each recomputing its halo rows: 1.05-1.24x
  // slower.
  t.rows = (out_height + bands - 1) / bands;
  for (int b = bands; b <= max_bands; ++b) {
    const int rows = (out_height + b - 1) / b;
    if ((out_height + rows - 1) / rows * blocks * batch % 2 == 0) {  // the bands `rows` make
      t.rows = rows;
      break;
    }
  }
  return t;
}

namespace {

// The tiling of a depthwise convolution with an expansion (expansion_tasks): tasks of a
// channel block by a band of rows; in a task, row after row, the pixel tiles of the row, and in
// a tile every channel vector of the block (its input pixels reused from L1). Full tiles only
// (ShiftInwards), as tile_bands: the widest of `pixels` that fits the row. Bands of p.rows rows
// (0: expansion_tasks').
BandLoops tile_channel_blocks(const DepthwiseFuncs& f, const ConvParams& p,
                              const std::vector<int>& pixels, const Halide::Target& target) {
  using Halide::TailStrategy;
  const auto constant = [](const Halide::Expr& e) {
    const std::optional<int64_t> v = Halide::Internal::as_const_int(e);
    if (!v) throw std::logic_error("a depthwise convolution with an expansion needs constant shapes");
    return static_cast<int>(*v);
  };
  const int channels = constant(f.channels), width = constant(f.out_width);
  ExpansionTasks t = expansion_tasks(channels, constant(f.out_height), f.batch, target);
  if (p.rows > 0) t.rows = p.rows;
  const int vec = target.natural_vector_size<float>();
  int px = 1;
  for (int w : pixels)
    if (w <= width) px = std::max(px, w);
  BandLoops v;
  Halide::Func output = f.output;
  Halide::Var block("block"), vectors("vectors"), yo("yo");
  // Vectors of channels first (the accumulators keep constant extents), then blocks of them.
  if (channels >= vec) {
    output.split(f.c, vectors, v.ci, vec, TailStrategy::ShiftInwards)
        .split(vectors, block, v.co, t.channels / vec, TailStrategy::ShiftInwards);
  } else {  // fewer channels than a vector: one masked vector, one block
    output.split(f.c, vectors, v.ci, vec, TailStrategy::GuardWithIf)
        .split(vectors, block, v.co, 1, TailStrategy::GuardWithIf);
  }
  output.split(f.x, v.xo, v.xi, px, TailStrategy::ShiftInwards)
      .split(f.y, yo, v.yi, t.rows, TailStrategy::GuardWithIf)
      .vectorize(v.ci)
      .unroll(v.xi)
      .reorder(v.ci, v.xi, v.co, v.xo, v.yi, block, yo, f.n)
      .fuse(block, yo, v.task)
      .fuse(v.task, f.n, v.task)
      .parallel(v.task);
  return v;
}

}  // namespace

void schedule_depthwise_cpu(const DepthwiseFuncs& f, const ConvParams& p,
                            const Halide::Target& target) {
  using Halide::Expr;
  using Halide::TailStrategy;
  if (p.family == ConvFamily::naive) {  // Halide's default, but a computed input is not inlined
    if (f.computed_input.defined()) Halide::Func(f.computed_input).compute_root();
    return;
  }
  // Fewer channels than a vector (GhostNet's 8-channel cheap operations): vectors of the
  // largest power of two of them, down to 4 lanes. With full-width vectors such a layer fell
  // to the scalar tile (one channel, one pixel, a 16-lane accumulator for one lane of it):
  // GhostNet's 8-channel 3x3 at 64x64 ran at 12% of the bandwidth, 14% of the model's time.
  int vec = target.natural_vector_size<float>();
  const std::optional<int64_t> known = Halide::Internal::as_const_int(f.channels);
  if (!f.computed_input.defined() && known)
    while (vec > 4 && vec > *known) vec /= 2;
  Halide::Func output = f.output, acc = f.acc, input_padded = f.input_padded;
  // The defaults (default_depthwise_params): one channel vector x 8 pixels, 8 accumulators
  // (4- and 1-pixel tiles for narrower rows). 3x3 kernels read the input in place with the
  // channel loop inside the pixel-tile loop, so a tile's input pixels (10 x 3 rows x all
  // channels for a 3x3) are read by every channel vector in turn while they are in L1, each
  // cache line used whole. Others stage the band with the pixel loop inside, and a 3x3's 9
  // weight vectors stay in registers along the row.
  std::vector<int> widths = {p.block.pixels};
  if (p.block.pixels > 4) widths.push_back(4);
  widths.push_back(1);
  // With an expansion: tasks of channel blocks (tile_channel_blocks), the channel loop inside.
  const bool expanded = f.computed_input.defined();
  const BandLoops loops =
      expanded ? tile_channel_blocks(f, p, widths, target)
               : tile_bands(output, f.c, f.x, f.y, f.n, f.channels, f.out_width, f.out_height,
                            vec, widths, p.channels_inside, p.rows);

  // Per (pixel tile, channel vector): the accumulators of one register tile.
  acc.compute_at(output, p.channels_inside || expanded ? loops.co : loops.xo)
      .vectorize(f.c, vec, TailStrategy::GuardWithIf)
      .unroll(f.c)
      .unroll(f.x);
  // The update of a register tile: channel vectors by pixels, both unrolled, over the taps;
  // `taps` unrolls that many of the tap loops (0: none, 1: a window row, 2: the whole window).
  const auto tile_update = [&](Halide::Stage s, int taps) {
    s.reorder(f.c, f.x, f.r.x, f.r.y)
        .vectorize(f.c, vec, TailStrategy::GuardWithIf)
        .unroll(f.c)
        .unroll(f.x);
    if (taps >= 1) s.unroll(f.r.x);
    if (taps >= 2) s.unroll(f.r.y);
  };
  // 3x3 kernels unroll their taps; at stride 1 or 2 (dilation 1) the pixels of a tile then
  // read overlapping input columns at constant offsets, and each input vector is loaded once
  // for up to 3 pixels (stride 1) or 2 (stride 2) instead of once per (pixel, tap).
  const Expr k3 = f.r.x.extent() == 3 && f.r.y.extent() == 3;
  for (const Expr& cond : {k3 && f.stride_x == 1 && f.dilation_x == 1,
                           k3 && f.stride_x == 2 && f.dilation_x == 1, k3})
    tile_update(acc.update().specialize(cond), 2);
  // Wider windows at stride 1 (ConvNeXt's 7x7, EfficientNet's 5x5) unroll the taps of a row
  // the same way: a tile's 8 pixels then read 8 + Kw - 1 input vectors per row of the window,
  // not 8 * Kw.
  tile_update(acc.update().specialize(f.r.x.extent() <= 7 && f.stride_x == 1 && f.dilation_x == 1), 1);
  tile_update(acc.update(), 0);
  // In place, the zero padding is read where it is: Halide's boundary condition marks the
  // interior as likely, so the loops over the border pixels are split off and the rest run
  // without a test. Against the staged padded band (an extra read and write of the input) with
  // the pixel loop inside the channel loop (the band's rows re-read from L2 by each channel
  // vector), MobileNetV2's 3x3 depthwise layers took 0.50-0.81x the time (bench_conv, AVX2, 2
  // threads; either change alone gained nothing, or 1.36x on the stride-2 112x112 layer only).
  // A computed input (a prologue) is staged by default, so it is computed once per element,
  // not per tap.
  if (expanded) {
    // The task's channels a row at a time, as its output rows need them (Halide's sliding
    // window: each row once per task), in a ring of the window's rows rounded up to a power of
    // two: Halide did not fold the storage itself (the reads clamp their rows to the image), and
    // each task wrote every row of its band to memory of its own (MobileNetV2's stride-2
    // expansions 1.02-1.07x faster folded, AVX-512, 2 threads).
    int ring = 1;
    while (ring < f.window_rows) ring *= 2;
    Halide::Func e(f.computed_input);
    e.store_at(output, loops.task).compute_at(output, loops.yi).fold_storage(e.args()[2], ring);
  } else if (p.stage_input) {
    input_padded.compute_at(output, loops.task).vectorize(f.c, vec, TailStrategy::GuardWithIf);
  }
}

void schedule_depthwise_cuda(const DepthwiseFuncs& f, const Halide::Target& /*target*/) {
  using Halide::TailStrategy;
  using Halide::Var;
  Halide::Func output = f.output;
  Var yn("yn"), bc("bc"), bx("bx"), tc("tc"), tx("tx");
  output.fuse(f.y, f.n, yn).gpu_tile(f.c, f.x, bc, bx, tc, tx, 32, 8, TailStrategy::GuardWithIf);
  Halide::Func acc = f.acc;
  acc.compute_at(output, tc);
  if (f.computed_input.defined()) Halide::Func(f.computed_input).compute_root();
}

}  // namespace kiln::schedules
