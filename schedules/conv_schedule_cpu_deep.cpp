// CPU schedule for convolutions with small outputs and long reductions (ResNet stages 3 and 4:
// 14x14 and 7x7 outputs, 256..2048 input channels): the layers whose weights, megabytes per
// layer, do not stay in any cache between calls.
//
// The wide schedule (conv_schedule_cpu.cpp) streams a channel block's whole weights through
// every register tile, so each weight is fetched once per tile row; when the weights come from
// DRAM (in a network, the previous layers have evicted them) that caps such layers at 40-55% of
// the FMA peak. Here each task owns one block of output channels and a band of rows, and the
// reduction over input channels runs in chunks: a chunk of the block's weights (288 input
// channels of one kernel tap for a 2-vector block: 36 KB) is loaded once and applied to every
// register tile of the task while it sits in L1, and the partial sums wait in a per-task
// accumulator (L1-sized) between chunks. Each weight then leaves DRAM once per call. The
// zero-padded input is staged once for the whole layer (it is small here), not once per task
// as in the wide schedule; an unpadded 1x1 window's float32 input is read in place
// (f.stage_input false) where the tiles cover the width exactly (the update rounds the last
// tile up: it would read past an unstaged input).
#include "conv_params.h"
#include "conv_schedule.h"

namespace kiln::schedules {

using Halide::Expr;
using Halide::Func;
using Halide::RVar;
using Halide::TailStrategy;
using Halide::Target;
using Halide::Var;

// Knobs (conv_params.h): the register block; p.tasks, the tasks per layer to aim for: a layer
// with fewer channel blocks than this splits its rows into bands (16 rather than 8: 512
// channels in 48-channel blocks are 11 tasks, which 2 threads share 6:5; as 22 tasks they split
// evenly; same run, 2 threads: 7x7 512 -> 512 3x3 1.06x, 2048 -> 512 1x1 1.12x, other deep
// layers 0.99-1.00x); p.chunk, the reduction chunk in steps, input channels of one kernel tap
// (float32; bf16: input channels x taps): a 2x14 block's chunk of 288 weights is 36 KB, inside
// a 48 KB L1.
void schedule_conv_cpu_deep(const ConvFuncs& f, const ConvParams& p, const Target& target) {
  const int vec = vector_lanes(p, target);
  Func output = f.output;
  Func acc = f.acc;
  const Var &co = f.co, &x = f.x, &y = f.y, &n = f.n;
  Var coo("coo"), coi("coi"), xo("xo"), xi("xi"), yo("yo"), yi("yi"), task("task");
  RVar rco("rco"), rci("rci");

  // 0 vectors: one output channel per tile (fewer output channels than one vector).
  const int channels = p.block.vectors > 0 ? p.block.vectors * vec : 1;
  const Expr channel_blocks = (f.out_channels + channels - 1) / channels;
  const Expr bands = Halide::clamp((p.tasks + channel_blocks - 1) / channel_blocks, 1, f.out_height);
  const Expr rows = (f.out_height + bands - 1) / bands;
  // The last channel block shifted inwards would start inside a 16-channel block of the
  // weights when the channel count is not a multiple of the vector (ShuffleNet's 232): Halide
  // then loaded every weight vector of every block one lane at a time (vpextrd per lane: a
  // 232 -> 232 1x1 at 7x7 took 128 us against oneDNN's 24; 19 us with every block starting on
  // a vector, split_output_channels).
  const bool whole_blocks = p.block.vectors > 0 && f.whole_channel_blocks;
  std::vector<Halide::VarOrRVar> order =
      split_output_channels(output, co, coo, coi, p.block.vectors, vec, f.whole_channel_blocks);
  order.insert(order.end(), {xi, xo, yi, coo, yo, n});
  output.split(x, xo, xi, p.block.pixels, TailStrategy::ShiftInwards)
      .split(y, yo, yi, rows, TailStrategy::GuardWithIf)
      .reorder(order)
      .fuse(coo, yo, task)
      .fuse(task, n, task)
      .parallel(task);
  output.unroll(xi);

  // The accumulator covers the task's channel block, rows and full width; per chunk, every
  // register tile of it runs the chunk's reduction with its sums in registers.
  acc.compute_at(output, task).vectorize(co, vec, TailStrategy::GuardWithIf).unroll(co);
  // A whole block for the guarded last one too: its lanes past the channel count read the
  // blocked weights' zero padding and are never stored.
  if (whole_blocks) acc.bound_extent(co, channels);
  Halide::Stage update = acc.update();
  update.split(x, xo, xi, p.block.pixels, TailStrategy::RoundUp);
  if (f.bf16 && bf16_dot_products(target)) {
    // Input-channel pairs innermost (see schedule_conv_cpu): the chunk counts pairs.
    RVar pair("pair"), pairs("pairs");
    const Expr taps = f.r.y.extent() * f.r.z.extent();
    const Expr chunk = Halide::max(8, p.chunk / taps);  // input channels x taps
    update.split(f.r.x, pairs, pair, 2)
        .split(pairs, rco, rci, (chunk + 1) / 2, TailStrategy::GuardWithIf)
        .reorder(pair, co, xi, rci, f.r.y, f.r.z, xo, y, rco)
        .atomic()
        .vectorize(pair);
  } else {
    // A chunk is p.chunk input channels of one tap, the taps outermost: per block of 16 output
    // channels the chunk's weights are one contiguous run of the blocked layout
    // ([Co/16][Kh][Kw][Ci][16], runtime/conv_weights.h) and the next chunk follows it, one
    // stream per block that the hardware prefetchers keep ahead of the arithmetic. Chunks of
    // channels x taps (the order before) touched a 1 KB piece per tap, Ci x 64 bytes apart:
    // with the weights coming from memory (in a network) ResNet-50's 7x7 3x3 layers took
    // 0.83-1.00 ms against 0.70-0.80 now (2 threads, alternating runs), though alone with warm
    // caches up to 1.1x less.
    update.split(f.r.x, rco, rci, p.chunk, TailStrategy::GuardWithIf)
        .reorder(co, xi, rci, xo, y, rco, f.r.y, f.r.z);
  }
  update.vectorize(co, vec, TailStrategy::GuardWithIf).unroll(co).unroll(xi);
  if (f.unroll_kernel_columns) update.unroll(f.r.y);

  if (!f.stage_input) return;  // an unpadded 1x1 window's input, read in place
  Func input_padded = f.input_padded;
  input_padded.compute_root().parallel(f.y).vectorize(f.c, vec, TailStrategy::GuardWithIf);
}

}  // namespace kiln::schedules
