// Models across threads (docs/robustness.md, "Threads"): separate Models in separate threads give
// bit for bit what one Model gives on one thread; one Model shared by threads is used one call at
// a time, a concurrent call refused without touching anything; 1 and N pool threads agree.
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

ValueId random_constant(graph::GraphBuilder& b, const std::string& name, graph::Shape shape,
                        float bound, uint64_t seed, graph::Layout layout = graph::Layout::any) {
  const size_t n = static_cast<size_t>(graph::num_elements(shape));
  return b.constant(name, shape, graph::random_uniform(n, -bound, bound, seed), layout);
}

graph::Conv2d same_padding() {
  graph::Conv2d c;
  c.pad_top = c.pad_left = c.pad_bottom = c.pad_right = 1;
  return c;
}

// Convolutions (one with a residual), max pooling, a
// global pool and a linear layer; two outputs, one an NHWC feature map, so that large tensors
// are compared too.
graph::Graph generated_cnn() {
  graph::GraphBuilder b;
  const ValueId x = b.input("x", {1, 8, 45, 39}, graph::Layout::nchw);
  const ValueId c1 = b.relu("relu1", b.conv2d("conv1", x, random_constant(b, "w1", {16, 8, 3, 3}, 0.3f, 1, graph::Layout::oihw),
                                               random_constant(b, "b1", {16}, 0.1f, 2), same_padding()));
  graph::Pool2d pool;
  pool.kernel_h = pool.kernel_w = 3;
  pool.stride_h = pool.stride_w = 2;
  pool.pad_top = pool.pad_left = pool.pad_bottom = pool.pad_right = 1;
  const ValueId p = b.op("pool", pool, {c1});
  const ValueId c2 = b.conv2d("conv2", p, random_constant(b, "w2", {16, 16, 3, 3}, 0.2f, 3, graph::Layout::oihw),
                              random_constant(b, "b2", {16}, 0.1f, 4), same_padding());
  const ValueId features = b.relu("features", b.op("residual", graph::Binary{graph::BinaryOp::add}, {c2, p}));
  const ValueId pooled = b.op("gap", graph::GlobalPool{graph::PoolKind::avg}, {features});
  const ValueId flat = b.op("flatten", graph::Reshape{{1, 16}}, {pooled});
  b.output(b.op("fc", graph::Gemm{}, {flat, random_constant(b, "fc_w", {16, 10}, 0.4f, 5),
                                       random_constant(b, "fc_b", {10}, 0.1f, 6)}));
  b.output(features);
  return b.finish();
}

// A ConvNeXt-style block (large enough that a call takes about a millisecond, so calls overlap):
// a depthwise convolution, a permute to channels-last, LayerNorm, a
// two-layer MLP with GELU, a permute back and a residual Add; the passes turn the MLP into
// convolutions with fused epilogues and the permutes into relabels.
graph::Graph channels_last_block() {
  graph::GraphBuilder b;
  const ValueId x = b.input("x", {1, 48, 40, 36}, graph::Layout::nchw);
  graph::Conv2d dw = same_padding();
  dw.groups = 48;
  const ValueId d = b.conv2d("dw", x, random_constant(b, "dw_w", {48, 1, 3, 3}, 0.3f, 11, graph::Layout::oihw),
                             random_constant(b, "dw_b", {48}, 0.1f, 12), dw);
  const ValueId cl = b.op("to_cl", graph::Transpose{{0, 2, 3, 1}}, {d});
  const ValueId ln = b.op("ln", graph::LayerNorm{3, 1e-6f},
                          {cl, random_constant(b, "g", {48}, 1.0f, 13), random_constant(b, "beta", {48}, 0.2f, 14)});
  const ValueId h = b.op("fc1_bias", graph::Binary{graph::BinaryOp::add},
                         {b.op("fc1", graph::MatMul{}, {ln, random_constant(b, "w1", {48, 128}, 0.3f, 15)}),
                          random_constant(b, "b1", {128}, 0.1f, 16)});
  const ValueId act = b.op("gelu", graph::ElementwiseChain{{{graph::ChainStepKind::gelu, 0, 0}}}, {h});
  const ValueId o = b.op("fc2", graph::MatMul{}, {act, random_constant(b, "w2", {128, 48}, 0.2f, 17)});
  const ValueId back = b.op("to_cf", graph::Transpose{{0, 3, 1, 2}}, {o});
  b.output(b.op("residual", graph::Binary{graph::BinaryOp::add}, {x, back}));
  return b.finish();
}

struct Net {
  std::string name;
  graph::Graph original;
  graph::Graph model_graph() const { return graph::run_passes(original); }
};

