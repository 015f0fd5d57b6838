// fuse_gelu: exact GELU in its exporter spellings becomes one gelu step with the same numbers,
// which then fuses into a chain like any activation; near misses are left alone.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/builder.h"
#include "graph/passes/passes.h"
#include "graph/passes/pipeline.h"
#include "graph/verify.h"
#include "graph_test_util.h"

namespace kiln::graph {
namespace {

using testing_util::count_ops;
using testing_util::expect_same_outputs;
using testing_util::random_inputs;

enum class Grouping { mul_x_then_half, half_x_first, half_gate_first };

// relu(x) -> GELU spelled as `grouping`, with x / sqrt 2 (or x * (1 / sqrt 2)) in the Erf.
Graph gelu_graph(Grouping grouping, bool divide, float sqrt2 = std::sqrt(2.0f)) {
  GraphBuilder b;
  const ValueId in = b.input("in", {2, 3, 5, 7}, Layout::nchw);
  const ValueId x = b.op("tanh", ElementwiseChain{{{ChainStepKind::tanh, 0, 0}}}, {in});
  auto scalar = [&](const std::string& name, float v) { return b.constant(name, {}, {v}); };
  const ValueId arg = divide ? b.op("div", Binary{BinaryOp::div}, {x, scalar("sqrt2", sqrt2)})
                             : b.op("mul_s", Binary{BinaryOp::mul}, {scalar("rsqrt2", 1.0f / sqrt2), x});
  const ValueId e = b.op("erf", ElementwiseChain{{{ChainStepKind::erf, 0, 0}}}, {arg});
  const ValueId a = b.op("one_plus", Binary{BinaryOp::add}, {scalar("one", 1.0f), e});
  const ValueId half = scalar("half", 0.5f);
  ValueId y;
  switch (grouping) {
    case Grouping::mul_x_then_half:
      y = b.op("m2", Binary{BinaryOp::mul}, {b.op("m1", Binary{BinaryOp::mul}, {x, a}), half});
      break;
    case Grouping::half_x_first:
      y = b.op("m1", Binary{BinaryOp::mul}, {b.op("h", Binary{BinaryOp::mul}, {half, x}), a});
      break;
    case Grouping::half_gate_first:
      y = b.op("m2", Binary{BinaryOp::mul}, {x, b.op("m1", Binary{BinaryOp::mul}, {a, half})});
      break;
  }
  b.output(y);
  return b.finish();
}

TEST(FuseGelu, EverySpellingBecomesOneStep) {
  for (Grouping grouping : {Grouping::mul_x_then_half, Grouping::half_x_first, Grouping::half_gate_first})
    for (bool divide : {true, false}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(grouping)) + (divide ? " div" : " mul"));
      const Graph g = gelu_graph(grouping, divide);
      const Graph fused = fuse_gelu(g);
      verify(fused);
      ASSERT_EQ(fused.num_nodes(), 2u) << dump(fused);
      const auto* c = std::get_if<ElementwiseChain>(&fused.node(NodeId{1}).op);
      ASSERT_TRUE(c && c->steps.size() == 1) << dump(fused);
      EXPECT_EQ(c->steps[0].kind, ChainStepKind::gelu);
      expect_same_outputs(g, fused, random_inputs(g, 3, -4.0f, 4.0f), 1e-5, 1e-6);
      // Then one chain (tanh + gelu) through the whole pipeline.
      const Graph opt = run_passes(g);
      EXPECT_EQ(count_ops<Binary>(opt), 0) << dump(opt);
      EXPECT_EQ(count_ops<ElementwiseChain>(opt), 1) << dump(opt);
    }
}

TEST(FuseGelu, NearMissesAreLeftAlone) {
  // Another constant than sqrt 2: not GELU.
  const Graph g = gelu_graph(Grouping::mul_x_then_half, true, 1.5f);
  EXPECT_EQ(fuse_gelu(g).num_nodes(), g.num_nodes());
  // The Erf's output also read elsewhere.
  GraphBuilder b;
  const ValueId x = b.input("x", {4, 8}, Layout::any);
  const ValueId e = b.op("erf", ElementwiseChain{{{ChainStepKind::erf, 0, 0}}},
                         {b.op("div", Binary{BinaryOp::div}, {x, b.constant("s", {}, {std::sqrt(2.0f)})})});
  const ValueId a = b.op("add", Binary{BinaryOp::add}, {e, b.constant("one", {}, {1.0f})});
  b.output(b.op("m2", Binary{BinaryOp::mul}, {b.op("m1", Binary{BinaryOp::mul}, {x, a}), b.constant("h", {}, {0.5f})}));
  b.output(e);
  const Graph g2 = b.finish();
  EXPECT_EQ(fuse_gelu(g2).num_nodes(), g2.num_nodes());
}

}  // namespace
}  // namespace kiln::graph
