// Runtime error paths: bad inputs, unsupported graphs and a missing GPU come back as errors
// with messages, never as a crash or an abort().
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <future>
#include <random>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "graph/builder.h"
#include "graph/example.h"
#include "graph/memory_limit.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "HalideRuntime.h"
#include "kernels.h"
#include "kiln/runtime.h"
#include "test_generator.h"

namespace {

using namespace kiln;

graph::Graph small_example() {
  graph::ExampleShape s;
  s.c = 4, s.h = 9, s.w = 9, s.co = 8;
  return graph::run_passes(graph::reference_example(s, 3));
}

// Options with the tests' kernel generator.
ModelOptions generating(ModelOptions o = {}) {
  o.generate_kernels = testing_util::test_generator();
  return o;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(RuntimeErrors, WrongInputShapeIsAnError) {
  Model m(small_example(), generating());
  graph::Tensor bad{{1, 4, 9, 8}, graph::Layout::nchw, std::vector<float>(4 * 9 * 8, 1.0f)};
  const Status s = m.run(std::vector<graph::Tensor>{bad});
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "input 'A' must have shape [1, 4, 9, 9]")) << s.message();
}

TEST(RuntimeErrors, WrongInputCountAndNullInput) {
  Model m(small_example(), generating());
  EXPECT_TRUE(contains(m.run(std::vector<const float*>{}).message(), "has 1 inputs, got 0"));
  EXPECT_TRUE(contains(m.run(std::vector<const float*>{nullptr}).message(), "is null"));
}

// A second thread's run() while a call on the same Model is in progress is refused with a clear
// error and changes nothing; the first call finishes with the right result. Deterministic: the
// first call is held inside its generated convolution, at the kernel's first parallel loop
// (Halide's do_par_for, replaced for the test), until the second has been refused.
std::promise<void> g_entered, g_release;
std::atomic<bool> g_held{false};
halide_do_par_for_t g_default_par_for = nullptr;
int holding_par_for(void* user_context, halide_task_t task, int min, int size, uint8_t* closure) {
  if (!g_held.exchange(true)) {
    g_entered.set_value();
    g_release.get_future().wait();
  }
  return g_default_par_for(user_context, task, min, size, closure);
}

TEST(RuntimeErrors, ConcurrentRunOnOneModelIsRefused) {
  graph::ExampleShape shape;
  shape.c = 8, shape.h = 32, shape.w = 32, shape.co = 16;
  const graph::Graph g = graph::run_passes(graph::reference_example(shape, 3));
  Model m(g, generating());
  const graph::Value& in = g.value(g.inputs[0]);
  const int64_t n = graph::num_elements(in.shape);
  const std::vector<float> x1 = graph::random_uniform(n, -1, 1, 5);
  const std::vector<float> x2 = graph::random_uniform(n, -1, 1, 6);
  g_default_par_for = halide_set_custom_do_par_for(holding_par_for);
  Status first = Status::error("not run");
  std::thread a([&] { first = m.run(std::vector<const float*>{x1.data()}); });
  // The first call is inside its kernel (or, if the kernel never ran a parallel loop, done).
  const bool held = g_entered.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  const Status second = m.run(std::vector<const float*>{x2.data()});
  g_release.set_value();
  a.join();
  halide_set_custom_do_par_for(g_default_par_for);
  ASSERT_TRUE(held) << "the conv kernel never ran a parallel loop";
  EXPECT_FALSE(second.is_ok());
  EXPECT_TRUE(contains(second.message(), "a Model runs one call at a time")) << second.message();
  ASSERT_TRUE(first.is_ok()) << first.message();
  const graph::Tensor want = graph::run_reference(g, {graph::Tensor{in.shape, in.layout, x1}})[0];
  const TensorView out = m.output(0);
  graph::Tensor got{out.shape, out.layout, std::vector<float>(out.data, out.data + graph::num_elements(out.shape))};
  EXPECT_LE(graph::worst_error_ratio(got.data, want.data, 1e-4, 1e-5), 1.0);  // x1's, not x2's
  ASSERT_TRUE(m.run(std::vector<const float*>{x2.data()}));  // and the Model is usable afterwards
}

