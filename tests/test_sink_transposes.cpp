// matmul_to_conv, sink_transposes, and fold_batch_norm's per-channel Add/Mul: a channels-last
// linear layer becomes a 1x1 convolution, Transposes move below elementwise ops and cancel,
// tokens viewed as an image become relabels, and what they freed folds into the convolution. Every
// rewrite is checked against the reference interpreter on the graph before it, with random inputs.
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

ValueId random_constant(GraphBuilder& b, const std::string& name, Shape shape, uint64_t seed,
                        float lo = -0.5f, float hi = 0.5f) {
  const int64_t n = num_elements(shape);
  return b.constant(name, std::move(shape), random_uniform(n, lo, hi, seed));
}

ValueId random_weights(GraphBuilder& b, const std::string& name, Shape oihw, uint64_t seed) {
  const int64_t n = num_elements(oihw);
  return b.constant(name, std::move(oihw), random_uniform(n, -0.5f, 0.5f, seed), Layout::oihw);
}

ValueId conv1x1(GraphBuilder& b, const std::string& name, ValueId x, int64_t ci, int64_t co, uint64_t seed) {
  return b.conv2d(name, x, random_weights(b, name + "_w", {co, ci, 1, 1}, seed),
                  random_constant(b, name + "_b", {co}, seed + 1), Conv2d{});
}

// BatchNorm of x's channels (c of them) with random parameters.
ValueId random_batch_norm(GraphBuilder& b, const std::string& name, ValueId x, int64_t c,
                          uint64_t seed) {
  return b.batch_norm(name, x, random_constant(b, name + "_g", {c}, seed, 0.5f, 1.5f),
                      random_constant(b, name + "_b", {c}, seed + 1),
                      random_constant(b, name + "_m", {c}, seed + 2),
                      random_constant(b, name + "_v", {c}, seed + 3, 0.5f, 1.5f));
}

// The checks every rewritten graph passes: well-formed, same numbers as the original.
void expect_equivalent(const Graph& before, const Graph& after, uint64_t seed) {
  ASSERT_TRUE(verify_problems(after).empty()) << dump(after);
  expect_same_outputs(before, after, random_inputs(before, seed), 1e-5, 1e-6);
}

TEST(MatmulToConv, ChannelsLastLinearBecomesAConvBetweenTransposes) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 5, 3, 6});
  b.output(b.op("mm", MatMul{}, {x, random_constant(b, "w", {6, 4}, 1)}));
  const Graph before = b.finish();
  const Graph after = matmul_to_conv(before);
  EXPECT_EQ(count_ops<MatMul>(after), 0) << dump(after);
  EXPECT_EQ(count_ops<Conv2d>(after), 1) << dump(after);
  EXPECT_EQ(count_ops<Transpose>(after), 2) << dump(after);
  expect_equivalent(before, after, 2);
}

// Tokens by a constant, [B, T, K] or [T, K] x [K, M] (a transformer's linear layers): the
// tokens viewed as one row of an image, [1, B, T, K], between Reshapes (views).
TEST(MatmulToConv, TokenLinearBecomesAConvOfAnImageRow) {
  GraphBuilder b;
  b.output(b.op("mm3", MatMul{}, {b.input("x", {2, 5, 6}), random_constant(b, "w", {6, 4}, 1)}));
  b.output(b.op("mm2", MatMul{}, {b.input("t", {7, 6}), random_constant(b, "w2", {6, 3}, 2)}));
  const Graph before = b.finish();
  const Graph after = matmul_to_conv(before);
  EXPECT_EQ(count_ops<MatMul>(after), 0) << dump(after);
  EXPECT_EQ(count_ops<Conv2d>(after), 2) << dump(after);
  EXPECT_EQ(count_ops<Reshape>(after), 4) << dump(after);
  expect_equivalent(before, after, 3);
}

