// Pooling schedules (see pool_schedule.h).
#include "schedules/pool_schedule.h"

#include <algorithm>

#include "schedules/conv_params_internal.h"

namespace kiln::schedules {

using Halide::TailStrategy;
using Halide::Var;

namespace {

// Global average pooling (PoolAlgorithm::total): each image's sum, channels in vectors. One
// image is summed in bands of rows in parallel (partial sums, Halide's rfactor), then the bands
// are added up: the kernel before it split its work by rows too, and the thread pool gives each
// thread the same share of every loop, so each thread reads rows its own core's cache holds.
// Before, tasks of channel blocks summed every row, half of them from the other core's cache:
// 2 threads took 1.1-2.2x as long as one (preact_se's two global poolings, 784 and 49 pixels).
// Several images: an image per task.
void schedule_global_sum(const generators::ops::PoolAlgorithm& a, const PoolShape& out,
                         const Halide::Target& target) {
  Halide::Func f = a.out, total = a.total;
  const int vec = target.natural_vector_size<float>();
  // Updates never take ShiftInwards (it would add some channels twice); guards on a constant
  // extent that is a multiple of the vector cost nothing.
  f.vectorize(a.c, vec,
              out.channels >= vec ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf);
  const int height = *Halide::Internal::as_const_int(a.r.y.extent());
  if (out.batch == 1 && height >= 2) {
    constexpr int kBands = 8;  // 2 threads get 4 each
    const int rows = (height + std::min(height, kBands) - 1) / std::min(height, kBands);
    Halide::RVar ryo("ryo"), ryi("ryi");
    Var band("band");
    Halide::Func partial = total.update()
                               .split(a.r.y, ryo, ryi, rows, TailStrategy::GuardWithIf)
                               .rfactor(ryo, band);
    partial.compute_root().vectorize(a.c, vec, TailStrategy::GuardWithIf);
    partial.update()
        .reorder(a.c, a.r.x, ryi, a.n, band)
        .vectorize(a.c, vec, TailStrategy::GuardWithIf)
        .parallel(band);
    total.compute_root().vectorize(a.c, vec, TailStrategy::GuardWithIf);
    total.update().vectorize(a.c, vec, TailStrategy::GuardWithIf);
    return;
  }
  Var row("row");
  f.fuse(a.y, a.n, row).parallel(row);
  total.compute_at(f, row).vectorize(a.c, vec, TailStrategy::GuardWithIf);
  total.update().reorder(a.c, a.r.x, a.r.y, a.n).vectorize(a.c, vec, TailStrategy::GuardWithIf);
}

}  // namespace

void schedule_pool_cpu(const generators::ops::PoolAlgorithm& a, const PoolShape& out,
                       const Halide::Target& target) {
  if (a.total.defined()) {
    schedule_global_sum(a, out, target);
    return;
  }
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

int pool_band_rows(const PoolShape& out, const graph::Pool2d& window, int64_t producer_row_bytes) {
  // About 8 bands per image, then the band height whose tasks 2 and 4 threads share most
  // evenly, counting the convolution rows two bands' windows share, which both compute (a
  // 3x3/s2 pooling: half a pooled row's worth per band). The last band shifts inwards (it
  // overlaps the one before) rather than stopping short: bounds inference then never asks the
  // convolution for rows past the image, which a convolution reading its input in place (1x1,
  // unpadded) could not give; so a band height that does not divide the rows costs a thread
  // the rows it computes twice. Inception's 73x73 1x1 convolution pooled 3x3/s2 to 36 rows:
  // bands of 5 were 8 tasks of 11 convolution rows (88 for 73, one thread 44), 65 us; bands
  // of 9 are 4 of 19 (76, one thread 38), 58 us. A band's convolution rows stay within 512
  // KiB, half of a 1 MiB L2 (Zen's), where the pooling reads them back: ResNet-18's and
  // SqueezeNet's stems keep bands of 7 (15 rows of 112 or 111 pixels by 64 channels, 430 KB);
  // bands of 14 (830 KB) measured within 2% of them on a 2 MiB L2.
  const int window_rows = (window.kernel_h - 1) * window.dilation_h + 1;
  const auto band_bytes = [&](int rows) {
    return ((rows - 1) * int64_t{window.stride_h} + window_rows) * producer_row_bytes;
  };
  constexpr int64_t kMaxBandBytes = 512 * 1024;
  const int height = static_cast<int>(out.height);
  const int preferred = std::max(1, (height + 7) / 8);
  int max_rows = 2 * preferred;
  while (max_rows > preferred && band_bytes(max_rows) > kMaxBandBytes) --max_rows;
  const double halo =
      std::max(0.0, static_cast<double>(window_rows - window.stride_h) / window.stride_h);
  return internal::balanced_band_rows(height, static_cast<int>(out.batch), preferred, 1, halo,
                                      max_rows);
}

void schedule_pool_cpu_bands(const generators::ops::PoolAlgorithm& a, const PoolShape& out,
                             const graph::Pool2d& window, Halide::Func producer,
                             int64_t producer_row_bytes, const Halide::Target& target) {
  Halide::Func f = a.out;
  const int vec = target.natural_vector_size<float>();
  f.vectorize(a.c, vec,
              out.channels >= vec ? TailStrategy::ShiftInwards : TailStrategy::GuardWithIf);
  const int rows = pool_band_rows(out, window, producer_row_bytes);
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
  if (a.total.defined()) Halide::Func(a.total).compute_at(f, t_c);  // each thread its channel's sum
  if (a.count_x.defined()) {  // Func is a handle: scheduling a copy schedules the Func
    Halide::Func(a.count_x).compute_root();
    Halide::Func(a.count_y).compute_root();
  }
}

}  // namespace kiln::schedules
