// Layout transform schedules. A transpose is pure data movement: the goal is full cache lines
// on both sides, so both the load (along x) and the store (along c) are vectors.
#include "layout_schedule.h"

#include <algorithm>

#include "schedules/loop_util.h"

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

bool schedule_transpose_cpu(Halide::Func out, Halide::Func staged,
                            const std::vector<int64_t>& out_extents, int q, int p,
                            const Halide::Target& target) {
  using Halide::TailStrategy;
  const int vec = target.natural_vector_size<float>();
  if (q <= 0 || out_extents.at(0) < vec || out_extents.at(static_cast<size_t>(q)) < 2) return false;
  int tq = vec;  // the tile along dim q: a power of two up to a vector
  while (tq > out_extents[static_cast<size_t>(q)]) tq /= 2;
  const std::vector<Halide::Var> d = out.args();
  Halide::Var o0("o0"), oq("oq"), i0("i0"), iq("iq");
  out.split(d[0], o0, i0, vec, TailStrategy::GuardWithIf)
      .split(d[static_cast<size_t>(q)], oq, iq, tq, TailStrategy::GuardWithIf);
  // Loops, innermost first: the tile (i0, iq), its column o0, then oq and the other dims.
  std::vector<Halide::VarOrRVar> order = {i0, iq, o0, oq};
  std::vector<Halide::Var> outer = {oq};
  for (size_t j = 1; j < d.size(); ++j)
    if (static_cast<int>(j) != q) order.push_back(d[j]), outer.push_back(d[j]);
  out.reorder(order).vectorize(i0).unroll(iq);
  const std::vector<Halide::Var> sd = staged.args();
  staged.compute_at(out, o0)
      .vectorize(sd.at(0), tq, TailStrategy::GuardWithIf)
      .unroll(sd.at(static_cast<size_t>(p)), vec, TailStrategy::GuardWithIf);
  int64_t outer_count = (out_extents[static_cast<size_t>(q)] + tq - 1) / tq;
  for (size_t j = 1; j < out_extents.size(); ++j)
    if (static_cast<int>(j) != q) outer_count *= out_extents[j];
  const int64_t row = out_extents[0] * tq;  // elements per iteration of the fused outer loop
  const int64_t per_task =
      std::max<int64_t>({1, kMinTaskElements / row, (outer_count + kMaxTasks - 1) / kMaxTasks});
  if (outer_count >= 2 * per_task)
    out.parallel(fuse_vars(out, outer), static_cast<int>(per_task), TailStrategy::GuardWithIf);
  return true;
}

void schedule_layout_cuda(const LayoutFuncs& f, const Halide::Target& /*target*/) {
  using Halide::TailStrategy;
  Halide::Func out = f.output;
  Halide::Var yn("yn"), bc("bc"), bx("bx"), tc("tc"), tx("tx");
  out.fuse(f.y, f.n, yn).gpu_tile(f.c, f.x, bc, bx, tc, tx, 32, 8, TailStrategy::GuardWithIf);
}

}  // namespace kiln::schedules
