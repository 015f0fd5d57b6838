// simplify_exported_ops: a mean or max over H and W of a 4-D image becomes a GlobalPool, and a
// Tile that only broadcasting binary ops read (against an operand of its shape) is left out.
// fold_constants: arithmetic on constants is computed once.
// Each rewrite is checked for its structure and against the reference on random inputs, and
// the whole pipeline for the squeeze-and-excitation and ECA blocks timm exports: no layout
// transform around them.
#include <gtest/gtest.h>

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

TEST(SimplifyExportedOps, SpatialMeanAndMaxBecomeGlobalPools) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 5, 7, 6});
  b.output(b.op("mean_hw", Reduce{{2, 3}, true, ReduceKind::mean}, {x}));
  b.output(b.op("max_hw_flat", Reduce{{2, 3}, false, ReduceKind::max}, {x}));
  b.output(b.op("mean_c", Reduce{{1}, true, ReduceKind::mean}, {x}));    // not spatial
  b.output(b.op("sum_hw", Reduce{{2, 3}, true, ReduceKind::sum}, {x}));  // not a pooling
  b.output(b.op("mean_w", Reduce{{3}, false, ReduceKind::mean}, {x}));   // one axis
  const Graph g = b.finish();
  const Graph s = simplify_exported_ops(g);
  verify(s);
  EXPECT_EQ(count_ops<GlobalPool>(s), 2) << dump(s);
  EXPECT_EQ(count_ops<Reduce>(s), 3) << dump(s);
  EXPECT_EQ(count_ops<Reshape>(s), 1) << dump(s);  // the max's unit axes dropped
  EXPECT_EQ(s.value(s.outputs[1]).shape, (Shape{2, 5}));
  expect_same_outputs(g, s, random_inputs(g, 31, -2.0f, 3.0f), 1e-6, 1e-6);
}

TEST(SimplifyExportedOps, ExpandReadOnlyByBroadcastingOpsIsLeftOut) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 4, 5, 6});
  const ValueId y = b.input("y", {1, 4, 1, 1});
  const ValueId z = b.input("z", {1, 4, 1, 6});
  const ValueId tiled = b.op("expand", Tile{{1, 1, 5, 6}}, {y});
  b.output(b.op("scaled", Binary{BinaryOp::mul}, {x, tiled}));
  b.output(b.op("shifted", Binary{BinaryOp::sub}, {tiled, x}));
  // Kept: a Tile another kind of op reads, and one whose reader's other operand is smaller.
  const ValueId kept = b.op("expand_relu", Tile{{1, 1, 5, 6}}, {y});
  b.output(b.relu("relu", kept));
  b.output(b.op("kept_mul", Binary{BinaryOp::mul}, {x, kept}));
  const ValueId small = b.op("expand_small", Tile{{1, 1, 5, 1}}, {z});
  b.output(b.op("small_add", Binary{BinaryOp::add}, {small, z}));
  const Graph g = b.finish();
  const Graph s = simplify_exported_ops(g);
  verify(s);
  EXPECT_EQ(count_ops<Tile>(s), 2) << dump(s);
  expect_same_outputs(g, s, random_inputs(g, 32), 1e-6, 1e-6);
}

// timm's SE (x * sigmoid(conv(relu(conv(x.mean((2, 3), keepdim=True)))))) after a convolution
// and ECA's (the mean flattened, a 1-D convolution over the channels as [N, 1, C], the gate
// reshaped to [N, C, 1, 1] and expanded) after another: through the whole pipeline, no layout
// transform is left (the first convolution reads the 3-channel NCHW input in place, and the
// gates, one pixel each, change layout by relabelling).
TEST(SimplifyExportedOps, SqueezeExcitationAndEcaBlocksStayNhwc) {
  const int64_t c = 16;
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 12, 12});
  auto conv = [&](const std::string& name, ValueId in, int64_t ci, int64_t co, int64_t k,
                  uint64_t seed) {
    const ValueId w = b.constant(name + "_w", {co, ci, k, k},
                                 random_uniform(co * ci * k * k, -0.5f, 0.5f, seed), Layout::oihw);
    const ValueId bias = b.constant(name + "_b", {co}, random_uniform(co, -0.2f, 0.2f, seed + 1));
    Conv2d a;
    a.pad_top = a.pad_left = a.pad_bottom = a.pad_right = static_cast<int>(k / 2);
    return b.conv2d(name, in, w, bias, a);
  };
  const ValueId c1 = b.relu("c1_relu", conv("c1", x, 3, c, 3, 40));
  // SE.
  const ValueId pooled = b.op("se_mean", Reduce{{2, 3}, true, ReduceKind::mean}, {c1});
  const ValueId reduced = b.relu("se_relu", conv("se_reduce", pooled, c, 4, 1, 42));
  const ValueId gate = b.op("se_gate", Sigmoid{}, {conv("se_expand", reduced, 4, c, 1, 44)});
  const ValueId se = b.op("se_mul", Binary{BinaryOp::mul}, {c1, gate});
  const ValueId c2 = conv("c2", se, c, c, 3, 46);
  // ECA.
  const ValueId flat = b.op("eca_mean", Reduce{{2, 3}, false, ReduceKind::mean}, {c2});
  const ValueId row = b.op("eca_row", Reshape{{1, 1, 1, c}}, {flat});
  const ValueId band =
      b.constant("eca_w", {1, 1, 1, 3}, random_uniform(3, -1.0f, 1.0f, 48), Layout::oihw);
  Conv2d along;
  along.pad_left = along.pad_right = 1;
  const ValueId mixed = b.conv2d("eca_conv", row, band, b.constant("eca_b", {1}, {0.1f}), along);
  const ValueId eca_gate = b.op("eca_gate", Sigmoid{}, {mixed});
  const ValueId per_channel = b.op("eca_channels", Reshape{{1, c, 1, 1}}, {eca_gate});
  const ValueId expanded = b.op("eca_expand", Tile{{1, 1, 12, 12}}, {per_channel});
  const ValueId eca = b.op("eca_mul", Binary{BinaryOp::mul}, {c2, expanded});
  b.output(b.relu("out", b.op("residual", Binary{BinaryOp::add}, {eca, se})));
  const Graph g = b.finish();
  const Graph p = run_passes(g);
  int transforms = 0;
  for (const Node& n : p.nodes()) transforms += std::holds_alternative<LayoutTransform>(n.op);
  EXPECT_EQ(transforms, 0) << dump(p);
  EXPECT_EQ(count_ops<Tile>(p), 0) << dump(p);
  EXPECT_EQ(count_ops<Reduce>(p), 0) << dump(p);
  expect_same_outputs(g, p, random_inputs(g, 49), 1e-5, 1e-5);
}