// LeViT's Linear -> BatchNorm1d: MatMul [B, T, K] x [K, M] -> Flatten to [B * T, M] ->
// BatchNorm -> Reshape back -> HardSwish. The BatchNorm moves onto the convolution's output,
// where fold_batch_norm folds it: one convolution, no BatchNorm, no elementwise kernel. A
// BatchNorm whose flattened input is also read elsewhere, or whose view regroups the last
// axis, stays where it is.
TEST(MatmulToConv, FlattenedBatchNormFoldsIntoTheTokenLinearLayer) {
  GraphBuilder b;
  const ValueId y =
      b.op("mm", MatMul{}, {b.input("x", {2, 5, 6}), random_constant(b, "w", {6, 4}, 1)});
  const ValueId flat = b.op("flatten", Reshape{{10, 4}}, {y});
  const ValueId back = b.op("back", Reshape{{2, 5, 4}}, {random_batch_norm(b, "bn", flat, 4, 2)});
  b.output(b.op("act", HardSwish{}, {back}));
  // Bias, then a flattened BatchNorm that is the graph's output.
  const ValueId z =
      b.op("mm_b", MatMul{}, {b.input("t", {3, 7, 6}), random_constant(b, "w_b", {6, 5}, 7)});
  const ValueId zb = b.op("bias", Binary{BinaryOp::add}, {z, random_constant(b, "bias_b", {5}, 8)});
  b.output(random_batch_norm(b, "bn_out", b.op("flatten_b", Reshape{{21, 5}}, {zb}), 5, 9));
  const Graph before = b.finish();
  const Graph after = matmul_to_conv(before);
  EXPECT_EQ(count_ops<MatMul>(after), 0) << dump(after);
  expect_equivalent(before, after, 4);
  const Graph optimized = run_passes(before);
  EXPECT_EQ(count_ops<BatchNorm>(optimized), 0) << dump(optimized);
  EXPECT_EQ(count_ops<Binary>(optimized), 0) << dump(optimized);
  EXPECT_EQ(count_ops<Conv2d>(optimized), 2) << dump(optimized);
  EXPECT_EQ(count_ops<HardSwish>(optimized), 0) << dump(optimized);  // in the epilogue
  expect_equivalent(before, optimized, 5);

  // The flattened tokens also read by another node; a view to [5, 8] regroups the channels.
  GraphBuilder s;
  const ValueId u =
      s.op("mm", MatMul{}, {s.input("x", {2, 5, 6}), random_constant(s, "w", {6, 4}, 1)});
  const ValueId uf = s.op("flatten", Reshape{{10, 4}}, {u});
  s.output(random_batch_norm(s, "bn", uf, 4, 2));
  s.output(s.op("other", Relu{}, {uf}));
  const ValueId v =
      s.op("mm2", MatMul{}, {s.input("x2", {2, 5, 6}), random_constant(s, "w2", {6, 4}, 3)});
  s.output(random_batch_norm(s, "bn2", s.op("regroup", Reshape{{5, 8}}, {v}), 8, 4));
  const Graph stays = s.finish();
  EXPECT_EQ(count_ops<BatchNorm>(matmul_to_conv(stays)), 2) << dump(matmul_to_conv(stays));
  expect_equivalent(stays, matmul_to_conv(stays), 6);
}

// A transformer's residual connection after a linear layer, tokens + gamma * (tokens x W + b)
// - s, and after LeViT's linear layer with its flattened BatchNorm: the per-channel Mul and Sub
// fold into the weights, the Add goes into the convolution (fuse_epilogues), no Binary kernel
// is left. A residual operand computed after the MatMul
// in the node order stays a separate Add.
TEST(MatmulToConv, ResidualAddsAfterTokenLinearLayersJoinTheConvolution) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 5, 6});
  const ValueId y = b.op("mm", MatMul{}, {x, random_constant(b, "w", {6, 6}, 1)});
  const ValueId yb = b.op("bias", Binary{BinaryOp::add}, {y, random_constant(b, "bias_c", {6}, 2)});
  // A layer scale (XCiT's, CaiT's gamma * x) and a per-channel Sub between bias and residual.
  const ValueId scaled =
      b.op("layer_scale", Binary{BinaryOp::mul}, {random_constant(b, "gamma", {1, 1, 6}, 11), yb});
  const ValueId shifted =
      b.op("shift", Binary{BinaryOp::sub}, {scaled, random_constant(b, "shift_c", {6}, 12)});
  const ValueId h = b.op("residual", Binary{BinaryOp::add}, {x, shifted});
  const ValueId z = b.op("mm2", MatMul{}, {h, random_constant(b, "w2", {6, 6}, 3)});
  const ValueId flat = b.op("flatten", Reshape{{10, 6}}, {z});
  const ValueId n = random_batch_norm(b, "bn", flat, 6, 4);
  b.output(b.op("residual2", Binary{BinaryOp::add}, {b.op("back", Reshape{{2, 5, 6}}, {n}), h}));
  const Graph before = b.finish();
  expect_equivalent(before, matmul_to_conv(before), 8);
  const Graph optimized = run_passes(before);
  EXPECT_EQ(count_ops<Binary>(optimized), 0) << dump(optimized);
  EXPECT_EQ(count_ops<BatchNorm>(optimized), 0) << dump(optimized);
  EXPECT_EQ(count_ops<Conv2d>(optimized), 2) << dump(optimized);
  expect_equivalent(before, optimized, 9);

  GraphBuilder late;
  const ValueId u =
      late.op("mm", MatMul{}, {late.input("x", {2, 5, 6}), random_constant(late, "w", {6, 4}, 1)});
  const ValueId r = late.op("later", Relu{}, {late.input("r", {2, 5, 4})});
  late.output(late.op("residual", Binary{BinaryOp::add}, {u, r}));
  const Graph stays = late.finish();
  EXPECT_EQ(count_ops<Binary>(matmul_to_conv(stays)), 1) << dump(matmul_to_conv(stays));
  expect_equivalent(stays, run_passes(stays), 10);
}

