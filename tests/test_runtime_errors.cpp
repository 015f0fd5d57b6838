// Runtime error paths: bad inputs, unsupported graphs and a missing GPU come back as errors
// with messages, never as a crash or an abort().
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "graph/builder.h"
#include "graph/example.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kernels.h"
#include "kiln/runtime.h"

namespace {

using namespace kiln;

graph::Graph small_example() {
  graph::ExampleShape s;
  s.c = 4, s.h = 9, s.w = 9, s.co = 8;
  return graph::run_passes(graph::reference_example(s, 3));
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(RuntimeErrors, WrongInputShapeIsAnError) {
  Model m(small_example());
  graph::Tensor bad{{1, 4, 9, 8}, graph::Layout::nchw, std::vector<float>(4 * 9 * 8, 1.0f)};
  const Status s = m.run(std::vector<graph::Tensor>{bad});
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(contains(s.message(), "input 'A' must have shape [1, 4, 9, 9]")) << s.message();
}

TEST(RuntimeErrors, WrongInputCountAndNullInput) {
  Model m(small_example());
  EXPECT_TRUE(contains(m.run(std::vector<const float*>{}).message(), "has 1 inputs, got 0"));
  EXPECT_TRUE(contains(m.run(std::vector<const float*>{nullptr}).message(), "is null"));
}

// One Model shared by two threads: calls that overlap fail with the one-call-at-a-time error
// and leave the Model usable; every call either succeeds or says so; a later call is exact.
TEST(RuntimeErrors, ConcurrentRunsOnOneModelFailClearly) {
  const graph::Graph g = small_example();
  Model m(g);
  const graph::Value& in = g.value(g.inputs[0]);
  const std::vector<float> x = graph::random_uniform(graph::num_elements(in.shape), -1, 1, 5);
  std::atomic<int> ok{0}, refused{0}, other{0}, ready{0};
  auto hammer = [&] {
    ++ready;
    while (ready.load() < 2) {
    }  // both threads start calling together
    for (int i = 0; i < 300; ++i) {
      const Status s = m.run({x.data()});
      if (s.is_ok()) ++ok;
      else if (contains(s.message(), "a Model runs one call at a time")) ++refused;
      else ++other;
    }
  };
  std::thread a(hammer), b(hammer);
  a.join();
  b.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(ok.load() + refused.load(), 600);
  EXPECT_GT(ok.load(), 0);
  // 600 calls of a few microseconds from two threads started together overlap; before the
  // guard, such overlaps silently mixed the two calls' arenas.
  EXPECT_GT(refused.load(), 0);
  std::printf("concurrent runs: %d succeeded, %d refused\n", ok.load(), refused.load());
  ASSERT_TRUE(m.run({x.data()}));
  const graph::Tensor want = graph::run_reference(g, {graph::Tensor{in.shape, in.layout, x}})[0];
  const TensorView out = m.output(0);
  const graph::Tensor got = graph::to_layout(
      graph::Tensor{out.shape, out.layout, std::vector<float>(out.data, out.data + graph::num_elements(out.shape))},
      want.layout);
  EXPECT_LE(graph::worst_error_ratio(got.data, want.data, 1e-4, 1e-5), 1.0);
}

// A node the Halide kernels do not cover (a standalone ReLU on an NHWC input) runs on the
// portable kernels on the CPU; on CUDA it has no kernel, which must be said, not crash.
TEST(RuntimeErrors, PortableOpRunsOnCpuAndIsNamedOnCuda) {
  graph::GraphBuilder b;
  auto x = b.input("x", {1, 3, 4, 5}, graph::Layout::nhwc);
  b.output(b.relu("lonely_relu", x));
  const graph::Graph g = b.finish();
  Model cpu(g);
  graph::Tensor in{{1, 3, 4, 5}, graph::Layout::nhwc, graph::random_uniform(60, -1, 1, 9)};
  ASSERT_TRUE(cpu.run(std::vector<graph::Tensor>{in}).is_ok());
  const graph::Tensor want = graph::run_reference(g, {in})[0];
  EXPECT_EQ(std::vector<float>(cpu.output(0).data, cpu.output(0).data + 60), want.data);

  ModelOptions o;
  o.backend = Backend::cuda;
  try {
    Model m(g, o);
    GTEST_SKIP() << "CUDA is usable here and the op ran on it";
  } catch (const graph::Error& e) {
    EXPECT_TRUE(contains(e.what(), "CUDA")) << e.what();
  }
  o.fallback_to_cpu = true;
  Model fallback(g, o);
  EXPECT_EQ(fallback.backend(), Backend::cpu);
  EXPECT_FALSE(fallback.fallback_reason().empty());
}

TEST(RuntimeErrors, UnsupportedCpuTargetIndexIsAnError) {
  ModelOptions o;
  o.cpu_target = 99;
  EXPECT_THROW(Model(small_example(), o), graph::Error);
}

// This machine has no GPU: CUDA must fail with a clear message, or fall back when asked.
TEST(RuntimeErrors, CudaWithoutGpuFailsClearlyOrFallsBack) {
  ModelOptions o;
  o.backend = Backend::cuda;
  try {
    Model m(small_example(), o);
    // A GPU is present: then the model must run.
    graph::Tensor x{{1, 4, 9, 9}, graph::Layout::nchw, graph::random_uniform(324, -1, 1, 5)};
    const Status s = m.run(std::vector<graph::Tensor>{x});
    EXPECT_TRUE(s.is_ok()) << s.message();
    GTEST_SKIP() << "a usable GPU is present; the no-GPU error path cannot be checked here";
  } catch (const graph::Error& e) {
    EXPECT_TRUE(contains(e.what(), "CUDA")) << e.what();
    EXPECT_TRUE(contains(e.what(), "fallback")) << e.what();
  }
  o.fallback_to_cpu = true;
  Model m(small_example(), o);
  if (m.backend() == Backend::cpu) EXPECT_FALSE(m.fallback_reason().empty());
  graph::Tensor x{{1, 4, 9, 9}, graph::Layout::nchw, graph::random_uniform(324, -1, 1, 5)};
  const Status s = m.run(std::vector<graph::Tensor>{x});
  EXPECT_TRUE(s.is_ok()) << s.message();
}

}  // namespace
