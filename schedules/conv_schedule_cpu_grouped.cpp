// x86 CPU schedule for grouped convolutions whose groups have fewer output channels than a
// vector (ResNeXt's 4-channel groups, RegNet's 8 on AVX-512, a depthwise convolution with a
// channel multiplier). A vector of output channels spans several groups and each lane reads
// its own group's input channel: input_padded(co / per_group * group_in + ci) over a vector of
// co. When a vector holds whole groups, Halide emits that as loads of the groups' input
// channels (one element per group) and a permute (vpermps) per input channel of the group,
// not a gather; the tile's pixels share those across the kernel's columns. With the channels
// interleaved by group (ConvFuncs::interleave, schedule_interleaved below) those inputs are
// one contiguous run instead, broadcast across the vector with no permute.
// Every multiply-add is useful, unlike blocks of merged groups (runtime::grouped_conv_merge),
// which multiply zeros for (merge - 1) / merge of theirs.
//
// The tiling is the depthwise schedule's for a staged input (depthwise_schedule.cpp): per task
// a band of rows with its zero-padded input staged once; a register tile of one channel vector
// by `pixels` output pixels with the kernel's columns unrolled, so each input vector is loaded
// and permuted once for the up to three pixels whose taps read it. (The depthwise 3x3 order,
// channel vectors inside pixel tiles with the input read in place, measured 0.255 -> 0.262 ms
// on ResNeXt's 4-channel 3x3: not taken.)
#include <algorithm>
#include <vector>

#include "conv_params.h"
#include "conv_schedule.h"
#include "depthwise_schedule.h"

namespace kiln::schedules {
namespace {

// Vectorizes `var` of stage `s` (extent a multiple of vec) as vec / runs of `run` positions,
// nested: the lanes of a run innermost. Positions of interleaved channels (conv.h) then read
// their inputs as one broadcast run per vector instead of one element per group and a permute.
void vectorize_runs(Halide::Stage s, const Halide::Var& var, int vec, int run,
                    const std::vector<Halide::VarOrRVar>& outer) {
  Halide::Var v("v"), runs("runs"), lanes("lanes");
  s.split(var, v, runs, vec).split(runs, runs, lanes, run);
  std::vector<Halide::VarOrRVar> order = {lanes, runs, v};
  order.insert(order.end(), outer.begin(), outer.end());
  s.reorder(order).vectorize(lanes);
  if (vec > run) s.vectorize(runs);
}

// Channels interleaved by group (ConvFuncs::interleave): the tiling below, with the
// accumulator's positions vectorized as runs of the groups of a block (so each input channel
// of the group is one broadcast load of the block's groups' values, vbroadcastsd on AVX-512
// with 8-channel groups, instead of a load per group and a vpermt2ps), the output's channels
// as runs of a group's (its reads of the accumulator a dense load and one permute per vector),
// and the input staged per task in the interleaved order. A tile is a whole block of 16
// channels on every target: half a block's positions hold half of each of its groups'
// channels, so a narrower tile of output channels would need the whole block's accumulators
// anyway (AVX2 with 8 channels a tile computed every sum twice: ResNeXt's 56x56 4-channel
// layer 0.15 -> 0.59 ms). Narrower vectors split the block (two AVX2 registers, four SSE
// ones), so the tile takes fewer pixels: p.block.pixels * vec / 16.
void schedule_interleaved(const ConvFuncs& f, const ConvParams& p, int vec) {
  Halide::Func output = f.output, acc = f.acc, input_padded = f.input_padded;
  constexpr int kBlock = 16;
  const int per_group = kBlock / f.interleave;  // a block holds `interleave` groups
  const int pixels = std::max(1, p.block.pixels * vec / kBlock);
  const BandLoops loops = tile_bands(output, f.co, f.x, f.y, f.n, f.out_channels, f.out_width,
                                     f.out_height, kBlock, {pixels, 1}, false, 0, per_group);
  acc.compute_at(output, loops.xo).unroll(f.x);
  vectorize_runs(acc, f.co, kBlock, f.interleave, {f.x});
  acc.update().unroll(f.x).unroll(f.r.y);
  vectorize_runs(acc.update(), f.co, kBlock, f.interleave, {f.x, f.r.y, f.r.x, f.r.z});
  input_padded.compute_at(output, loops.task).bound(f.c, 0, f.in_channels);
  vectorize_runs(input_padded, f.c, kBlock, f.interleave, {f.x});
}

}  // namespace

void schedule_conv_cpu_grouped(const ConvFuncs& f, const ConvParams& p,
                               const Halide::Target& target) {
  using Halide::TailStrategy;
  Halide::Func output = f.output, acc = f.acc, input_padded = f.input_padded;
  const int vec = target.natural_vector_size<float>();
  if (f.interleave > 1) {
    schedule_interleaved(f, p, vec);
    return;
  }
  // The tile's pixels (schedules::default_direct_conv_params: 8), one pixel at a time on rows
  // narrower than that.
  const BandLoops loops = tile_bands(output, f.co, f.x, f.y, f.n, f.out_channels, f.out_width,
                                     f.out_height, vec, {p.block.pixels, 1}, false);

  acc.compute_at(output, loops.xo).vectorize(f.co, vec, TailStrategy::GuardWithIf).unroll(f.x);
  // Per input channel of the group and kernel row, the tile's pixels and the kernel's columns
  // unrolled: each input vector loaded and permuted once for the up to three pixels whose taps
  // read it. Unrolling the group's channels as well made bodies of up to 192 multiply-adds
  // that LLVM spilled all over: ResNeXt's 3x3 g16 layers in the network (AVX-512, 2 threads, 3
  // alternating runs) 0.129-0.133 -> 0.116-0.119 ms at 56x56, 0.17-0.22 -> 0.14-0.16 at 28x28
  // stride 2, 0.157-0.162 -> 0.110-0.115 at 28x28; AVX2 (kernel alone) 1.08-1.12x. (Spreading
  // each group's inputs once per task so that the taps load whole vectors instead measured
  // 0.66-0.98x of this alone and 0.69-0.95x in the network.)
  acc.update()
      .reorder(f.co, f.x, f.r.y, f.r.x, f.r.z)
      .vectorize(f.co, vec, TailStrategy::GuardWithIf)
      .unroll(f.x)
      .unroll(f.r.y);

  // The zero-padded rows a task reads (with its prologue), staged once per task.
  if (!f.stage_input) return;
  input_padded.compute_at(output, loops.task)
      .bound(f.c, 0, f.in_channels)
      .vectorize(f.c, vec, TailStrategy::GuardWithIf);
}

}  // namespace kiln::schedules
