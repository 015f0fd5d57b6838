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

// GPU: the tensor fused to one dimension, 256 threads per block.
void schedule_elementwise_gpu(const ElementwiseFuncs& f, const Halide::Target& target);

}  // namespace kiln::schedules
