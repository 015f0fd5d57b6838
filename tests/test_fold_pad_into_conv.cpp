// fold_pad_into_conv: zero spatial Pad -> Conv becomes one Conv with larger padding.
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

ValueId conv(GraphBuilder& b, const std::string& name, ValueId x, int64_t ci, int64_t co,
             int pad, uint64_t seed) {
  const ValueId w = b.constant(name + "_w", {co, ci, 3, 3}, random_uniform(co * ci * 9, -1, 1, seed),
                               Layout::oihw);
  const ValueId bias = b.constant(name + "_b", {co}, random_uniform(co, -0.5f, 0.5f, seed + 1));
  Conv2d a;
  a.pad_top = a.pad_left = a.pad_bottom = a.pad_right = pad;
  return b.conv2d(name, x, w, bias, a);
}

TEST(FoldPadIntoConv, AsymmetricZeroPadAddsToConvPadding) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 7, 6});
  const ValueId p = b.op("pad", Pad{{0, 0, 1, 2, 0, 0, 3, 0}, 0.0f}, {x});
  b.output(conv(b, "c", p, 3, 5, 1, 7));
  const Graph g = b.finish();
  const Graph folded = fold_pad_into_conv(g);
  verify(folded);
  ASSERT_EQ(folded.num_nodes(), 1u);
  const auto& c = std::get<Conv2d>(folded.node(NodeId{0}).op);
  EXPECT_EQ(c.pad_top, 2);
  EXPECT_EQ(c.pad_left, 3);
  EXPECT_EQ(c.pad_bottom, 4);
  EXPECT_EQ(c.pad_right, 1);
  expect_same_outputs(g, folded, random_inputs(g, 8), 1e-6, 1e-6);
}

TEST(FoldPadIntoConv, KeptWhenNonZeroOrChannelPadOrOtherReader) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 5, 5});
  const ValueId nonzero = b.op("p1", Pad{{0, 0, 1, 1, 0, 0, 1, 1}, 0.5f}, {x});
  const ValueId channels = b.op("p2", Pad{{0, 1, 0, 0, 0, 0, 0, 0}, 0.0f}, {x});
  const ValueId shared = b.op("p3", Pad{{0, 0, 1, 1, 0, 0, 1, 1}, 0.0f}, {x});
  b.output(conv(b, "c1", nonzero, 3, 2, 0, 11));
  b.output(conv(b, "c2", channels, 4, 2, 0, 12));
  b.output(conv(b, "c3", shared, 3, 2, 0, 13));
  b.output(b.relu("r", shared));  // a non-conv reader keeps p3
  const Graph g = b.finish();
  const Graph folded = fold_pad_into_conv(g);
  EXPECT_EQ(count_ops<Pad>(folded), 3) << dump(folded);
  expect_same_outputs(g, folded, random_inputs(g, 14), 1e-6, 1e-6);
}

}  // namespace
}  // namespace kiln::graph
