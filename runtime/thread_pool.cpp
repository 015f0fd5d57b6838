// Kiln's thread pool (runtime/thread_pool.h).
//
// A loop is published as a pointer to a Job on its caller's stack, its iterations cut into one
// contiguous share per participant (the caller is participant 0, worker w is w). Each runs its
// own share, front to back, then claims what is left of the others' (an atomic counter per
// share). A worker announces itself in `busy_` before it touches a Job and checks the pointer
// again after: the caller, once no iteration is left, withdraws the pointer and waits for
// `busy_` to reach zero, so no worker can touch the Job once its caller has returned. These four
// accesses are sequentially consistent, which is what makes the argument hold.
#include "thread_pool.h"

#include "float_mode.h"

#include <immintrin.h>

#include <HalideRuntime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {
namespace {

using Task = int (*)(void*, int, uint8_t*);

// Participants in one loop at most: the caller and 63 workers; more threads than that only
// steal.
constexpr int kMaxParts = 64;

// A share of a loop's iterations, claimed from the front one at a time.
struct alignas(64) Share {
  std::atomic<int> next{0};
  int end = 0;
};

struct Job {
  Task task;
  void* user_context;
  int min, size;
  uint8_t* closure;
  uint64_t generation;
  int parts;  // shares[0, parts): participant p's share is its p-th contiguous slice
  std::atomic<int> result{0};
  Share shares[kMaxParts];
};

// Set while this thread runs an iteration of a loop of the pool: a loop it starts runs serially.
thread_local bool t_in_loop = false;

// Runs iterations of share `s` of `j` until it has none left.
void drain(Job* j, Share& s) {
  while (s.next.load(std::memory_order_relaxed) < s.end) {
    const int i = s.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= s.end) break;
    const int r = j->task(j->user_context, j->min + i, j->closure);
    if (r != 0) j->result.store(r, std::memory_order_relaxed);
  }
}

// Participant `id` (the caller 0, worker w w) runs its own share of `j`, then takes what is left
// of the others'.
void run_iterations(Job* j, int id) {
  const bool outer = t_in_loop;
  t_in_loop = true;
  for (int k = 0; k < j->parts; ++k) drain(j, j->shares[(id + k) % j->parts]);
  t_in_loop = outer;
}

// One step of a wait: a pause, and every 16th step the core handed to any other thread that
// wants it. With more threads than cores (or other busy processes), a waiter that only paused
// held its core until the scheduler took it, while the thread it waited for could not run:
// MobileNetV2 at 4 threads on 2 cores took 6.4 ms against 2.4 at 2 threads.
void relax(int polls) {
  if (polls % 16 == 0) {
    std::this_thread::yield();
  } else {
    _mm_pause();
  }
}

int run_serially(void* user_context, Task task, int min, int size, uint8_t* closure) {
  int result = 0;
  for (int i = min; i < min + size; ++i) {
    const int r = task(user_context, i, closure);
    if (r != 0) result = r;
  }
  return result;
}

class Pool {
 public:
  ~Pool() { stop_workers(); }

  void resize(int threads) {
    std::lock_guard<std::mutex> resizing(resize_mutex_);
    acquire();
    if (threads != size_.load()) {
      stop_workers();
      size_ = threads;
      stop_.store(false);
      for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
    }
    release();
  }

  int size() const { return size_.load(); }

  int par_for(void* user_context, Task task, int min, int size, uint8_t* closure) {
    if (size <= 0) return 0;
    if (size == 1 || t_in_loop || !try_acquire())
      return run_serially(user_context, task, min, size, closure);
    if (workers_.empty()) {
      release();
      return run_serially(user_context, task, min, size, closure);
    }
    const int parts = std::min({size, size_.load(), kMaxParts});
    Job job{task, user_context, min, size, closure, ++generation_, parts};
    // Contiguous shares, participant p the p-th: a kernel after one split the same way finds
    // the rows it reads where the same thread wrote them (its own core's cache).
    for (int p = 0; p < parts; ++p) {
      const int begin = static_cast<int>(int64_t{size} * p / parts);
      job.shares[p].next.store(begin, std::memory_order_relaxed);
      job.shares[p].end = static_cast<int>(int64_t{size} * (p + 1) / parts);
    }
    published_.store(job.generation, std::memory_order_seq_cst);
    current_.store(&job, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      wake_.notify_all();
    }
    run_iterations(&job, 0);
    current_.store(nullptr, std::memory_order_seq_cst);
    for (int polls = 1; busy_.load(std::memory_order_seq_cst) != 0; ++polls) relax(polls);
    release();
    return job.result.load(std::memory_order_relaxed);
  }

