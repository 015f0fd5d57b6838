// What the schedules of memory-bound kernels share: how large a parallel task should be, and
// fusing a list of loop variables into one loop.
#pragma once

#include <cstdint>
#include <vector>

#include "Halide.h"

namespace kiln::schedules {

// Below this many elements per task, waking a second thread costs more than it saves; above
// this many tasks, the pool's per-task dispatch adds up.
inline constexpr int64_t kMinTaskElements = 16 * 1024;
inline constexpr int64_t kMaxTasks = 64;

// Fuses `vars` (innermost first, at least one) of `stage`, a Func or one of its Stages, into
// one loop variable and returns it (vars[0] alone when there is one).
template <typename StageT>
Halide::Var fuse_vars(StageT stage, const std::vector<Halide::Var>& vars) {
  Halide::Var fused = vars.at(0);
  for (size_t d = 1; d < vars.size(); ++d) {
    Halide::Var next(fused.name() + "_" + vars[d].name());
    stage.fuse(fused, vars[d], next);
    fused = next;
  }
  return fused;
}

}  // namespace kiln::schedules
