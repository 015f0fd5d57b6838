// Elementwise schedules (see elementwise_schedule.h).
#include "schedules/elementwise_schedule.h"

#include "schedules/loop_util.h"

#include <algorithm>

namespace kiln::schedules {
namespace {

using Halide::TailStrategy;
using Halide::Var;

// Fuses dims[from..] into one Var, outermost last; returns it (dims[from] when there is one).
Var fuse_outer(Halide::Func out, const std::vector<Var>& dims, size_t from) {
  return fuse_vars(out, {dims.begin() + static_cast<std::ptrdiff_t>(from), dims.end()});
}

}  // namespace

void schedule_elementwise_cpu(const ElementwiseFuncs& f, const Halide::Target& target) {
  Halide::Func out = f.out;
  const int64_t vw = target.natural_vector_size<float>();
  int64_t total = 1;
  for (int64_t e : f.extents) total *= e;
  if (f.dims.empty()) return;  // a scalar

  // The vector dimension: the innermost one when it is at least a vector wide or when fusing it
  // would turn some input's loads into gathers; otherwise the whole tensor fused, whose
  // constant dense strides let Halide prove the loads contiguous.
  const bool keep_inner = f.extents[0] >= vw || f.keep_innermost || f.dims.size() == 1;
  Var inner, rows;
  int64_t inner_extent = 0, row_count = 0;
  // A kept innermost dimension narrower than a vector that divides it (a channel shuffle's
  // transpose of [.., g, C/g] to [.., C/g, g], g = 2): vectors of that dimension whole by
  // vw / extent steps of the next one, dense in the output; Halide loads each input run whole
  // and interleaves them (before, the kernel ran scalar: ShuffleNet's 28x28x116 shuffle 87 us).
  const int64_t e0 = f.extents[0];
  if (keep_inner && e0 >= 2 && e0 < vw && vw % e0 == 0 && f.dims.size() > 1 &&
      f.extents[1] >= vw / e0) {
    Var across("across"), outer("outer");
    out.split(f.dims[1], outer, across, static_cast<int>(vw / e0), TailStrategy::ShiftInwards)
        .reorder(f.dims[0], across, outer)
        .vectorize(f.dims[0])
        .vectorize(across);
    std::vector<Var> row_dims = {outer};
    row_dims.insert(row_dims.end(), f.dims.begin() + 2, f.dims.end());
    rows = fuse_vars(out, row_dims);
    row_count = total / vw;
  } else if (keep_inner) {
    inner = f.dims[0];
    inner_extent = f.extents[0];
    row_count = total / std::max<int64_t>(inner_extent, 1);
    if (f.dims.size() > 1) rows = fuse_outer(out, f.dims, 1);
  } else {
    inner = fuse_outer(out, f.dims, 0);
    inner_extent = total;
    row_count = 1;
  }
  // ShiftInwards recomputes a few points of the last vector instead of a scalar tail: harmless
  // for a pure function, and the loop body stays one vector wide.
  if (inner_extent >= vw) out.vectorize(inner, static_cast<int>(vw), TailStrategy::ShiftInwards);

  const int64_t tasks = std::min(kMaxTasks, total / kMinTaskElements);
  if (tasks < 2) return;
  if (row_count >= tasks) {
    const int64_t rows_per_task = (row_count + tasks - 1) / tasks;
    out.parallel(rows, static_cast<int>(rows_per_task), TailStrategy::GuardWithIf);
  } else if (!keep_inner || f.dims.size() == 1) {
    // One long row: split it (in whole vectors) into tasks. `inner` is now the vector loop's
    // outer variable.
    const int64_t vectors = inner_extent / vw;
    const int64_t per_task = std::max<int64_t>(1, (vectors + tasks - 1) / tasks);
    out.parallel(inner, static_cast<int>(per_task), TailStrategy::GuardWithIf);
  } else {
    out.parallel(rows);  // fewer rows than tasks, each long: one task per row
  }
}

void schedule_periodic_resize_cpu(const ElementwiseFuncs& f, Halide::Func padded, int period,
                                  const Halide::Target& target) {
  Halide::Func out = f.out;
  const Var x = f.dims.at(0);
  const int64_t periods = f.extents.at(0) / period;
  int lanes = target.natural_vector_size<float>();
  while (lanes > 1 && lanes > periods) lanes /= 2;
  Var xo("xo"), xi("xi"), xv("xv");
  // Stores of one period position are `period` apart; unrolled side by side, Halide merges them
  // into dense stores of the interleaved vectors.
  out.split(x, xo, xi, period, TailStrategy::GuardWithIf)
      .split(xo, xo, xv, lanes, TailStrategy::ShiftInwards)
      .reorder(xv, xi, xo)
      .vectorize(xv)
      .unroll(xi);
  if (f.dims.size() == 1) {
    padded.compute_root();
    return;
  }
  int64_t total = 1;
  for (int64_t e : f.extents) total *= e;
  const int64_t row_count = total / f.extents[0];
  const Var rows = fuse_outer(out, f.dims, 1);
  const int64_t tasks = std::min({kMaxTasks, total / kMinTaskElements, row_count});
  if (tasks >= 2) {
    Var task("task"), row("row");
    out.split(rows, task, row, static_cast<int>((row_count + tasks - 1) / tasks),
              TailStrategy::GuardWithIf)
        .parallel(task);
    padded.compute_at(out, row);
  } else {
    padded.compute_at(out, rows);
  }
}

void schedule_elementwise_gpu(const ElementwiseFuncs& f, const Halide::Target& /*target*/) {
  Halide::Func out = f.out;
  if (f.dims.empty()) {  // a scalar (a reduction's): one thread
    out.gpu_single_thread();
    return;
  }
  int64_t total = 1;
  for (int64_t e : f.extents) total *= e;
  Var all = fuse_outer(out, f.dims, 0), block("block"), thread("thread");
  const int threads = static_cast<int>(std::min<int64_t>(256, total));
  out.gpu_tile(all, block, thread, threads, TailStrategy::GuardWithIf);
}

}  // namespace kiln::schedules
