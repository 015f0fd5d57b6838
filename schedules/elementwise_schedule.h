// Schedules of elementwise kernels: one output Func over a dense tensor, each point computed
// from the same point of its inputs (and per-channel parameters). Memory-bound, so the goals
// are full-width vector loads and stores and enough parallel tasks, nothing else.
#pragma once

#include <cstdint>
#include <vector>

#include "Halide.h"

namespace kiln::schedules {

// What an elementwise schedule may touch: the output Func, its pure Vars (innermost first) and
// their constant extents. `keep_innermost`: some input is indexed by the innermost dimension
// differently from the others (per-channel parameters, a broadcast operand), so fusing the
// dimensions would turn its loads into gathers.
struct ElementwiseFuncs {
  Halide::Func out;
  std::vector<Halide::Var> dims;
  std::vector<int64_t> extents;
  bool keep_innermost = false;
};

// x86 CPU: vectors along the innermost dimension (or along the whole tensor, fused, when the
// innermost dimension is narrower than a vector and nothing is indexed by it), parallel over
// blocks of rows of at least 16K elements.
void schedule_elementwise_cpu(const ElementwiseFuncs& f, const Halide::Target& target);

// x86 CPU, a Resize's pass along the innermost dimension whose taps repeat every `period`
// outputs (generators/ops/resize.h, ResizeAlgorithm::period): that dimension split by the
// period, the positions within a period unrolled and the periods vectorized, so each tap is a
// contiguous load and a period's stores interleave into dense ones; `padded`, the pass' input
// repeated past the row's ends, computed once per row; parallel over rows as
// schedule_elementwise_cpu.
void schedule_periodic_resize_cpu(const ElementwiseFuncs& f, Halide::Func padded, int period,
                                  const Halide::Target& target);

// GPU: the tensor fused to one dimension, 256 threads per block.
void schedule_elementwise_gpu(const ElementwiseFuncs& f, const Halide::Target& target);

}  // namespace kiln::schedules
