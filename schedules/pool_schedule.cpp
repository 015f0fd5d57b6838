// Pooling schedules (see pool_schedule.h).
#include "schedules/pool_schedule.h"

#include <algorithm>

namespace kiln::schedules {

using Halide::TailStrategy;
using Halide::Var;

void schedule_pool_cpu(const generators::ops::PoolAlgorithm& a, const PoolShape& out,
                       const Halide::Target& target) {
  Halide::Func f = a.out;
  const int vec = target.natural_vector_size<float>();
  // Channels in vectors: ShiftInwards keeps the loop one vector wide when there are enough of
  // them; a narrower tensor (3 channels) takes masked vectors.
  if (out.channels >= vec) {
    f.vectorize(a.c, vec, TailStrategy::ShiftInwards);
  } else {
    f.vectorize(a.c, vec, TailStrategy::GuardWithIf);
  }
  // Rows of the output (x batch) in parallel when there are several; otherwise (global pooling
  // of one image) blocks of channels.
  Var row("row");
  f.fuse(a.y, a.n, row);
  const int64_t rows = out.height * out.batch;
  if (rows >= 2) {
    const int64_t per_task = std::max<int64_t>(1, rows / 32);
    f.parallel(row, static_cast<int>(per_task), TailStrategy::GuardWithIf);
  } else if (out.channels >= 8 * vec) {
    f.parallel(a.c, 4, TailStrategy::GuardWithIf);  // `c` is the vector loop's outer variable now
  }
  if (a.count_x.defined()) {  // Func is a handle: scheduling a copy schedules the Func
    Halide::Func(a.count_x).compute_root();
    Halide::Func(a.count_y).compute_root();
  }
}

void schedule_pool_cpu_bands(const generators::ops::PoolAlgorithm& a, const PoolShape& out,
                             Halide::Func producer, const Halide::Target& target) {
  Halide::Func f = a.out;
  const int vec = target.natural_vector_size<float>();
  f.vectorize(a.c, vec, out.channels >= vec ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf);
  // About 8 bands per image: 2 threads get 4 each, and a 3x3/s2 pooling recomputes one
  // convolution row per band (7% of a 56-row pooled output in bands of 7). The last band
  // shifts inwards (it overlaps the one before) rather than stopping short: bounds inference
  // then never asks the convolution for rows past the image, which a convolution reading its
  // input in place (1x1, unpadded) could not give.
  const int rows = static_cast<int>(std::max<int64_t>(1, (out.height + 7) / 8));
  Var yo("yo"), yi("yi"), task("task");
  f.split(a.y, yo, yi, rows, TailStrategy::ShiftInwards).fuse(yo, a.n, task).parallel(task);
  producer.compute_at(f, task);
  if (a.count_x.defined()) {  // Func is a handle: scheduling a copy schedules the Func
    Halide::Func(a.count_x).compute_root();
    Halide::Func(a.count_y).compute_root();
  }
}

void schedule_pool_gpu(const generators::ops::PoolAlgorithm& a, const PoolShape& /*out*/,
                       const Halide::Target& /*target*/) {
  Halide::Func f = a.out;
  Var xy("xy"), b_c("b_c"), b_xy("b_xy"), t_c("t_c"), t_xy("t_xy"), nrow("nrow");
  f.fuse(a.x, a.y, xy).gpu_tile(a.c, xy, b_c, b_xy, t_c, t_xy, 32, 8, TailStrategy::GuardWithIf);
  if (a.count_x.defined()) {  // Func is a handle: scheduling a copy schedules the Func
    Halide::Func(a.count_x).compute_root();
    Halide::Func(a.count_y).compute_root();
  }
}

}  // namespace kiln::schedules