// Every kernel is generated: a graph that skipped the passes (a lone ReLU node, which the passes
// make a chain; an NCHW convolution) is refused with the node and the reason, not run some
// other way.
TEST(RuntimeErrors, GraphWithoutThePassesIsRefusedClearly) {
  graph::GraphBuilder b;
  b.output(b.relu("lonely_relu", b.input("x", {1, 3, 4, 5}, graph::Layout::nhwc)));
  try {
    Model m(b.finish(), generating());
    ADD_FAILURE() << "a lone ReLU node was accepted";
  } catch (const graph::Error& e) {
    EXPECT_TRUE(contains(e.what(), "'lonely_relu'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "the passes make it a chain")) << e.what();
  }
  try {
    Model m(graph::reference_example({}, 3), generating());
    ADD_FAILURE() << "an NCHW convolution was accepted";
  } catch (const graph::Error& e) {
    EXPECT_TRUE(contains(e.what(), "its input is not NHWC")) << e.what();
    EXPECT_TRUE(contains(e.what(), "graph::run_passes")) << e.what();
  }
}

TEST(RuntimeErrors, UnsupportedCpuTargetIndexIsAnError) {
  ModelOptions o;
  o.cpu_target = 99;
  EXPECT_THROW(Model(small_example(), generating(o)), graph::Error);
}

// A Pad of a tiny input to `rows` x `cols`: an arena of about rows * cols * 4 bytes behind one
// small generated kernel.
graph::Graph padded(int64_t rows, int64_t cols) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {1, 1}, graph::Layout::any);
  b.output(b.op("pad", graph::Pad{{0, 0, rows - 1, cols - 1}, 0.5f}, {x}));
  return graph::run_passes(b.finish());
}

// ModelOptions::poison_arena: the arena (outputs included) is NaN before each run, and a run
// writes every value it reads, so the outputs come out finite and equal to the reference.
TEST(RuntimeErrors, PoisonedArenaIsNaNUntilARunWritesIt) {
  const graph::Graph g = small_example();
  ModelOptions o;
  o.poison_arena = true;
  Model m(g, generating(o));
  const TensorView out = m.output(0);
  const int64_t n = graph::num_elements(out.shape);
  EXPECT_EQ(std::count_if(out.data, out.data + n, [](float v) { return std::isnan(v); }), n);
  const graph::Value& in = g.value(g.inputs[0]);
  for (uint64_t seed : {3u, 4u}) {  // the second run starts from a poisoned arena again
    const graph::Tensor x{in.shape, in.layout,
                          graph::random_uniform(graph::num_elements(in.shape), -1, 1, seed)};
    ASSERT_TRUE(m.run(std::vector<graph::Tensor>{x}).is_ok());
    const graph::Tensor want = graph::run_reference(g, {x})[0];
    const std::vector<float> got(out.data, out.data + n);
    EXPECT_LE(graph::worst_error_ratio(got, want.data, 1e-4, 1e-5), 1.0) << "seed " << seed;
  }
}

#if defined(__x86_64__) || defined(__i386__)
// Kernels run with denormals read as zero and flushed to zero (runtime/float_mode.h), on the
// calling thread and the pool's workers alike, and the caller's mode is its own again after the
// run: x * 1e30 of denormal inputs is 0, not about 1e-9.
TEST(RuntimeErrors, KernelsReadDenormalsAsZeroAndTheCallersModeIsKept) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {1, 16, 24, 24});
  b.output(b.op("scale", graph::Binary{graph::BinaryOp::mul}, {x, b.constant("k", {}, {1e30f})}));
  const graph::Graph g = graph::run_passes(b.finish());
  Model m(g, generating());
  const graph::Value& in = g.value(g.inputs[0]);
  std::vector<float> data = graph::random_uniform(graph::num_elements(in.shape), 1.0f, 8.0f, 5);
  for (float& v : data) v *= 1e-39f;  // 1e-39 .. 8e-39: denormal (below 1.18e-38)
  ASSERT_TRUE(std::fpclassify(data[0]) == FP_SUBNORMAL);
  const unsigned before = _mm_getcsr();
  ASSERT_TRUE(m.run(std::vector<graph::Tensor>{{in.shape, in.layout, data}}).is_ok());
  EXPECT_EQ(_mm_getcsr(), before);
  const TensorView out = m.output(0);
  const int64_t n = graph::num_elements(out.shape);
  EXPECT_EQ(std::count(out.data, out.data + n, 0.0f), n);
  // The reference (no such mode) multiplies them.
  EXPECT_GT(graph::run_reference(g, {{in.shape, in.layout, data}})[0].data[0], 1e-10f);
}
#endif