// PVT-v2's MLP: fc1 on tokens [B, H * W, C], x.transpose(1, 2).reshape(B, C, H, W), a 3x3
// depthwise convolution, x.flatten(2).transpose(1, 2), GELU, fc2. The token views of the image
// are relabels of its NHWC bytes: no Transpose or layout transform is left, and the GELU is in
// the depthwise convolution's epilogue. A transposed view that something else also reads keeps
// its Transpose.
TEST(SinkTransposes, TokensViewedAsAnImageAreRelabels) {
  GraphBuilder b;
  const ValueId tokens = b.input("tokens", {2, 12, 8});
  const ValueId h = b.op("fc1", MatMul{}, {tokens, random_constant(b, "w1", {8, 16}, 1)});
  const ValueId image =
      b.op("to_image", Reshape{{2, 16, 3, 4}}, {b.op("channels_first", Transpose{{0, 2, 1}}, {h})});
  Conv2d dw;
  dw.groups = 16;
  dw.pad_top = dw.pad_left = dw.pad_bottom = dw.pad_right = 1;
  const ValueId d = b.conv2d("dwconv", image, random_weights(b, "dw_w", {16, 1, 3, 3}, 2),
                             random_constant(b, "dw_b", {16}, 3), dw);
  const ValueId back =
      b.op("to_tokens", Transpose{{0, 2, 1}}, {b.op("flatten", Reshape{{2, 16, 12}}, {d})});
  const ValueId act = b.op("gelu", ElementwiseChain{{ChainStep{ChainStepKind::gelu}}}, {back});
  b.output(b.op("fc2", MatMul{}, {act, random_constant(b, "w2", {16, 8}, 4)}));
  const Graph before = b.finish();
  expect_equivalent(before, sink_transposes(before), 5);
  const Graph optimized = run_passes(before);
  EXPECT_EQ(count_ops<Transpose>(optimized), 0) << dump(optimized);
  EXPECT_EQ(count_ops<LayoutTransform>(optimized), 0) << dump(optimized);
  EXPECT_EQ(count_ops<ElementwiseChain>(optimized), 0) << dump(optimized);
  EXPECT_EQ(count_ops<Conv2d>(optimized), 3) << dump(optimized);
  expect_equivalent(before, optimized, 6);

  GraphBuilder s;
  const ValueId t = s.input("tokens", {1, 12, 8});
  const ValueId cf = s.op("channels_first", Transpose{{0, 2, 1}}, {t});
  s.output(s.op("to_image", Reshape{{1, 8, 3, 4}}, {cf}));
  s.output(s.op("other", Relu{}, {cf}));
  const Graph shared = s.finish();
  EXPECT_EQ(count_ops<Transpose>(sink_transposes(shared)), 1) << dump(sink_transposes(shared));
  expect_equivalent(shared, run_passes(shared), 7);
}

TEST(MatmulToConv, OtherMatMulsAreLeftAlone) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 6, 5});
  const ValueId y = b.input("y", {2, 5, 3, 6});
  b.output(b.op("constant_left", MatMul{}, {random_constant(b, "w", {4, 6}, 1), x}));
  b.output(b.op("runtime_w", MatMul{}, {y, b.input("w2", {6, 4})}));  // weights not constant
  const Graph before = b.finish();
  EXPECT_EQ(count_ops<MatMul>(matmul_to_conv(before)), 2);
}

