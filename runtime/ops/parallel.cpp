// The portable kernels' parallel loop (see parallel.h).
#include "runtime/ops/parallel.h"

#include <algorithm>
#include <atomic>

namespace kiln::runtime::ops {
namespace {

std::atomic<ParallelRunner> g_runner{nullptr};
// At most this many tasks per loop: enough to balance a few threads on uneven rows.
constexpr int64_t kMaxTasks = 32;

}  // namespace

void set_parallel_runner(ParallelRunner runner) { g_runner = runner; }

void parallel_for(int64_t count, const ParallelBody& body) {
  const ParallelRunner runner = g_runner.load();
  if (runner && count > 1) {
    if (count <= kMaxTasks) {
      runner(count, body);
      return;
    }
    // Contiguous blocks of iterations: the pool's per-task dispatch (a lock and a wake-up)
    // costs about as much as a small row of work.
    const int64_t block = (count + kMaxTasks - 1) / kMaxTasks;
    runner((count + block - 1) / block, [&](int64_t t) {
      for (int64_t i = t * block, end = std::min(count, i + block); i < end; ++i) body(i);
    });
    return;
  }
  for (int64_t i = 0; i < count; ++i) body(i);
}

}  // namespace kiln::runtime::ops
