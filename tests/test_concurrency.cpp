// Models across threads (docs/robustness.md, "Threads"): separate Models in separate threads give
// bit for bit what one Model gives on one thread; one Model shared by threads is used one call at
// a time, a concurrent call refused without touching anything; 1 and N Halide threads agree.
// Every comparison is bit-exact, repeated over many runs, and the single-threaded results are
// checked against the reference interpreter first, so a model that is wrong everywhere fails too.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "graph/builder.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kiln/runtime.h"
#include "test_generator.h"

namespace {

using namespace kiln;
using graph::ValueId;

constexpr int kThreads = 4;
constexpr int kInputs = 5;   // distinct inputs each thread cycles through
constexpr int kRounds = 12;  // runs per thread = kInputs * kRounds

const graph::Shape kInputShape = {1, 8, 45, 39};

ValueId random_constant(graph::GraphBuilder& b, const std::string& name, graph::Shape shape,
                        float bound, uint64_t seed, graph::Layout layout = graph::Layout::any) {
  const size_t n = static_cast<size_t>(graph::num_elements(shape));
  return b.constant(name, shape, graph::random_uniform(n, -bound, bound, seed), layout);
}

// Generated convolutions (one with a residual), max pooling, a global pool and a linear layer;
// two outputs, one of them an NHWC feature map, so that large tensors are compared too.
graph::Graph small_cnn() {
  graph::GraphBuilder b;
  const ValueId x = b.input("x", kInputShape, graph::Layout::nchw);
  graph::Conv2d same;
  same.pad_top = same.pad_left = same.pad_bottom = same.pad_right = 1;
  const ValueId c1 = b.relu("relu1", b.conv2d("conv1", x, random_constant(b, "w1", {16, 8, 3, 3}, 0.3f, 1, graph::Layout::oihw),
                                               random_constant(b, "b1", {16}, 0.1f, 2), same));
  graph::Pool2d pool;
  pool.kernel_h = pool.kernel_w = 3;
  pool.stride_h = pool.stride_w = 2;
  pool.pad_top = pool.pad_left = pool.pad_bottom = pool.pad_right = 1;
  const ValueId p = b.op("pool", pool, {c1});
  const ValueId c2 = b.conv2d("conv2", p, random_constant(b, "w2", {16, 16, 3, 3}, 0.2f, 3, graph::Layout::oihw),
                              random_constant(b, "b2", {16}, 0.1f, 4), same);
  const ValueId features = b.relu("features", b.op("residual", graph::Binary{graph::BinaryOp::add}, {c2, p}));
  const ValueId pooled = b.op("gap", graph::GlobalPool{graph::PoolKind::avg}, {features});
  const ValueId flat = b.op("flatten", graph::Reshape{{1, 16}}, {pooled});
  b.output(b.op("fc", graph::Gemm{}, {flat, random_constant(b, "fc_w", {16, 10}, 0.4f, 5),
                                       random_constant(b, "fc_b", {10}, 0.1f, 6)}));
  b.output(features);
  return b.finish();
}

ModelOptions options(int threads = 0) {
  ModelOptions o;
  o.generate_kernels = testing_util::test_generator();
  o.threads = threads;
  return o;
}

// Holds the threads until all have started, so that their calls overlap.
class StartLine {
 public:
  explicit StartLine(int n) : waiting_(n) {}
  void arrive_and_wait() {
    --waiting_;
    while (waiting_.load() > 0) std::this_thread::yield();
  }

 private:
  std::atomic<int> waiting_;
};

std::vector<std::vector<float>> make_inputs() {
  std::vector<std::vector<float>> in;
  for (int i = 0; i < kInputs; ++i)
    in.push_back(graph::random_uniform(graph::num_elements(kInputShape), -1, 1, 100 + i));
  return in;
}

using Outputs = std::vector<std::vector<float>>;

Outputs outputs_of(const Model& m) {
  Outputs out;
  for (size_t i = 0; i < m.num_outputs(); ++i) {
    const TensorView v = m.output(i);
    out.emplace_back(v.data, v.data + graph::num_elements(v.shape));
  }
  return out;
}

bool bit_equal(const Outputs& a, const Outputs& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * 4) != 0)
      return false;
  return true;
}

// Each input run once on one Model on this thread, checked against the reference interpreter.
std::vector<Outputs> single_threaded(const graph::Graph& original, const std::vector<std::vector<float>>& inputs,
                                     int threads = 0) {
  Model m(graph::run_passes(original), options(threads));
  std::vector<Outputs> expected;
  for (const std::vector<float>& in : inputs) {
    const Status s = m.run(std::vector<const float*>{in.data()});
    EXPECT_TRUE(s.is_ok()) << s.message();
    expected.push_back(outputs_of(m));
    const std::vector<graph::Tensor> want =
        graph::run_reference(original, {graph::Tensor{kInputShape, graph::Layout::nchw, in}});
    for (size_t o = 0; o < want.size(); ++o) {
      const TensorView v = m.output(o);
      const graph::Tensor got = graph::to_layout(v.data, v.shape, v.layout, want[o].layout);
      EXPECT_LE(graph::worst_error_ratio(got.data, want[o].data, 1e-4, 1e-5), 1.0) << "output " << o;
    }
  }
  return expected;
}

