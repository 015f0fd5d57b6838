// Schedules of the normalizations (see norm_schedule.h).
#include "schedules/norm_schedule.h"

#include <algorithm>

#include "schedules/elementwise_schedule.h"
#include "schedules/loop_util.h"
#include "schedules/tensor_schedule.h"

namespace kiln::schedules {

using Halide::TailStrategy;
using Halide::Var;

namespace {

// One long row over two or more dimensions (a GroupNorm(1) of one image: every element of it):
// the row's bands along its outermost dimension in parallel, for the two sums (partial sums
// per band, Halide's rfactor, then added up) and for the output.
void schedule_one_long_row(const LayerNormFuncs& f, const std::vector<Var>& dims, size_t k,
                           int64_t row_elements, int vw, bool wide) {
  const int64_t outer = f.extents[k - 1];
  const int64_t tasks = std::min({kMaxTasks, outer, row_elements / kMinTaskElements});
  const int band_rows = static_cast<int>((outer + tasks - 1) / tasks);
  Halide::Func out = f.out;
  Var task("task"), in_task("in_task");
  out.split(dims[k - 1], task, in_task, band_rows, TailStrategy::GuardWithIf).parallel(task);
  for (Halide::Func p : {f.sum, f.square_sum}) {
    Halide::RVar band_of("band_of"), in_band("in_band");
    Var band("band");
    Halide::Func partial = p.update()
                               .split(f.r[static_cast<int>(k) - 1], band_of, in_band, band_rows,
                                      TailStrategy::GuardWithIf)
                               .rfactor(band_of, band);
    partial.compute_root();
    partial.update().parallel(band);
    if (wide) {
      // A band's sum in vw lanes (rfactor again), added across at the end: an atomic update
      // would take a lock per vector, the bands being parallel.
      Halide::RVar lane_of("lane_of"), in_lane("in_lane");
      Var lane("lane");
      Halide::Func lanes = partial.update()
                               .split(f.r[0], lane_of, in_lane, vw, TailStrategy::GuardWithIf)
                               .rfactor(in_lane, lane);
      lanes.compute_at(partial, band).vectorize(lane);
      lanes.update().vectorize(lane);
    }
    p.compute_root();
  }
  for (Halide::Func p : {f.mean, f.inv_std}) p.compute_root();
}

}  // namespace

void schedule_layer_norm_cpu(const LayerNormFuncs& f, const Halide::Target& target) {
  Halide::Func out = f.out;
  const int vw = target.natural_vector_size<float>();
  std::vector<Var> dims;
  for (const Var& v : out.args()) dims.push_back(v);
  const size_t k = static_cast<size_t>(f.normalized_dims);
  int64_t row_elements = 1, rows = 1;
  for (size_t d = 0; d < f.extents.size(); ++d) (d < k ? row_elements : rows) *= f.extents[d];
  const bool wide = f.extents[0] >= vw;
  if (wide) out.vectorize(dims[0], vw, TailStrategy::ShiftInwards);
  if (rows == 1 && k >= 2 && row_elements >= 2 * kMinTaskElements && f.extents[k - 1] >= 2)
    return schedule_one_long_row(f, dims, k, row_elements, vw, wide);
  // The row statistics at the innermost row loop (or once, for a single row).
  Halide::LoopLevel at = Halide::LoopLevel::root();
  if (k < dims.size()) {
    const Var row = fuse_vars(out, {dims.begin() + static_cast<std::ptrdiff_t>(k), dims.end()});
    const int64_t tasks = std::min({kMaxTasks, rows, rows * row_elements / kMinTaskElements});
    if (tasks >= 2) {
      Var task("task"), in_task("in_task");
      out.split(row, task, in_task, static_cast<int>((rows + tasks - 1) / tasks),
                TailStrategy::GuardWithIf)
          .parallel(task);
      at = Halide::LoopLevel(out, in_task);
    } else {
      at = Halide::LoopLevel(out, row);
    }
  }
  for (Halide::Func p : {f.sum, f.mean, f.square_sum, f.inv_std}) p.compute_at(at);
  if (wide) {
    // Float addition reassociated across the lanes: the sum of a row in vw partial sums.
    for (Halide::Func p : {f.sum, f.square_sum})
      p.update().atomic().vectorize(f.r[0], vw, TailStrategy::GuardWithIf);
  }
}

namespace {

// GPU: each of `funcs` at root, a kernel per stage with one thread per point (blocks of 64,
// an update's reduction serial in its thread), then `out` one thread per element.
void schedule_statistics_then_output_gpu(const std::vector<Halide::Func>& funcs, Halide::Func out) {
  for (Halide::Func p : funcs) {
    p.compute_root();
    std::vector<Var> dims;
    for (const Var& v : p.args()) dims.push_back(v);
    for (int stage = 0; stage < (p.has_update_definition() ? 2 : 1); ++stage) {
      Halide::Stage s = stage == 0 ? Halide::Stage(p) : p.update();
      Var block("block"), thread("thread");
      s.gpu_tile(fuse_vars(s, dims), block, thread, 64, TailStrategy::GuardWithIf);
    }
  }
  std::vector<Var> dims;
  for (const Var& v : out.args()) dims.push_back(v);
  Var block("block"), thread("thread");
  out.gpu_tile(fuse_vars(out, dims), block, thread, 256, TailStrategy::GuardWithIf);
}

}  // namespace

void schedule_layer_norm_gpu(const LayerNormFuncs& f, const Halide::Target& /*target*/) {
  schedule_statistics_then_output_gpu({f.sum, f.square_sum}, f.out);
}

void schedule_group_norm_cpu(const GroupNormFuncs& f, const Halide::Target& target) {
  // Per-channel Funcs are read along the innermost dimension (NHWC) or per row (NCHW).
  ElementwiseFuncs out{f.out, {}, f.extents, true};
  for (const Var& v : f.out.args()) out.dims.push_back(v);
  schedule_elementwise_cpu(out, target);
  const int vw = target.natural_vector_size<float>();
  const int64_t height = f.nhwc ? f.extents[2] : f.extents[1];
  const int64_t channels = f.nhwc ? f.extents[0] : f.extents[2];
  for (Halide::Func p : {f.channel_sum, f.channel_square_sum}) {
    p.compute_root();
    if (f.nhwc && height >= 2) {
      sum_in_parallel_bands(p, height, target);
      continue;
    }
    const std::vector<Halide::RVar> rv = p.rvars(0);
    Var c = p.args()[0], n = p.args()[1];
    Halide::Stage s = p.update();
    if (f.nhwc) {
      s.reorder(c, rv[0], rv[1], n).vectorize(c, vw, TailStrategy::GuardWithIf);
      Halide::Stage(p).vectorize(c, vw, TailStrategy::GuardWithIf);
    } else {
      // Float addition reassociated across the lanes: a row of pixels in vw partial sums.
      if (f.extents[0] >= vw) s.atomic().vectorize(rv[0], vw, TailStrategy::GuardWithIf);
      if (channels * f.extents[3] >= 2) s.parallel(fuse_vars(s, {c, n}));
    }
  }
  for (Halide::Func p : f.statistics) p.compute_root();
}

void schedule_group_norm_gpu(const GroupNormFuncs& f, const Halide::Target& /*target*/) {
  std::vector<Halide::Func> per_channel = {f.channel_sum, f.channel_square_sum};
  per_channel.insert(per_channel.end(), f.statistics.begin(), f.statistics.end());
  schedule_statistics_then_output_gpu(per_channel, f.out);
}

}  // namespace kiln::schedules
