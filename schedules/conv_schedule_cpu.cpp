// CPU schedule for the fused convolution: register-blocked output tiles, vectorized over
// output channels, parallel over (row strip, batch) with the padded input staged once per strip.
//
// The inner loop is an outer product: per reduction step (one ci, kx, ky) it loads
// `vectors` weight vectors (contiguous in Co thanks to the HWIO weight layout) and broadcasts
// `pixels` input values, and issues vectors * pixels FMAs into accumulators that stay in
// registers for the whole reduction.
#include <vector>

#include "conv_schedule.h"

namespace kiln::schedules {
namespace {

using Halide::Func;
using Halide::Stage;
using Halide::TailStrategy;
using Halide::Target;
using Halide::Var;

// Measured on the reference layer (1 thread): 2x14 and 4x7 are equal there, but 4x7 needs 33
// registers (LLVM spills one accumulator) and streams twice the weight bytes per FMA: 64% vs
// 78% of peak on a 256->256 channel 3x3 layer. 4x7 stays for 7..13 pixel wide outputs.
constexpr int kSevenWideVectors = 4;

// Output rows per parallel task. Two rows amortize the halo rows of the padded input strip
// and still give 14 tasks for 2 threads on the 28-row reference layer. 1x1 kernels have no
// halo and take one row per task: a 14-row output then splits into 14 tasks, not 7 that 2
// threads share 4:3.
constexpr int kRowsPerTask = 2;
// Outputs at least this tall have enough row strips for 2 threads without splitting channels
// (see the measurements in schedule_conv_cpu).
constexpr int kTallRows = 10;

}  // namespace

std::vector<RegisterBlock> cpu_register_blocks(const Target& t, int seven_wide_vectors) {
  if (t.has_feature(Target::AVX512)) {
    // 32 zmm registers: 2x14 = 28 accumulators + 2 weight vectors + 1 broadcast.
    return {{2, 14}, {seven_wide_vectors, 7}, {2, 7}, {1, 14}, {1, 1}};
  }
  // 16 ymm (AVX2) or xmm (SSE) registers: 2x6 = 12 accumulators + 2 weights + 1 broadcast.
  return {{2, 6}, {1, 12}, {1, 6}, {1, 1}};
}

void schedule_conv_cpu(const ConvFuncs& f, const Target& target) {
  const int vec = target.natural_vector_size<float>();
  Func output = f.output;
  Func acc = f.acc;
  Func input_padded = f.input_padded;
  const Var &co = f.co, &x = f.x, &y = f.y, &n = f.n;
  Var coo("coo"), coi("coi"), xo("xo"), xi("xi"), yo("yo"), yi("yi"), task("task");
  const Halide::Expr rows_per_task =
      Halide::select(f.r.y.extent() * f.r.z.extent() == 1, 1, kRowsPerTask);

  // Same loop names in every specialization, so acc and input_padded can be computed at them.
  // Tall outputs run one task per row strip (the padded strip staged once, shared by all
  // channel blocks); short ones (7x7, 14x14: too few strips to keep 2 threads busy) one task
  // per (channel block, strip), re-staging the small strip per block. Measured at 2 threads,
  // speed relative to oneDNN, rows-only vs per-channel-block tasks: 56x56->28x28 64->64 0.91x
  // vs 0.82x; 14x14 256->256 0.75-0.77x vs 0.73x; 7x7 512->512 0.61x vs 0.69x.
  auto tile = [&](Stage s, int channels, int pixels, TailStrategy tail, bool split_channels) {
    s.split(co, coo, coi, channels, tail)
        .split(x, xo, xi, pixels, tail)
        .split(y, yo, yi, rows_per_task, TailStrategy::GuardWithIf)
        .reorder(coi, xi, xo, yi, coo, yo, n);
    if (split_channels)
      s.fuse(coo, yo, task).fuse(task, n, task);
    else
      s.fuse(yo, n, task);
    s.parallel(task);
  };

  // Full tiles only (ShiftInwards never clips a tile, it overlaps the last one with its
  // neighbour), so each specialization's inner loop is branch-free and fully unrolled.
  for (const RegisterBlock& b : cpu_register_blocks(target, kSevenWideVectors)) {
    const int channels = b.vectors * vec;
    const Halide::Expr fits = f.out_channels >= channels && f.out_width >= b.pixels;
    for (const bool tall : {true, false}) {
      Stage s = output.specialize(tall ? fits && f.out_height >= kTallRows : fits);
      tile(s, channels, b.pixels, TailStrategy::ShiftInwards, !tall);
      s.vectorize(coi, vec).unroll(coi).unroll(xi);
    }
  }
  // Fewer output channels than one vector: scalar tiles of one channel and one pixel.
  tile(output, 1, 1, TailStrategy::ShiftInwards, false);

  acc.compute_at(output, xo)
      .vectorize(co, vec, TailStrategy::GuardWithIf)
      .unroll(co)
      .unroll(x);
  acc.update()
      .reorder(co, x, f.r.x, f.r.y, f.r.z)
      .vectorize(co, vec, TailStrategy::GuardWithIf)
      .unroll(co)
      .unroll(x);

  // The zero-padded input strip for one task, shared by all its channel blocks: removes the
  // boundary test from the inner loop. Staging it per (strip, channel block) instead cost 9%
  // on the reference layer at 2 threads (75.7% -> 92% of peak with this order; 0.81x -> 0.93x
  // of oneDNN).
  if (!f.stage_input) return;
  input_padded.compute_at(output, task).bound(f.c, 0, f.in_channels);
  // Dense RGB inputs: vectorized over channels, the copy would fill 3 of 16 lanes and take
  // more time than the convolution (perf: half of a 3x3/s2 first layer's cycles). Vectorized
  // over pixels with the 3 channels unrolled, the strided loads and stores merge into dense
  // ones with shuffles.
  input_padded.specialize(f.in_channels == 3 && f.in_stride_x == 3).unroll(f.c).vectorize(f.x, vec);
  input_padded.vectorize(f.c, vec, TailStrategy::GuardWithIf);
}

}  // namespace kiln::schedules
