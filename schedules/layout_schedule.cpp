// Layout transform schedules. A transpose is pure data movement: the goal is full cache lines
// on both sides, so both the load (along x) and the store (along c) are vectors.
#include "layout_schedule.h"

namespace kiln::schedules {

void schedule_layout_cpu(const LayoutFuncs& f, const Halide::Target& target) {
  using Halide::TailStrategy;
  Halide::Func out = f.output;
  Halide::Var ci("ci"), xi("xi"), yn("yn");
  const int vec = target.natural_vector_size<float>();
  // Three channels (an RGB network input), rows of at least one vector: one vector of pixels
  // per channel, interleaved in registers into one dense store of 3 vectors (the square tile
  // below would fill 3 of each vector's 16 lanes), 8 rows per task. 224x224: 126 -> 87 us
  // for the interleave, on 2 threads.
  Halide::Var xo("xo"), task("task");
  const Halide::OutputImageParam ob = out.output_buffer();
  out.specialize(ob.dim(0).extent() == 3 && ob.dim(1).extent() >= vec)
      .split(f.x, xo, xi, vec, TailStrategy::ShiftInwards)
      .reorder(f.c, xi, xo, f.y, f.n)
      .unroll(f.c)
      .vectorize(xi)
      .fuse(f.y, f.n, yn)
      .split(yn, task, yn, 8, TailStrategy::GuardWithIf)
      .parallel(task);
  // vec x vec tile: vec loads along x, vec stores along c; Halide lowers the transpose in
  // registers to shuffles. Tiles that do not divide the tensor are guarded.
  out.tile(f.c, f.x, ci, xi, vec, vec, TailStrategy::GuardWithIf)
      .vectorize(ci)
      .unroll(xi)
      .fuse(f.y, f.n, yn)
      .parallel(yn);
}

void schedule_to_nchw_cpu(Halide::Func output, const Halide::Target& target) {
  using Halide::TailStrategy;
  const std::vector<Halide::Var> d = output.args();  // x, y, c, n
  const int vec = target.natural_vector_size<float>();
  Halide::Var xo("xo"), xi("xi"), rows("rows");
  output.split(d[0], xo, xi, vec, TailStrategy::GuardWithIf)
      .reorder(xi, xo, d[2], d[1], d[3])
      .vectorize(xi)
      .fuse(d[2], d[1], rows)
      .fuse(rows, d[3], rows)
      .parallel(rows, 8, TailStrategy::GuardWithIf);
}

void schedule_layout_cuda(const LayoutFuncs& f, const Halide::Target& /*target*/) {
  using Halide::TailStrategy;
  Halide::Func out = f.output;
  Halide::Var yn("yn"), bc("bc"), bx("bx"), tc("tc"), tx("tx");
  out.fuse(f.y, f.n, yn).gpu_tile(f.c, f.x, bc, bx, tc, tx, 32, 8, TailStrategy::GuardWithIf);
}

}  // namespace kiln::schedules
