// Depthwise convolution schedules. Each output element needs only Kh*Kw multiply-adds, so the
// kernel is bound by memory: the goal is to read the input once (a staged, zero-padded strip
// per task), stream the output once, and keep the per-channel weights in registers.
#include "depthwise_schedule.h"

namespace kiln::schedules {

void schedule_depthwise_cpu(const DepthwiseFuncs& f, const Halide::Target& target) {
  using Halide::Stage;
  using Halide::TailStrategy;
  using Halide::Var;
  const int vec = target.natural_vector_size<float>();
  Halide::Func output = f.output, acc = f.acc, input_padded = f.input_padded;
  Var co("co"), ci("ci"), xo("xo"), xi("xi"), yo("yo"), yi("yi"), task("task");
  constexpr int kRows = 2;

  auto tile = [&](Stage s, int channels, int pixels) {
    s.split(f.c, co, ci, channels, TailStrategy::ShiftInwards)
        .split(f.x, xo, xi, pixels, TailStrategy::ShiftInwards)
        .split(f.y, yo, yi, kRows, TailStrategy::GuardWithIf)
        .reorder(ci, xi, co, xo, yi, yo, f.n)
        .fuse(yo, f.n, task)
        .parallel(task);
  };
  // 2 channel vectors x 4 pixels = 8 accumulators: enough independent FMAs to hide latency.
  // Full tiles only in the fast branches (ShiftInwards never clips a tile).
  struct Block {
    int vectors, pixels;
  };
  for (const Block b : {Block{2, 4}, Block{1, 4}, Block{1, 1}}) {
    const int channels = b.vectors * vec;
    Stage s = output.specialize(f.channels >= channels && f.out_width >= b.pixels);
    tile(s, channels, b.pixels);
    s.vectorize(ci, vec).unroll(ci).unroll(xi);
  }
  // Fewer channels than a vector: one channel, one pixel at a time.
  tile(output, 1, 1);

  // Per (pixel tile, channel block): the accumulators of one register tile.
  acc.compute_at(output, co)
      .vectorize(f.c, vec, TailStrategy::GuardWithIf)
      .unroll(f.c)
      .unroll(f.x);
  acc.update()
      .reorder(f.c, f.x, f.r.x, f.r.y)
      .vectorize(f.c, vec, TailStrategy::GuardWithIf)
      .unroll(f.c)
      .unroll(f.x);
  input_padded.compute_at(output, task).vectorize(f.c, vec, TailStrategy::GuardWithIf);
}

void schedule_depthwise_cuda(const DepthwiseFuncs& f, const Halide::Target& /*target*/) {
  using Halide::TailStrategy;
  using Halide::Var;
  Halide::Func output = f.output;
  Var yn("yn"), bc("bc"), bx("bx"), tc("tc"), tx("tx");
  output.fuse(f.y, f.n, yn).gpu_tile(f.c, f.x, bc, bx, tc, tx, 32, 8, TailStrategy::GuardWithIf);
  Halide::Func acc = f.acc;
  acc.compute_at(output, tc);
}

}  // namespace kiln::schedules
