// Parallel loops for the portable kernels. kiln::Model installs a runner backed by the Halide
// thread pool, so portable and Halide kernels share one pool (no oversubscription); without a
// runner (e.g. in the kernels' own tests) loops run serially.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln::runtime::ops {

using ParallelBody = std::function<void(int64_t)>;
using ParallelRunner = void (*)(int64_t count, const ParallelBody& body);

// Calls body(i) for every i in [0, count); the calls must be independent of each other.
// Large counts run as at most 32 tasks of consecutive iterations.
void parallel_for(int64_t count, const ParallelBody& body);
void set_parallel_runner(ParallelRunner runner);

}  // namespace kiln::runtime::ops
