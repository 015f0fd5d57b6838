// CPU schedule for the fused convolution: register-blocked output tiles, vectorized over
// output channels, parallel over (row strip, batch) with the padded input staged once per strip.
//
// The inner loop is an outer product: per reduction step (one ci, kx, ky) it loads
// `vectors` weight vectors (contiguous in Co thanks to the HWIO weight layout) and broadcasts
// `pixels` input values, and issues vectors * pixels FMAs into accumulators that stay in
// registers for the whole reduction.
#include <vector>

#include "conv_params.h"
#include "conv_schedule.h"

namespace kiln::schedules {

using Halide::Func;
using Halide::TailStrategy;
using Halide::Target;
using Halide::Var;

std::vector<RegisterBlock> cpu_register_blocks(const Target& t, int seven_wide_vectors) {
  if (t.has_feature(Target::AVX512)) {
    // 32 zmm registers: 2x14 = 28 accumulators + 2 weight vectors + 1 broadcast.
    return {{2, 14}, {seven_wide_vectors, 7}, {2, 7}, {1, 14}, {1, 1}};
  }
  // 16 ymm (AVX2) or xmm (SSE) registers: 2x6 = 12 accumulators + 2 weights + 1 broadcast.
  return {{2, 6}, {1, 12}, {1, 6}, {1, 1}};
}

std::vector<Halide::VarOrRVar> split_output_channels(Func output, const Var& co, const Var& coo,
                                                     const Var& coi, int vectors, int vec,
                                                     bool whole_blocks) {
  if (vectors == 0) {
    output.split(co, coo, coi, 1);
    return {coi};
  }
  if (!whole_blocks) {
    output.split(co, coo, coi, vectors * vec, TailStrategy::ShiftInwards)
        .vectorize(coi, vec)
        .unroll(coi);
    return {coi};
  }
  Var cv("cv"), lane("lane");
  output.split(co, cv, lane, vec, TailStrategy::GuardWithIf)
      .split(cv, coo, coi, vectors, TailStrategy::ShiftInwards)
      .vectorize(lane)
      .unroll(coi);
  return {lane, coi};
}

void schedule_conv_cpu(const ConvFuncs& f, const ConvParams& p, const Target& target) {
  const int vec = vector_lanes(p, target);
  Func output = f.output;
  Func acc = f.acc;
  Func input_padded = f.input_padded;
  const Var &co = f.co, &x = f.x, &y = f.y, &n = f.n;
  Var coo("coo"), coi("coi"), xo("xo"), xi("xi"), yo("yo"), yi("yi"), task("task");

  // Tall outputs run one task per row strip (the padded strip staged once, shared by all
  // channel blocks); short ones (7x7, 14x14: too few strips to keep 2 threads busy) one task
  // per (channel block, strip), re-staging the small strip per block (p.split_channels).
  // Measured at 2 threads, speed relative to oneDNN, rows-only vs per-channel-block tasks:
  // 56x56->28x28 64->64 0.91x vs 0.82x; 14x14 256->256 0.75-0.77x vs 0.73x; 7x7 512->512 0.61x
  // vs 0.69x. Two rows per strip amortize the halo rows of the padded input strip and still
  // give 14 tasks for 2 threads on the 28-row reference layer; 1x1 kernels have no halo and
  // take one.
  //
  // Full tiles only (ShiftInwards never clips a tile, it overlaps the last one with its
  // neighbour), so the inner loop is branch-free and fully unrolled. 0 vectors: scalar tiles of
  // one channel (fewer output channels than one vector).
  const int channels = p.block.vectors > 0 ? p.block.vectors * vec : 1;
  // Channel counts that are not whole vectors, with blocked weights: a last block shifted
  // inwards would start inside a 16-channel block of the weights, and Halide loaded the weight
  // vectors of every tile a lane at a time (SqueezeNet's 1000-class 1x1: 1085 us alone, oneDNN
  // 499). With whole_channel_blocks every tile starts on a vector (split_output_channels).
  const bool whole_blocks = p.block.vectors > 0 && f.whole_channel_blocks;
  // Fewer output channels than a vector (0 vectors) with blocked weights (zero-padded to a
  // block of 16): one vector of all of them per pixel of the tile, computed whole in registers
  // (its lanes past the channel count read the padding) and stored masked.
  const bool masked = p.block.vectors == 0 && !f.bf16 && f.whole_channel_blocks;
  std::vector<Halide::VarOrRVar> order;
  if (masked) {
    output.split(co, coo, coi, vec, TailStrategy::Predicate).vectorize(coi);
    order = {coi};
  } else {
    order = split_output_channels(output, co, coo, coi, p.block.vectors, vec,
                                  f.whole_channel_blocks);
  }
  order.insert(order.end(), {xi, xo, yi, coo, yo, n});
  output.split(x, xo, xi, p.block.pixels, TailStrategy::ShiftInwards)
      .split(y, yo, yi, p.rows, TailStrategy::GuardWithIf)
      .reorder(order);
  // Computed inside a consumer's task (f.in_task: a band of rows of a fused pooling), the
  // strips run one after another: no parallel loop, and no fused one (Halide computed wrong
  // batch bounds for a strip loop fused with the batch over a band that starts mid-image).
  Var strip = task;
  if (f.in_task)
    strip = yo;
  else if (p.split_channels)
    output.fuse(coo, yo, task).fuse(task, n, task);
  else
    output.fuse(yo, n, task);
  if (!f.in_task) output.parallel(task);
  output.unroll(xi);

  // Masked: the accumulator is a whole vector, so its sums stay in registers (one channel per
  // tile before, with a vector per output element: 2% of the bandwidth roofline on an 8 -> 8
  // 3x3; predicated accumulator stores kept every multiply-add going through memory).
  acc.compute_at(output, xo).vectorize(co, vec, TailStrategy::GuardWithIf).unroll(co).unroll(x);
  if (whole_blocks) acc.bound_extent(co, channels);
  if (masked) acc.bound_extent(co, vec);
  Halide::Stage update = acc.update();
  if (f.bf16 && bf16_dot_products(target)) {
    // Input-channel pairs innermost: each 2-lane pair times a vector of output channels is one
    // dot-product instruction (vdpbf16ps) on a weight vector and a broadcast input pair.
    Halide::RVar pair("pair"), pairs("pairs");
    update.split(f.r.x, pairs, pair, 2)
        .reorder(pair, co, x, pairs, f.r.y, f.r.z)
        .atomic()
        .vectorize(pair);
  } else {
    update.reorder(co, x, f.r.x, f.r.y, f.r.z);
  }
  update.vectorize(co, vec, TailStrategy::GuardWithIf).unroll(co).unroll(x);

  // The zero-padded input strip for one task, shared by all its channel blocks: removes the
  // boundary test from the inner loop. Staging it per (strip, channel block) instead cost 9%
  // on the reference layer at 2 threads (75.7% -> 92% of peak with this order; 0.81x -> 0.93x
  // of oneDNN).
  if (!f.stage_input) return;
  input_padded.compute_at(output, strip).bound(f.c, 0, f.in_channels);
  if (f.input_nchw) {
    // Vectors of pixels, the channels unrolled. With padding along x, the vectors that reach
    // past the image's left and right edges are split off (Halide left to itself did not, and
    // every vector's clamped index made its loads gathers): the NCHW stems' kernels 1.3-1.75x
    // faster (seg_tiny's 3x3/s2 0.145 -> 0.084 ms, MobileNetV2's 0.146-0.162 -> 0.093-0.096).
    Halide::Var xo("xo"), xv("xv");
    input_padded.split(f.x, xo, xv, vec, TailStrategy::Auto).unroll(f.c).vectorize(xv);
    if (f.padded_x) input_padded.partition(xo, Halide::Partition::Always);
    return;
  }
  // Dense RGB inputs: vectorized over channels, the copy would fill 3 of 16 lanes and take
  // more time than the convolution (perf: half of a 3x3/s2 first layer's cycles). Vectorized
  // over pixels with the 3 channels unrolled, the strided loads and stores merge into dense
  // ones with shuffles.
  Halide::Var rgb_xo("xo"), rgb_xv("xv");
  Halide::Stage rgb = input_padded.specialize(f.in_channels == 3 && f.in_stride_x == 3);
  rgb.split(f.x, rgb_xo, rgb_xv, vec, TailStrategy::Auto).unroll(f.c).vectorize(rgb_xv);
  if (f.padded_x) rgb.partition(rgb_xo, Halide::Partition::Always);
  input_padded.vectorize(f.c, vec, TailStrategy::GuardWithIf);
}

}  // namespace kiln::schedules
