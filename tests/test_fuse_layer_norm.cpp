// fuse_layer_norm: the decomposed LayerNorm exporters write becomes one LayerNorm node with the
// same numbers; near misses are left alone.
#include <gtest/gtest.h>

#include "graph/builder.h"
#include "graph/passes/passes.h"
#include "graph/verify.h"
#include "graph_test_util.h"

namespace kiln::graph {
namespace {

using testing_util::count_ops;
using testing_util::expect_same_outputs;
using testing_util::random_inputs;

enum class Square { pow2, self_mul, pow3 };

struct Spelling {
  Square square = Square::pow2;
  std::vector<int> mean_axes = {3}, var_axes = {3};
  bool affine = true;
  bool eps_first = false;  // eps + var instead of var + eps
  bool runtime_exponent = false;
};

// x [2, 5, 6, 16] -> the decomposed LayerNorm of `s`, as torch.onnx writes it (Pow of a scalar
// constant, Reduce with keepdims, a scalar epsilon).
Graph decomposed(const Spelling& s) {
  GraphBuilder b;
  const Shape shape = {2, 5, 6, 16};
  const ValueId x = b.input("x", shape, Layout::nchw);
  const ValueId mean = b.op("mean", Reduce{s.mean_axes, true}, {x});
  const ValueId d = b.op("sub", Binary{BinaryOp::sub}, {x, mean});
  ValueId sq;
  if (s.runtime_exponent) {
    sq = b.op("square", Binary{BinaryOp::mul}, {d, b.input("p", {1})});
  } else if (s.square == Square::self_mul) {
    sq = b.op("square", Binary{BinaryOp::mul}, {d, d});
  } else {
    const float p = s.square == Square::pow2 ? 2.0f : 3.0f;
    sq = b.op("pow", ElementwiseChain{{{ChainStepKind::pow, p, 0}}}, {d});
  }
  const ValueId var = b.op("var", Reduce{s.var_axes, true}, {sq});
  const ValueId eps = b.constant("eps", {}, {1e-6f});
  const ValueId ve = b.op("add_eps", Binary{BinaryOp::add}, s.eps_first ? std::vector<ValueId>{eps, var}
                                                                        : std::vector<ValueId>{var, eps});
  const ValueId sd = b.op("sqrt", ElementwiseChain{{{ChainStepKind::sqrt, 0, 0}}}, {ve});
  ValueId y = b.op("div", Binary{BinaryOp::div}, {d, sd});
  if (s.affine) {
    y = b.op("gamma", Binary{BinaryOp::mul}, {y, b.constant("g", {16}, random_uniform(16, 0.5f, 1.5f, 3))});
    y = b.op("beta", Binary{BinaryOp::add}, {b.constant("bt", {16}, random_uniform(16, -0.5f, 0.5f, 4)), y});
  }
  b.output(y);
  return b.finish();
}

void expect_one_layer_norm(const Spelling& s, int axis, size_t inputs) {
  const Graph g = decomposed(s);
  const Graph fused = fuse_layer_norm(g);
  verify(fused);
  ASSERT_EQ(fused.num_nodes(), 1u) << dump(fused);
  const Node& n = fused.node(NodeId{0});
  ASSERT_TRUE(std::holds_alternative<LayerNorm>(n.op)) << dump(fused);
  EXPECT_EQ(std::get<LayerNorm>(n.op).axis, axis);
  EXPECT_EQ(std::get<LayerNorm>(n.op).epsilon, 1e-6f);
  EXPECT_EQ(n.inputs.size(), inputs);
  EXPECT_EQ(n.computes.front(), "reducemean");
  expect_same_outputs(g, fused, random_inputs(g, 5, -2.0f, 3.0f), 1e-5, 1e-5);
}

TEST(FuseLayerNorm, PowSpellingWithAffineBecomesOneNode) {
  expect_one_layer_norm(Spelling{}, 3, 3);
}

TEST(FuseLayerNorm, SelfMulSpellingEpsilonFirstWithoutAffine) {
  Spelling s;
  s.square = Square::self_mul;
  s.affine = false;
  s.eps_first = true;
  expect_one_layer_norm(s, 3, 2);  // a scale of ones is made
}

TEST(FuseLayerNorm, TrailingAxesPairBecomesOneNode) {
  Spelling s;
  s.mean_axes = s.var_axes = {2, 3};
  s.affine = false;
  expect_one_layer_norm(s, 2, 2);
}

// Near misses: the numbers would differ, so the graph must stay as it is.
TEST(FuseLayerNorm, NearMissesAreLeftAlone) {
  std::vector<Spelling> misses(4);
  misses[0].var_axes = {2, 3};        // the variance over other axes than the mean
  misses[1].mean_axes = misses[1].var_axes = {2};  // not the trailing axes
  misses[2].square = Square::pow3;    // not a square
  misses[3].runtime_exponent = true;  // d * p with p known only at run time
  for (size_t i = 0; i < misses.size(); ++i) {
    const Graph g = decomposed(misses[i]);
    const Graph after = fuse_layer_norm(g);
    EXPECT_EQ(count_ops<LayerNorm>(after), 0) << "miss " << i << "\n" << dump(after);
    EXPECT_EQ(after.num_nodes(), g.num_nodes()) << "miss " << i;
  }
}

// An intermediate read outside the pattern (here the deviation, also a graph output) keeps it.
TEST(FuseLayerNorm, IntermediateReadElsewhereIsLeftAlone) {
  GraphBuilder b;
  const ValueId x = b.input("x", {4, 8}, Layout::any);
  const ValueId mean = b.op("mean", Reduce{{1}, true}, {x});
  const ValueId d = b.op("sub", Binary{BinaryOp::sub}, {x, mean});
  const ValueId var = b.op("var", Reduce{{1}, true}, {b.op("sq", Binary{BinaryOp::mul}, {d, d})});
  const ValueId ve = b.op("add", Binary{BinaryOp::add}, {var, b.constant("eps", {1}, {1e-5f})});
  b.output(b.op("div", Binary{BinaryOp::div}, {d, b.op("sqrt", ElementwiseChain{{{ChainStepKind::sqrt, 0, 0}}}, {ve})}));
  b.output(d);
  const Graph g = b.finish();
  EXPECT_EQ(count_ops<LayerNorm>(fuse_layer_norm(g)), 0);
}

}  // namespace
}  // namespace kiln::graph
