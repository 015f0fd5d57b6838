// The portable kernels' parallel loop (see parallel.h).
#include "runtime/ops/parallel.h"

#include <atomic>

namespace kiln::runtime::ops {
namespace {

std::atomic<ParallelRunner> g_runner{nullptr};

}  // namespace

void set_parallel_runner(ParallelRunner runner) { g_runner = runner; }

void parallel_for(int64_t count, const ParallelBody& body) {
  const ParallelRunner runner = g_runner.load();
  if (runner && count > 1) {
    runner(count, body);
    return;
  }
  for (int64_t i = 0; i < count; ++i) body(i);
}

}  // namespace kiln::runtime::ops