// The arena is checked against ModelOptions::max_memory_bytes right after it is planned, before
// anything is allocated for it; at the limit the model runs.
TEST(RuntimeErrors, ArenaOverTheMemoryLimitIsRefused) {
  std::mt19937_64 rng(std::random_device{}());
  const int64_t rows = 2 + rng() % 300, cols = 2 + rng() % 300;
  const graph::Graph g = padded(rows, cols);
  ModelOptions o;
  o.lower_only = true;
  const int64_t arena = Model(g, o).arena_plan().arena_bytes;
  ASSERT_GE(arena, rows * cols * 4);
  o.lower_only = false;
  o.max_memory_bytes = arena - 1 - static_cast<int64_t>(rng() % (rows * cols));
  try {
    Model m(g, o);
    ADD_FAILURE() << "an arena of " << arena << " bytes was accepted under a limit of "
                  << o.max_memory_bytes;
  } catch (const graph::Error& e) {
    EXPECT_TRUE(contains(e.what(), "needs " + std::to_string(arena) + " bytes")) << e.what();
    EXPECT_TRUE(contains(e.what(), "memory limit")) << e.what();
  }
  o.max_memory_bytes = arena;
  o.generate_kernels = testing_util::test_generator();
  Model m(g, o);
  const float x = 1.0f + static_cast<float>(rng() % 100);
  ASSERT_TRUE(m.run(std::vector<const float*>{&x}).is_ok());
  EXPECT_EQ(m.output(0).data[0], x);
  EXPECT_EQ(m.output(0).data[rows * cols - 1], 0.5f);
}

// Without a limit, the machine's physical memory is one: a model that could never fit fails
// at once with one line instead of dying in the allocator.
TEST(RuntimeErrors, ArenaOverPhysicalMemoryIsRefusedAtOnce) {
  std::mt19937_64 rng(std::random_device{}());
  const int64_t side = int64_t{1} << 20;  // 4 TiB of floats, over any machine's memory here
  const graph::Graph g = padded(side + static_cast<int64_t>(rng() % 1000), side);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Model m(g);
    ADD_FAILURE() << "a model with a 4 TiB arena was accepted";
  } catch (const graph::Error& e) {
    EXPECT_TRUE(contains(e.what(), "physical memory")) << e.what();
    EXPECT_TRUE(contains(e.what(), graph::byte_size_text(graph::physical_memory_bytes())))
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

// This machine has no GPU: CUDA must fail with a clear message, or fall back when asked.
TEST(RuntimeErrors, CudaWithoutGpuFailsClearlyOrFallsBack) {
  EXPECT_EQ(backend_unusable_reason(Backend::cpu), "");
  const std::string unusable = backend_unusable_reason(Backend::cuda);
  ModelOptions o;
  o.backend = Backend::cuda;
  try {
    Model m(small_example(), generating(o));
    // A GPU is present: then the model must run.
    graph::Tensor x{{1, 4, 9, 9}, graph::Layout::nchw, graph::random_uniform(324, -1, 1, 5)};
    const Status s = m.run(std::vector<graph::Tensor>{x});
    EXPECT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ(unusable, "") << "the probe said no, yet the model was built";
    GTEST_SKIP() << "a usable GPU is present; the no-GPU error path cannot be checked here";
  } catch (const graph::Error& e) {
    EXPECT_TRUE(contains(e.what(), "CUDA")) << e.what();
    EXPECT_FALSE(unusable.empty());
    EXPECT_TRUE(contains(e.what(), unusable)) << e.what() << " does not give the probe's reason";
    EXPECT_TRUE(contains(e.what(), "fallback")) << e.what();
  }
  o.fallback_to_cpu = true;
  Model m(small_example(), generating(o));
  if (m.backend() == Backend::cpu) EXPECT_FALSE(m.fallback_reason().empty());
  graph::Tensor x{{1, 4, 9, 9}, graph::Layout::nchw, graph::random_uniform(324, -1, 1, 5)};
  const Status s = m.run(std::vector<graph::Tensor>{x});
  EXPECT_TRUE(s.is_ok()) << s.message();
}

}  // namespace
