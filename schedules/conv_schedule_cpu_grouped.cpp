// x86 CPU schedule for grouped convolutions whose groups have fewer output channels than a
// vector (ResNeXt's 4-channel groups, a depthwise conv with a channel multiplier): a vector of
// output channels would span several groups and gather its input, so the accumulators run in
// vectors along output pixels, each lane reading its own pixel of the same input channel.
#include "conv_schedule.h"

namespace kiln::schedules {

void schedule_conv_cpu_grouped(const ConvFuncs& f, const Halide::Target& target) {
  using Halide::TailStrategy;
  using Halide::Var;
  Halide::Func output = f.output, acc = f.acc, input_padded = f.input_padded;
  const Var &co = f.co, &x = f.x, &y = f.y, &n = f.n;
  const int vec = target.natural_vector_size<float>();
  Var xo("xo"), xi("xi"), task("task");

  // One task per output row (x batch); in a row, tiles of one vector of pixels by every output
  // channel: Co x vec accumulators (16 KB for 256 channels on AVX-512), in L1.
  output.fuse(y, n, task).parallel(task);
  output.split(x, xo, xi, vec, TailStrategy::GuardWithIf).reorder(co, xi, xo, task);
  output.vectorize(co, vec, TailStrategy::GuardWithIf);
  acc.compute_at(output, xo)
      .reorder_storage(x, co, y, n)
      .vectorize(x, vec, TailStrategy::GuardWithIf);
  // Taps outermost, then output channels, then the group's input channels: each weight is a
  // broadcast, each input load a gather of vec pixels at the same channel.
  acc.update().reorder(x, f.r.x, co, f.r.y, f.r.z).vectorize(x, vec, TailStrategy::GuardWithIf);

  // The zero-padded rows a task reads, staged once per task: no boundary test in the loop.
  if (!f.stage_input) return;
  input_padded.compute_at(output, task)
      .bound(f.c, 0, f.in_channels)
      .vectorize(f.c, vec, TailStrategy::GuardWithIf);
}

}  // namespace kiln::schedules