// conv -> permute(0, 2, 3, 1) -> + bias[C] -> sigmoid -> * scale[C] -> permute(0, 3, 1, 2):
// both Transposes meet and cancel; the Binary constants are re-laid-out to [C, 1, 1].
TEST(SinkTransposes, InverseTransposesCancelAcrossElementwiseOps) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 4, 5});
  const ValueId c = conv1x1(b, "c", x, 3, 6, 1);
  const ValueId t = b.op("to_cl", Transpose{{0, 2, 3, 1}}, {c});
  const ValueId a = b.op("bias", Binary{BinaryOp::add}, {t, random_constant(b, "bias_c", {6}, 3)});
  const ValueId s = b.op("sig", Sigmoid{}, {a});
  const ValueId m = b.op("scale", Binary{BinaryOp::mul}, {random_constant(b, "scale_c", {1, 1, 6}, 4), s});
  b.output(b.op("to_cf", Transpose{{0, 3, 1, 2}}, {m}));
  const Graph before = b.finish();
  const Graph after = sink_transposes(before);
  EXPECT_EQ(count_ops<Transpose>(after), 0) << dump(after);
  EXPECT_EQ(count_ops<Reshape>(after), 1) << dump(after);  // the graph output: a view
  EXPECT_EQ(after.num_nodes(), 5u) << dump(after);
  expect_equivalent(before, after, 5);
}

TEST(SinkTransposes, TransposesCompose) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 4, 5});
  const ValueId t1 = b.op("t1", Transpose{{0, 2, 3, 1}}, {x});
  b.output(b.op("t2", Transpose{{1, 0, 3, 2}}, {t1}));
  const Graph before = b.finish();
  const Graph after = sink_transposes(before);
  EXPECT_EQ(count_ops<Transpose>(after), 1) << dump(after);
  expect_equivalent(before, after, 6);

  // Max and Min by a per-channel constant are not affine: they stay.
  for (BinaryOp op : {BinaryOp::max, BinaryOp::min}) {
    GraphBuilder m;
    const ValueId y = conv1x1(m, "c", m.input("x", {1, 3, 4, 4}), 3, 6, 7);
    m.output(m.op("clamp", Binary{op}, {y, random_constant(m, "bound", {6, 1, 1}, 8)}));
    const Graph g = m.finish();
    EXPECT_EQ(count_ops<Binary>(fold_batch_norm(g)), 1);
    expect_equivalent(g, fold_batch_norm(g), 9);
  }
}

TEST(SinkTransposes, BothOperandsTransposedAlike) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 4, 5});
  const ValueId y = b.input("y", {2, 3, 4, 5});
  const ValueId sum = b.op("sum", Binary{BinaryOp::sub},
                           {b.op("tx", Transpose{{0, 2, 3, 1}}, {x}), b.op("ty", Transpose{{0, 2, 3, 1}}, {y})});
  b.output(b.op("back", Transpose{{0, 3, 1, 2}}, {b.op("relu", Relu{}, {sum})}));
  const Graph before = b.finish();
  const Graph after = sink_transposes(before);
  EXPECT_EQ(count_ops<Transpose>(after), 0) << dump(after);
  expect_equivalent(before, after, 7);
}

// A Transpose read twice, one that is a graph output, and a constant that broadcasts the
// result to a larger shape: nothing moves (moving would copy more, or change the output).
TEST(SinkTransposes, NothingMovesWhereItWouldCopyMore) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 4, 5});
  const ValueId t = b.op("t", Transpose{{0, 2, 3, 1}}, {x});
  b.output(b.op("relu", Relu{}, {t}));
  b.output(b.op("sig", Sigmoid{}, {t}));
  const ValueId u = b.op("u", Transpose{{0, 2, 3, 1}}, {b.input("y", {1, 3, 4, 5})});
  b.output(b.op("grow", Binary{BinaryOp::add}, {u, random_constant(b, "c", {2, 1, 1, 1}, 8)}));
  const ValueId v = b.op("v", Transpose{{0, 2, 3, 1}}, {b.input("z", {2, 3, 4, 5})});
  b.output(v);
  b.output(b.op("tanh", ElementwiseChain{{{ChainStepKind::tanh, 0, 0}}}, {v}));
  const Graph before = b.finish();
  const Graph after = sink_transposes(before);
  EXPECT_EQ(after.num_nodes(), before.num_nodes()) << dump(after);
  EXPECT_EQ(count_ops<Transpose>(after), 3) << dump(after);
  expect_equivalent(before, after, 9);
}

