// The rounding, comparison, logic, Pow and Where kernels (cases in logic_cases.h) generated for
// every CPU target and compared with the reference interpreter, and a convolution whose output
// is compared with a constant (the comparison and Not fused into the conv's epilogue) or feeds
// Where(conv > t, conv, y). The OpenCL runs of the same kernels are in test_generated_gpu.cpp.
#include <gtest/gtest.h>

#include "codegen/kernel_library.h"
#include "graph/passes/passes.h"
#include "graph/passes/pipeline.h"
#include "kiln/runtime.h"
#include "logic_cases.h"
#include "runtime/kernels.h"
#include "test_generator.h"

namespace kiln {
namespace {

using namespace testing_util;

// `run` (a graph of generated kernels) on every CPU target this machine runs, on `ins`, against
// the reference run of `reference`; `kernels` is how many kernels the Model must have.
void expect_matches_on_every_target(const graph::Graph& run, const graph::Graph& reference,
                                    const std::vector<graph::Tensor>& ins, size_t kernels,
                                    double rtol, double atol) {
  const std::vector<graph::Tensor> want = graph::run_reference(reference, ins);
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!runs_target(t)) continue;
    SCOPED_TRACE(runtime::cpu_targets()[t]);
    ModelOptions o;
    o.cpu_target = t;
    o.generate_kernels =
        codegen::kernel_generator({{runtime::cpu_targets()[t]}, KILN_TEST_CACHE_DIR, nullptr});
    Model m(run, o);
    ASSERT_EQ(m.kernels().size(), kernels);
    for (const graph::KernelSpec& k : m.kernels()) ASSERT_TRUE(graph::is_generated(k));
    ASSERT_TRUE(m.run(ins));
    for (size_t i = 0; i < want.size(); ++i) {
      const TensorView out = m.output(i);
      graph::Tensor got{out.shape, out.layout,
                        std::vector<float>(out.data, out.data + graph::num_elements(out.shape))};
      if (got.layout != want[i].layout) got = graph::to_layout(got, want[i].layout);
      ASSERT_EQ(got.shape, want[i].shape);
      EXPECT_LE(graph::worst_error_ratio(got.data, want[i].data, rtol, atol), 1.0);
    }
  }
}

class GeneratedLogic : public testing::TestWithParam<LogicCase> {};

TEST_P(GeneratedLogic, MatchesReferenceOnEveryCpuTarget) {
  const LogicCase& c = GetParam();
  const graph::Graph g = logic_graph(c);
  for (uint64_t seed : {1u, 2u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<graph::Tensor> ins = logic_inputs(c, g, seed);
    // Rounding, comparisons, logic and Where are exact; Pow within a few float roundings.
    const bool pow = c.name.rfind("pow", 0) == 0;
    expect_matches_on_every_target(g, g, ins, 1, pow ? 1e-5 : 0.0, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Logic, GeneratedLogic, testing::ValuesIn(logic_cases()),
                         [](const testing::TestParamInfo<LogicCase>& i) { return i.param.name; });

// The inputs are what they claim: Round sees exact halves of both signs, the comparisons equal
// elements, so a kernel that rounds halves away from zero or compares strictly fails.
TEST(GeneratedLogic, InputsHoldHalvesAndEqualElements) {
  for (const LogicCase& c : logic_cases()) {
    const graph::Graph g = logic_graph(c);
    const std::vector<graph::Tensor> ins = logic_inputs(c, g, 1);
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i].data.size() < 40) continue;  // too few to count on
      int halves_pos = 0, halves_neg = 0, equal = 0;
      for (size_t k = 0; k < ins[i].data.size(); ++k) {
        const float v = ins[i].data[k];
        if (v - std::floor(v) == 0.5f) ++(v > 0 ? halves_pos : halves_neg);
        if (i > 0 && v == ins[0].data[k % ins[0].data.size()]) ++equal;
      }
      if (c.draws[i] == Draw::halves) {
        EXPECT_GT(halves_pos, 2) << c.name;
        EXPECT_GT(halves_neg, 2) << c.name;
      }
      if (c.draws[i] == Draw::like_a) EXPECT_GT(equal, 2) << c.name;
    }
  }
}

// Round is half to even: the generated kernel on exact halves against values written out.
TEST(GeneratedLogic, RoundHalvesToEven) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {8}, graph::Layout::any);
  b.output(b.op("round", graph::ElementwiseChain{{{graph::ChainStepKind::round, 0, 0}}}, {x}));
  const graph::Graph g = b.finish();
  const std::vector<float> in = {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.5f, -3.5f};
  ModelOptions o;
  o.generate_kernels = codegen::kernel_generator({{}, KILN_TEST_CACHE_DIR, nullptr});
  Model m(g, o);
  ASSERT_TRUE(m.run({{{8}, graph::Layout::any, in}}));
  const TensorView out = m.output(0);
  for (size_t k = 0; k < in.size(); ++k) {  // the even one of the two neighbours
    const float lo = std::floor(in[k]), hi = std::ceil(in[k]);
    EXPECT_EQ(out.data[k], std::fmod(lo, 2.0f) == 0.0f ? lo : hi) << in[k];
  }
}

// conv -> Greater(t) -> Not: the passes fuse both into the conv's post steps, one kernel that
// matches the unfused graph's reference.
TEST(GeneratedLogic, ComparisonFusesIntoConvolution) {
  const graph::Graph g = conv_compare_graph(true);
  const graph::Graph fused = graph::fuse_elementwise_chains(graph::fuse_epilogues(g));
  ASSERT_EQ(fused.num_nodes(), 1u) << graph::dump(fused);
  const auto& post = std::get<graph::Conv2d>(fused.node(graph::NodeId{0}).op).post;
  ASSERT_EQ(post.size(), 2u) << graph::dump(fused);
  EXPECT_EQ(post[0].kind, graph::ChainStepKind::greater);
  EXPECT_EQ(post[1].kind, graph::ChainStepKind::logical_not);
  const graph::Value& x = g.value(g.inputs[0]);
  const std::vector<graph::Tensor> ins = {
      {x.shape, x.layout, graph::random_uniform(graph::num_elements(x.shape), -1.0f, 1.0f, 5)}};
  expect_matches_on_every_target(fused, g, ins, 1, 0.0, 0.0);
}

// Where(conv > t, conv, y) through all the passes: the comparison a chain of one step, Where
// its own kernel, every kernel generated.
TEST(GeneratedLogic, WhereAfterConvolutionThroughThePasses) {
  const graph::Graph g = conv_compare_graph(false);
  const graph::Graph optimized = graph::run_passes(g);
  std::vector<graph::Tensor> ins;
  for (graph::ValueId id : g.inputs) {
    const graph::Value& v = g.value(id);
    ins.push_back({v.shape, v.layout,
                   graph::random_uniform(graph::num_elements(v.shape), -1.0f, 1.0f, 8 + id.index)});
  }
  bool has_where = false;
  for (uint32_t i = 0; i < optimized.num_nodes(); ++i)
    has_where |= std::holds_alternative<graph::Where>(optimized.node(graph::NodeId{i}).op);
  EXPECT_TRUE(has_where) << graph::dump(optimized);
  const size_t kernels = Model(optimized,
                               [] {
                                 ModelOptions o;
                                 o.lower_only = true;
                                 return o;
                               }())
                             .kernels()
                             .size();
  expect_matches_on_every_target(optimized, g, ins, kernels, 1e-5, 1e-6);
}

}  // namespace
}  // namespace kiln