TEST(Concurrency, SeparateModelsInThreadsMatchOneThreadBitForBit) {
  const graph::Graph g = small_cnn();
  const std::vector<std::vector<float>> inputs = make_inputs();
  const std::vector<Outputs> expected = single_threaded(g, inputs);
  std::atomic<int> mismatches{0}, failures{0};
  StartLine start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      Model m(graph::run_passes(g), options());  // constructed concurrently, too
      for (int r = 0; r < kInputs * kRounds; ++r) {
        const int i = (r + t) % kInputs;  // the threads run different inputs at the same time
        if (!m.run(std::vector<const float*>{inputs[i].data()})) ++failures;
        else if (!bit_equal(outputs_of(m), expected[i])) ++mismatches;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(mismatches, 0) << "of " << kThreads * kInputs * kRounds << " runs";
}

// Threads taking turns on one Model (a lock around run() and reading the outputs) get exactly
// the single-threaded results.
TEST(Concurrency, OneModelSharedUnderALockMatchesOneThread) {
  const graph::Graph g = small_cnn();
  const std::vector<std::vector<float>> inputs = make_inputs();
  const std::vector<Outputs> expected = single_threaded(g, inputs);
  Model m(graph::run_passes(g), options());
  std::mutex turn;
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kInputs * kRounds; ++r) {
        const int i = (r + t) % kInputs;
        std::lock_guard<std::mutex> lock(turn);
        if (!m.run(std::vector<const float*>{inputs[i].data()})) ++failures;
        else if (!bit_equal(outputs_of(m), expected[i])) ++mismatches;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(mismatches, 0);
}

// Without a lock, concurrent calls on one Model are refused with the documented error and
// nothing else; refused calls change nothing, so the Model ends holding the outputs of one of
// the inputs exactly, and runs correctly afterwards.
TEST(Concurrency, OneModelSharedWithoutALockRefusesConcurrentCalls) {
  const graph::Graph g = small_cnn();
  const std::vector<std::vector<float>> inputs = make_inputs();
  const std::vector<Outputs> expected = single_threaded(g, inputs);
  Model m(graph::run_passes(g), options());
  std::atomic<int> succeeded{0}, refused{0}, other_errors{0};
  std::mutex message_lock;
  std::string other_message;
  StartLine start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int r = 0; r < kInputs * kRounds; ++r) {
        const Status s = m.run(std::vector<const float*>{inputs[(r + t) % kInputs].data()});
        if (s) {
          ++succeeded;
        } else if (s.message().find("a Model runs one call at a time") != std::string::npos) {
          ++refused;
        } else {
          ++other_errors;
          std::lock_guard<std::mutex> lock(message_lock);
          other_message = s.message();
        }
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(other_errors, 0) << other_message;
  EXPECT_GT(succeeded, 0);
  // The threads start together and each call takes about a millisecond, so calls overlap (here
  // 120-180 of 240 are refused); none refused means run() let two calls in at once.
  EXPECT_GT(refused, 0) << "no call was refused: were the calls let in at the same time?";
  EXPECT_EQ(succeeded + refused, kThreads * kInputs * kRounds);
  const Outputs last = outputs_of(m);
  bool matches_one = false;
  for (const Outputs& e : expected) matches_one |= bit_equal(last, e);
  EXPECT_TRUE(matches_one) << "the outputs are no input's: a refused call wrote into them";
  ASSERT_TRUE(m.run(std::vector<const float*>{inputs[2].data()}));
  EXPECT_TRUE(bit_equal(outputs_of(m), expected[2]));
  std::printf("%d calls succeeded, %d were refused\n", succeeded.load(), refused.load());
}

// Halide's thread pool split 1 way and 4 ways (more than this machine's cores) computes the
// same bits: no kernel's result depends on how its loops are divided among threads.
TEST(Concurrency, OneThreadAndFourThreadsGiveEqualResults) {
  const graph::Graph g = small_cnn();
  const std::vector<std::vector<float>> inputs = make_inputs();
  const std::vector<Outputs> one = single_threaded(g, inputs, 1);
  const std::vector<Outputs> four = single_threaded(g, inputs, 4);
  for (int i = 0; i < kInputs; ++i) EXPECT_TRUE(bit_equal(one[i], four[i])) << "input " << i;
}

}  // namespace