// conv -> + bias[C, 1, 1] -> * gamma[1, C, 1, 1] -> / 2 -> - shift: all four fold into the
// conv's weights and bias. `c - conv` does not (it negates the conv).
TEST(FoldBatchNormPass, PerChannelConstantsFoldIntoTheConv) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 5, 4});
  const ValueId c = conv1x1(b, "c", x, 3, 6, 1);
  const ValueId a = b.op("add", Binary{BinaryOp::add}, {random_constant(b, "bias", {6, 1, 1}, 2), c});
  const ValueId m = b.op("mul", Binary{BinaryOp::mul}, {a, random_constant(b, "gamma", {1, 6, 1, 1}, 3, 0.5f, 2.0f)});
  const ValueId d = b.op("div", Binary{BinaryOp::div}, {m, b.constant("two", {}, {2.0f})});
  const ValueId s = b.op("sub", Binary{BinaryOp::sub}, {d, random_constant(b, "shift", {6, 1, 1}, 4)});
  b.output(b.op("rsub", Binary{BinaryOp::sub}, {random_constant(b, "r", {6, 1, 1}, 5), s}));
  const Graph before = b.finish();
  const Graph after = fold_batch_norm(before);
  EXPECT_EQ(count_ops<Binary>(after), 1) << dump(after);
  const auto& computes = after.node(NodeId{0}).computes;
  EXPECT_EQ(computes, (std::vector<std::string>{"conv2d", "add (folded)", "mul (folded)", "div (folded)",
                                                "sub (folded)"}));
  expect_equivalent(before, after, 6);
}

// ConvNeXt's MLP: LayerNorm over channels-last -> Linear + bias -> GELU -> Linear + bias ->
// layer scale -> permute back -> residual Add. Through the whole pipeline it is two
// convolution kernels (bias, GELU, scale and residual inside them) with no copy between.
TEST(SinkTransposes, ConvNextMlpBecomesTwoConvolutions) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 8, 5, 6});
  const ValueId dw = b.conv2d("dw", x, random_weights(b, "dw_w", {8, 1, 3, 3}, 1), random_constant(b, "dw_b", {8}, 2),
                              [] {
                                Conv2d c;
                                c.groups = 8;
                                c.pad_top = c.pad_left = c.pad_bottom = c.pad_right = 1;
                                return c;
                              }());
  const ValueId cl = b.op("to_cl", Transpose{{0, 2, 3, 1}}, {dw});
  const ValueId ln = b.op("ln", LayerNorm{3, 1e-6f},
                          {cl, random_constant(b, "g", {8}, 3, 0.5f, 1.5f), random_constant(b, "beta", {8}, 4)});
  const ValueId h = b.op("fc1", MatMul{}, {ln, random_constant(b, "w1", {8, 32}, 5)});
  const ValueId hb = b.op("fc1_bias", Binary{BinaryOp::add}, {h, random_constant(b, "b1", {32}, 6)});
  const ValueId act = b.op("gelu", ElementwiseChain{{{ChainStepKind::gelu, 0, 0}}}, {hb});
  const ValueId o = b.op("fc2", MatMul{}, {act, random_constant(b, "w2", {32, 8}, 7)});
  const ValueId ob = b.op("fc2_bias", Binary{BinaryOp::add}, {o, random_constant(b, "b2", {8}, 8)});
  const ValueId scaled = b.op("layer_scale", Binary{BinaryOp::mul}, {ob, random_constant(b, "ls", {8}, 9)});
  const ValueId back = b.op("to_cf", Transpose{{0, 3, 1, 2}}, {scaled});
  b.output(b.op("residual", Binary{BinaryOp::add}, {x, back}));
  const Graph before = b.finish();

  const Graph after = run_passes(before);
  EXPECT_EQ(count_ops<MatMul>(after), 0) << dump(after);
  EXPECT_EQ(count_ops<Binary>(after), 0) << dump(after);
  EXPECT_EQ(count_ops<ElementwiseChain>(after), 0) << dump(after);
  EXPECT_EQ(count_ops<Transpose>(after), 0) << dump(after);
  EXPECT_EQ(count_ops<Conv2d>(after), 3) << dump(after);
  for (const Node& n : after.nodes())
    if (const auto* c = std::get_if<Conv2d>(&n.op); c && n.name == "fc2") EXPECT_TRUE(c->residual) << dump(after);
  ASSERT_TRUE(verify_problems(after).empty()) << dump(after);
  expect_same_outputs(before, after, random_inputs(before, 10), 1e-4, 1e-5);
}

}  // namespace
}  // namespace kiln::graph