Net net(const std::string& name) {
  if (name == "cnn") return {name, generated_cnn()};
  return {name, channels_last_block()};
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

// One run's graph inputs: random, non-zero.
struct RunInput {
  std::vector<graph::Tensor> tensors;
  std::vector<const float*> pointers() const {
    std::vector<const float*> p;
    for (const graph::Tensor& t : tensors) p.push_back(t.data.data());
    return p;
  }
};

std::vector<RunInput> make_inputs(const graph::Graph& g) {
  std::vector<RunInput> runs(kInputs);
  for (int i = 0; i < kInputs; ++i)
    for (size_t k = 0; k < g.inputs.size(); ++k) {
      const graph::Value& v = g.value(g.inputs[k]);
      const size_t n = static_cast<size_t>(graph::num_elements(v.shape));
      runs[i].tensors.push_back({v.shape, v.layout, graph::random_uniform(n, -1, 1, 100 + 10 * i + k)});
    }
  return runs;
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
std::vector<Outputs> single_threaded(const Net& net, const std::vector<RunInput>& inputs, int threads = 0) {
  Model m(net.model_graph(), options(threads));
  std::vector<Outputs> expected;
  for (const RunInput& in : inputs) {
    const Status s = m.run(in.pointers());
    EXPECT_TRUE(s.is_ok()) << s.message();
    expected.push_back(outputs_of(m));
    const std::vector<graph::Tensor> want = graph::run_reference(net.original, in.tensors);
    for (size_t o = 0; o < want.size(); ++o) {
      const TensorView v = m.output(o);
      const graph::Tensor got = graph::to_layout(v.data, v.shape, v.layout, want[o].layout);
      EXPECT_LE(graph::worst_error_ratio(got.data, want[o].data, 1e-4, 1e-5), 1.0) << "output " << o;
    }
  }
  return expected;
}

class Concurrency : public testing::TestWithParam<std::string> {};

TEST_P(Concurrency, SeparateModelsInThreadsMatchOneThreadBitForBit) {
  const Net n = net(GetParam());
  const std::vector<RunInput> inputs = make_inputs(n.original);
  const std::vector<Outputs> expected = single_threaded(n, inputs);
  std::atomic<int> mismatches{0}, failures{0};
  StartLine start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      Model m(n.model_graph(), options());  // constructed concurrently, too
      for (int r = 0; r < kInputs * kRounds; ++r) {
        const int i = (r + t) % kInputs;  // the threads run different inputs at the same time
        if (!m.run(inputs[i].pointers())) ++failures;
        else if (!bit_equal(outputs_of(m), expected[i])) ++mismatches;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(mismatches, 0) << "of " << kThreads * kInputs * kRounds << " runs";
}

// Threads taking turns on one Model (a lock around run() and reading the outputs) get exactly
// the single-threaded results.
TEST_P(Concurrency, OneModelSharedUnderALockMatchesOneThread) {
  const Net n = net(GetParam());
  const std::vector<RunInput> inputs = make_inputs(n.original);
  const std::vector<Outputs> expected = single_threaded(n, inputs);
  Model m(n.model_graph(), options());
  std::mutex turn;
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < kInputs * kRounds; ++r) {
        const int i = (r + t) % kInputs;
        std::lock_guard<std::mutex> lock(turn);
        if (!m.run(inputs[i].pointers())) ++failures;
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
TEST_P(Concurrency, OneModelSharedWithoutALockRefusesConcurrentCalls) {
  const Net n = net(GetParam());
  const std::vector<RunInput> inputs = make_inputs(n.original);
  const std::vector<Outputs> expected = single_threaded(n, inputs);
  Model m(n.model_graph(), options());
  std::atomic<int> succeeded{0}, refused{0}, other_errors{0};
  std::mutex message_lock;
  std::string other_message;
  StartLine start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int r = 0; r < kInputs * kRounds; ++r) {
        const Status s = m.run(inputs[(r + t) % kInputs].pointers());
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
  ASSERT_TRUE(m.run(inputs[2].pointers()));
  EXPECT_TRUE(bit_equal(outputs_of(m), expected[2]));
  std::printf("%d calls succeeded, %d were refused\n", succeeded.load(), refused.load());
}

// The thread pool split 1 way and 4 ways (more than this machine's cores) computes the
// same bits: no kernel's result depends on how its loops are divided among threads.
TEST_P(Concurrency, OneThreadAndFourThreadsGiveEqualResults) {
  const Net n = net(GetParam());
  const std::vector<RunInput> inputs = make_inputs(n.original);
  const std::vector<Outputs> one = single_threaded(n, inputs, 1);
  const std::vector<Outputs> four = single_threaded(n, inputs, 4);
  for (int i = 0; i < kInputs; ++i) EXPECT_TRUE(bit_equal(one[i], four[i])) << "input " << i;
}

INSTANTIATE_TEST_SUITE_P(Nets, Concurrency, testing::Values("cnn", "channels_last"),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
