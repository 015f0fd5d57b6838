// Kiln's thread pool (runtime/thread_pool.h), through the function the Halide runtime calls:
// every iteration runs exactly once, failures come back, nested loops and loops from several
// threads at once complete, workers that went to sleep wake for the next loop, and resizing
// keeps it all true. Built into the concurrency tests so the tsan preset checks it too.
#include <gtest/gtest.h>

#include <HalideRuntime.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "thread_pool.h"

namespace {

using kiln::runtime::thread_pool_par_for;
using kiln::runtime::use_thread_pool;

// A closure as Halide passes it: a pointer to the loop's data.
template <typename T>
uint8_t* closure_of(T& data) {
  return reinterpret_cast<uint8_t*>(&data);
}

// A loop's closure: how often each index ran, and which thread ran it.
struct Counts {
  int min = 0;
  std::vector<std::atomic<int>> hits;
  std::vector<std::thread::id> who;
  std::atomic<int> outside{0};  // indices outside [min, min + size)
  explicit Counts(int min_, int size) : min(min_), hits(size), who(size) {}
};

int count_task(void*, int i, uint8_t* closure) {
  auto* c = reinterpret_cast<Counts*>(closure);
  if (i < c->min || i >= c->min + static_cast<int>(c->hits.size())) {
    c->outside.fetch_add(1);
    return 0;
  }
  c->hits[i - c->min].fetch_add(1);
  c->who[i - c->min] = std::this_thread::get_id();
  // Long enough that a worker, even one woken from sleep, gets a share of a loop of a few hundred.
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (std::chrono::steady_clock::now() < until) {
  }
  return 0;
}

void expect_each_once(const Counts& c, const char* what) {
  ASSERT_EQ(c.outside.load(), 0) << what << ": iterations outside the loop's range ran";
  for (size_t i = 0; i < c.hits.size(); ++i)
    ASSERT_EQ(c.hits[i].load(), 1) << what << ": index " << c.min + i;
}

TEST(ThreadPool, RunsEveryIterationOnceThroughHalidesEntryPoint) {
  use_thread_pool(3);
  EXPECT_EQ(kiln::runtime::thread_pool_size(), 3);
  for (int size : {0, 1, 2, 3, 7, 64, 1000})
    for (int min : {0, -5, 17}) {
      Counts c(min, size);
      ASSERT_EQ(halide_do_par_for(nullptr, count_task, min, size, closure_of(c)), 0);
      expect_each_once(c, "halide_do_par_for");
    }
}

TEST(ThreadPool, WorkersTakeAShare) {
  use_thread_pool(2);
  // 400 iterations of 50 us: the worker, spinning or woken, takes some of them.
  Counts c(0, 400);
  ASSERT_EQ(thread_pool_par_for(nullptr, count_task, 0, 400, closure_of(c)), 0);
  expect_each_once(c, "par_for");
  int by_caller = 0;
  for (const std::thread::id& id : c.who) by_caller += id == std::this_thread::get_id();
  EXPECT_LT(by_caller, 400) << "the worker ran no iteration";
  EXPECT_GT(by_caller, 0) << "the caller ran no iteration";
}

// Each participant starts at the front of its own contiguous share: the caller at the first
// iteration, the worker at the middle (of 2 threads). The caller's share takes 30 ms before it
// may steal, ample time for the worker to start its own even if it was asleep on a busy
// machine.
TEST(ThreadPool, ParticipantsStartAtTheFrontOfTheirOwnShares) {
  use_thread_pool(2);
  for (int round = 0; round < 3; ++round) {
    Counts c(0, 1200);
    ASSERT_EQ(thread_pool_par_for(nullptr, count_task, 0, 1200, closure_of(c)), 0);
    expect_each_once(c, "par_for");
    EXPECT_EQ(c.who[0], std::this_thread::get_id());
    EXPECT_NE(c.who[600], std::this_thread::get_id()) << "the worker did not start its own share";
    EXPECT_NE(c.who[601], std::this_thread::get_id());
  }
}

int fail_on_seven(void*, int i, uint8_t* closure) {
  reinterpret_cast<std::atomic<int>*>(closure)->fetch_add(1);
  return i == 7 ? -42 : 0;
}

TEST(ThreadPool, AFailingIterationIsReportedAndTheOthersStillRun) {
  use_thread_pool(2);
  std::atomic<int> ran{0};
  EXPECT_EQ(thread_pool_par_for(nullptr, fail_on_seven, 0, 50, closure_of(ran)), -42);
  EXPECT_EQ(ran.load(), 50);
  // Run serially (one iteration) the failure is reported too.
  ran = 0;
  EXPECT_EQ(thread_pool_par_for(nullptr, fail_on_seven, 7, 1, closure_of(ran)), -42);
}

// An outer loop whose iterations each run an inner loop (Halide nests parallel loops).
struct Nested {
  static constexpr int kOuter = 16, kInner = 24;
  std::atomic<int> hits[kOuter * kInner] = {};
};

int inner_task(void*, int i, uint8_t* closure) {
  reinterpret_cast<Nested*>(closure)->hits[i].fetch_add(1);
  return 0;
}

int outer_task(void*, int o, uint8_t* closure) {
  return thread_pool_par_for(nullptr, inner_task, o * Nested::kInner, Nested::kInner, closure);
}

TEST(ThreadPool, NestedLoopsComplete) {
  use_thread_pool(2);
  Nested n;
  ASSERT_EQ(thread_pool_par_for(nullptr, outer_task, 0, Nested::kOuter, closure_of(n)), 0);
  for (int i = 0; i < Nested::kOuter * Nested::kInner; ++i) ASSERT_EQ(n.hits[i].load(), 1) << i;
}

TEST(ThreadPool, LoopsFromSeveralThreadsAtOnceComplete) {
  use_thread_pool(2);
  constexpr int kCallers = 4, kLoops = 50, kSize = 37;
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t)
    callers.emplace_back([&, t] {
      for (int l = 0; l < kLoops; ++l) {
        Counts c(t * 1000, kSize);
        if (thread_pool_par_for(nullptr, count_task, c.min, kSize, closure_of(c)) != 0)
          ++wrong;
        for (const auto& h : c.hits) wrong += h.load() != 1;
        wrong += c.outside.load();
      }
    });
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadPool, SleepingWorkersWakeForTheNextLoop) {
  use_thread_pool(2);
  for (int round = 0; round < 3; ++round) {
    // Well past the spin time: the worker is asleep when the loop starts.
    std::this_thread::sleep_for(std::chrono::microseconds(kiln::runtime::kSpinMicroseconds * 5));
    Counts c(0, 400);
    ASSERT_EQ(thread_pool_par_for(nullptr, count_task, 0, 400, closure_of(c)), 0);
    expect_each_once(c, "after sleeping");
    int by_caller = 0;
    for (const std::thread::id& id : c.who) by_caller += id == std::this_thread::get_id();
    EXPECT_LT(by_caller, 400) << "round " << round << ": the sleeping worker never woke";
  }
}

TEST(ThreadPool, ResizingKeepsLoopsCorrect) {
  for (int threads : {1, 4, 2, 3, 1, 2}) {
    use_thread_pool(threads);
    ASSERT_EQ(kiln::runtime::thread_pool_size(), threads);
    Counts c(3, 101);
    ASSERT_EQ(thread_pool_par_for(nullptr, count_task, 3, 101, closure_of(c)), 0);
    expect_each_once(c, "after resize");
    if (threads == 1)
      for (const std::thread::id& id : c.who) ASSERT_EQ(id, std::this_thread::get_id());
  }
  use_thread_pool(0);  // keeps the size
  EXPECT_EQ(kiln::runtime::thread_pool_size(), 2);
}

}  // namespace