// fold_constants on EfficientDet's fast normalized fusion: ReLU of a parameter vector, divided
// by its sum plus epsilon, each weight taken out (a Slice and a Reshape to a scalar) and
// multiplied with a branch. Folded, the weights are constants; through the whole pipeline the
// branches stay NHWC (no layout transform but the input's and the output's). Kept: a Tile of a
// constant that would grow it (40 x 40 of one value per channel), and a graph output computed
// from constants.
TEST(FoldConstants, FusionWeightsBecomeConstantsAndBranchesStayNhwc) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 8, 6, 6});
  auto conv = [&](const std::string& name, ValueId in, uint64_t seed) {
    const ValueId w =
        b.constant(name + "_w", {8, 8, 3, 3}, random_uniform(576, -0.3f, 0.3f, seed), Layout::oihw);
    Conv2d a;
    a.pad_top = a.pad_left = a.pad_bottom = a.pad_right = 1;
    return b.relu(
        name + "_relu",
        b.conv2d(name, in, w,
                 b.constant(name + "_b", {8}, random_uniform(8, -0.2f, 0.2f, seed + 1)), a));
  };
  const ValueId p = b.relu("w_relu", b.constant("fusion_w", {2}, {0.8f, 1.7f}));
  const ValueId total = b.op("w_sum", Reduce{{0}, false, ReduceKind::sum}, {p});
  const ValueId norm =
      b.op("w_div", Binary{BinaryOp::div},
           {p, b.op("w_eps", Binary{BinaryOp::add}, {total, b.constant("eps", {}, {1e-4f})})});
  auto weight = [&](int64_t i) {
    const ValueId one = b.op("w_take" + std::to_string(i), Slice{{i}, {i + 1}, {1}}, {norm});
    return b.op("w_scalar" + std::to_string(i), Reshape{{}}, {one});
  };
  const ValueId fused =
      b.op("fuse", Binary{BinaryOp::add},
           {b.op("w0_mul", Binary{BinaryOp::mul}, {weight(0), conv("a", x, 60)}),
            b.op("w1_mul", Binary{BinaryOp::mul}, {weight(1), conv("b", x, 62)})});
  b.output(conv("out", fused, 64));
  const ValueId grown =
      b.op("grow", Tile{{1, 1, 40, 40}},
           {b.constant("per_channel", {1, 8, 1, 1}, random_uniform(8, 0.5f, 1.5f, 66))});
  b.output(b.op("grown_sum", Reduce{{2, 3}, true, ReduceKind::sum}, {grown}));
  b.output(b.op("constant_output", Binary{BinaryOp::mul}, {p, p}));
  const Graph g = b.finish();
  const Graph f = fold_constants(g);
  verify(f);
  EXPECT_EQ(count_ops<Slice>(f), 0) << dump(f);
  EXPECT_EQ(count_ops<Tile>(f), 1) << dump(f);
  EXPECT_EQ(count_ops<Reduce>(f), 1) << dump(f);  // grown_sum
  EXPECT_EQ(count_ops<Binary>(f), 4) << dump(f);  // the two products, the sum, the output's
  expect_same_outputs(g, f, random_inputs(g, 68), 1e-6, 1e-6);
  const Graph all = run_passes(g);
  int transforms = 0;
  for (const Node& n : all.nodes())
    transforms += std::holds_alternative<LayoutTransform>(n.op) &&
                  !all.is_graph_input(n.inputs[0]) && !all.is_graph_output(n.outputs[0]);
  EXPECT_EQ(transforms, 0) << dump(all);
  expect_same_outputs(g, all, random_inputs(g, 70), 1e-5, 1e-5);
}

}  // namespace
}  // namespace kiln::graph