 private:
  bool try_acquire() {
    bool expected = false;
    return owned_.compare_exchange_strong(expected, true, std::memory_order_acquire);
  }
  void acquire() {
    while (!try_acquire()) std::this_thread::yield();
  }
  void release() { owned_.store(false, std::memory_order_release); }

  void stop_workers() {
    {
      std::lock_guard<std::mutex> lock(sleep_mutex_);
      stop_.store(true);
      wake_.notify_all();
    }
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  void work(int id) {
    const FlushDenormals denormals_are_zero;  // for the worker's whole life (float_mode.h)
    using Clock = std::chrono::steady_clock;
    uint64_t served = 0;  // the generation of the last Job this worker took part in
    Clock::time_point idle_since = Clock::now();
    bool active = false;  // a loop was in flight since the last look at the clock
    int polls = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      Job* j = current_.load(std::memory_order_acquire);
      if (j && published_.load(std::memory_order_relaxed) != served) {
        busy_.fetch_add(1, std::memory_order_seq_cst);
        if (current_.load(std::memory_order_seq_cst) == j && j->generation != served) {
          served = j->generation;
          run_iterations(j, id % j->parts);
        }
        busy_.fetch_sub(1, std::memory_order_seq_cst);
      }
      active = active || j;
      relax(++polls);
      if (polls % 64 != 0) continue;
      const Clock::time_point now = Clock::now();
      if (active) idle_since = now, active = false;  // a loop in flight counts as activity
      if (now - idle_since < std::chrono::microseconds(kSpinMicroseconds)) continue;
      // Asleep until a loop this worker has not served is in flight (or the pool stops). The
      // caller publishes, then reads sleepers_; this worker counts itself, then reads what was
      // published: one of the two sees the other.
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      wake_.wait(lock, [&] {
        return stop_.load() || (current_.load(std::memory_order_seq_cst) != nullptr &&
                                published_.load(std::memory_order_seq_cst) != served);
      });
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      idle_since = Clock::now();
    }
  }

  // Published loops: the Job in flight (or null) and the generation of the last one published
  // (workers poll it; a sleeping worker wakes when it changes). The owner (a caller with a loop
  // in flight, or a resize) holds owned_ and alone writes these.
  alignas(64) std::atomic<Job*> current_{nullptr};
  std::atomic<uint64_t> published_{0};
  uint64_t generation_ = 0;
  std::atomic<bool> owned_{false};
  alignas(64) std::atomic<int> busy_{0};  // workers inside a Job
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex sleep_mutex_, resize_mutex_;
  std::condition_variable wake_;
  std::vector<std::thread> workers_;
  std::atomic<int> size_{0};
};

Pool& pool() {
  static Pool p;
  return p;
}

int default_threads() {
  if (const char* env = std::getenv("HL_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

int halide_par_for(void* user_context, halide_task_t task, int min, int size, uint8_t* closure) {
  return pool().par_for(user_context, task, min, size, closure);
}

}  // namespace

void use_thread_pool(int threads) {
  static std::once_flag installed;
  std::call_once(installed, [] { halide_set_custom_do_par_for(halide_par_for); });
  if (threads > 0) {
    pool().resize(threads);
  } else if (pool().size() == 0) {
    pool().resize(default_threads());
  }
}

int thread_pool_size() { return pool().size(); }

int thread_pool_par_for(void* user_context, int (*task)(void*, int, uint8_t*), int min, int size,
                        uint8_t* closure) {
  return pool().par_for(user_context, task, min, size, closure);
}

}  // namespace kiln::runtime
