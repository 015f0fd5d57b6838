// fuse_elementwise_chains: runs of elementwise ops (and BatchNorm that cannot fold) become one
// ElementwiseChain node with the same numbers.
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

ValueId vec(GraphBuilder& b, const std::string& name, int64_t n, float lo, float hi, uint64_t seed) {
  return b.constant(name, {n}, random_uniform(n, lo, hi, seed));
}

// Pre-activation (DenseNet-style): concat -> BN -> ReLU -> conv. BN cannot fold into a
// producing conv (there is none), so BN + ReLU become one chain (scale+shift, clamp).
TEST(FuseElementwiseChains, UnfoldableBatchNormAndReluBecomeOneChain) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 6, 6});
  const ValueId y = b.input("y", {1, 5, 6, 6});
  const ValueId cat = b.op("cat", Concat{1}, {x, y});
  std::vector<float> var = random_uniform(8, -2.0f, 1.0f, 5);
  for (float& v : var) v = std::pow(10.0f, v);
  const ValueId bn = b.batch_norm("bn", cat, vec(b, "g", 8, 0.5f, 1.5f, 1), vec(b, "be", 8, -0.5f, 0.5f, 2),
                                  vec(b, "m", 8, -0.3f, 0.3f, 3), b.constant("v", {8}, var));
  const ValueId r = b.relu("relu", bn);
  const ValueId w = b.constant("w", {4, 8, 1, 1}, random_uniform(32, -1, 1, 6), Layout::oihw);
  b.output(b.conv2d("conv", r, w, vec(b, "cb", 4, -0.1f, 0.1f, 7), Conv2d{}));
  const Graph g = b.finish();
  const Graph opt = run_passes(g);
  verify(opt);
  EXPECT_EQ(count_ops<BatchNorm>(opt), 0) << dump(opt);
  EXPECT_EQ(count_ops<Relu>(opt), 0) << dump(opt);
  ASSERT_EQ(count_ops<ElementwiseChain>(opt), 1) << dump(opt);
  for (const Node& n : opt.nodes())
    if (const auto* c = std::get_if<ElementwiseChain>(&n.op)) {
      ASSERT_EQ(c->steps.size(), 2u);
      EXPECT_EQ(c->steps[0].kind, ChainStepKind::affine);
      EXPECT_EQ(c->steps[1].kind, ChainStepKind::clamp);
      EXPECT_EQ(n.computes, (std::vector<std::string>{"batchnorm", "relu"}));
    }
  expect_same_outputs(g, opt, random_inputs(g, 8, -2.0f, 2.0f), 1e-5, 1e-5);
}

// Every chainable op kind in one run, with per-channel and scalar constants on both sides.
TEST(FuseElementwiseChains, LongChainOfEveryKind) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 4, 3, 5});
  ValueId v = b.op("hs", HardSigmoid{0.3f, 0.4f}, {x});
  v = b.op("mul", Binary{BinaryOp::mul}, {v, b.constant("k", {4, 1, 1}, random_uniform(4, 0.5f, 2, 9))});
  v = b.op("sub", Binary{BinaryOp::sub}, {b.constant("s", {1}, {0.25f}), v});
  v = b.op("lrelu", LeakyRelu{0.1f}, {v});
  v = b.op("div", Binary{BinaryOp::div}, {v, b.constant("d", {1, 4, 1, 1}, random_uniform(4, 0.5f, 2, 10))});
  v = b.op("sig", Sigmoid{}, {v});
  v = b.op("hsw", HardSwish{}, {v});
  b.output(b.clip("clip", v, -0.2f, 0.6f));
  const Graph g = b.finish();
  const Graph fused = fuse_elementwise_chains(g);
  verify(fused);
  ASSERT_EQ(fused.num_nodes(), 1u) << dump(fused);
  EXPECT_EQ(std::get<ElementwiseChain>(fused.node(NodeId{0}).op).steps.size(), 8u);
  EXPECT_EQ(fused.node(NodeId{0}).name, "clip");  // keeps the last op's name and output
  expect_same_outputs(g, fused, random_inputs(g, 11, -4.0f, 4.0f), 1e-5, 1e-6);
}

// Chains stop at a tensor with two readers, at a graph output, at a broadcast that widens
// the tensor, and at a division of a constant by the tensor (not affine).
TEST(FuseElementwiseChains, StopsWhereFusionWouldBeWrong) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 4, 4});
  const ValueId r = b.relu("r", x);
  const ValueId s1 = b.op("s1", Sigmoid{}, {r});
  const ValueId s2 = b.op("s2", Sigmoid{}, {r});  // r has two readers
  b.output(s1);
  b.output(s2);
  const ValueId wide = b.op("wide", Binary{BinaryOp::add}, {b.relu("r2", x), b.constant("c", {2, 3, 1, 1}, random_uniform(6, -1, 1, 12))});
  b.output(b.relu("after_wide", wide));
  const ValueId inv = b.op("inv", Binary{BinaryOp::div}, {b.constant("one", {1}, {1.0f}), b.relu("r3", x)});
  b.output(b.relu("after_inv", inv));
  const Graph g = b.finish();
  const Graph fused = fuse_elementwise_chains(g);
  verify(fused);
  EXPECT_EQ(fused.num_nodes(), g.num_nodes()) << dump(fused);
  for (const Node& n : fused.nodes())  // lone elementwise nodes become chains of one step
    if (const auto* c = std::get_if<ElementwiseChain>(&n.op)) EXPECT_EQ(c->steps.size(), 1u) << n.name;
  EXPECT_EQ(count_ops<Relu>(fused) + count_ops<Sigmoid>(fused), 0) << dump(fused);
  expect_same_outputs(g, fused, random_inputs(g, 13, 0.5f, 2.0f), 1e-6, 1e-7);
}

// Exporters write SiLU as x * Sigmoid(x) and HardSwish (opset < 14) as x * HardSigmoid(x) with
// alpha 1/6, beta 1/2: each pair is one step, and joins the chain of the BatchNorm before it.
TEST(FuseElementwiseChains, SelfGatedActivationsBecomeOneStep) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 6, 5, 7}, Layout::nhwc);
  const ValueId bn = b.batch_norm("bn", x, vec(b, "g", 7, 0.5f, 1.5f, 1), vec(b, "b", 7, -0.2f, 0.2f, 2),
                                  vec(b, "m", 7, -0.2f, 0.2f, 3), vec(b, "v", 7, 0.5f, 2.0f, 4));
  const ValueId silu = b.op("silu", Binary{BinaryOp::mul}, {bn, b.op("sig", Sigmoid{}, {bn})});
  const ValueId hs = b.op("hswish", Binary{BinaryOp::mul},
                          {b.op("hsig", HardSigmoid{1.0f / 6.0f, 0.5f}, {silu}), silu});
  b.output(hs);
  const Graph g = b.finish();
  const Graph fused = fuse_elementwise_chains(g);
  verify(fused);
  ASSERT_EQ(fused.num_nodes(), 1u) << dump(fused);
  const auto& chain = std::get<ElementwiseChain>(fused.node(NodeId{0}).op);
  ASSERT_EQ(chain.steps.size(), 3u);
  EXPECT_EQ(chain.steps[0].kind, ChainStepKind::affine);
  EXPECT_EQ(chain.steps[1].kind, ChainStepKind::silu);
  EXPECT_EQ(chain.steps[2].kind, ChainStepKind::hard_swish);
  expect_same_outputs(g, fused, random_inputs(g, 14, -4.0f, 4.0f), 1e-5, 1e-6);
}

// A gate with another reader, or a HardSigmoid with other parameters, is not a self-gated step.
TEST(FuseElementwiseChains, GatesThatAreNotSelfGatedActivationsStay) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 4, 3, 3});
  const ValueId sig = b.op("sig", Sigmoid{}, {x});
  b.output(b.op("mul", Binary{BinaryOp::mul}, {x, sig}));
  b.output(sig);  // the gate is also an output: it must be computed on its own
  const ValueId hsig = b.op("hsig", HardSigmoid{0.2f, 0.5f}, {x});
  b.output(b.op("mul2", Binary{BinaryOp::mul}, {x, hsig}));
  const Graph g = b.finish();
  const Graph fused = fuse_elementwise_chains(g);
  verify(fused);
  EXPECT_EQ(count_ops<Binary>(fused), 2) << dump(fused);
  for (const Node& n : fused.nodes())
    if (const auto* c = std::get_if<ElementwiseChain>(&n.op))
      for (const ChainStep& st : c->steps)
        EXPECT_TRUE(st.kind != ChainStepKind::silu && st.kind != ChainStepKind::hard_swish) << n.name;
  expect_same_outputs(g, fused, random_inputs(g, 15, -4.0f, 4.0f), 1e-6, 1e-7);
}

// PRelu as the importer writes it, Add(Relu(x), Mul(Clip(x, -inf, 0), slope)), is one step with
// a constant per-channel slope (prelu; leaky_relu for one slope), and Mish as exporters write it
// before opset 18, x * Tanh(Softplus(x)), one mish step: here one chain on an NCHW tensor, with
// the BatchNorm before them. A slope that is a graph input, or a Mish whose Tanh has another
// reader, stays as written.
TEST(FuseElementwiseChains, PreluAndMishBecomeOneStepEach) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 5, 4, 3});
  const ValueId bn =
      b.batch_norm("bn", x, vec(b, "g", 5, 0.5f, 1.5f, 1), vec(b, "b", 5, -0.2f, 0.2f, 2),
                   vec(b, "m", 5, -0.2f, 0.2f, 3), vec(b, "v", 5, 0.5f, 2.0f, 4));
  auto prelu = [&](const std::string& name, ValueId in, ValueId slope) {
    const ValueId neg = b.clip(name + "_neg", in, -INFINITY, 0.0f);
    return b.op(
        name, Binary{BinaryOp::add},
        {b.relu(name + "_pos", in), b.op(name + "_sloped", Binary{BinaryOp::mul}, {neg, slope})});
  };
  auto chain = [&](const std::string& name, ChainStepKind k, ValueId in) {
    return b.op(name, ElementwiseChain{{{k, 0, 0}}}, {in});
  };
  const ValueId p =
      prelu("prelu", bn, b.constant("slope", {5, 1, 1}, random_uniform(5, -0.5f, 1.5f, 5)));
  const ValueId mish =
      b.op("mish", Binary{BinaryOp::mul},
           {chain("tanh", ChainStepKind::tanh, chain("softplus", ChainStepKind::softplus, p)), p});
  const ValueId one = prelu("one", mish, b.constant("one_slope", {1}, {0.25f}));
  b.output(one);
  // Not the patterns: a slope that is an input; a Tanh that is also an output.
  b.output(prelu("input_slope", x, b.input("s", {1, 5, 1, 1})));
  const ValueId th = chain("th2", ChainStepKind::tanh, chain("sp2", ChainStepKind::softplus, x));
  b.output(b.op("not_mish", Binary{BinaryOp::mul}, {x, th}));
  b.output(th);
  const Graph g = b.finish();
  const Graph fused = fuse_elementwise_chains(g);
  verify(fused);
  std::vector<ChainStepKind> kinds;
  for (const Node& n : fused.nodes())
    if (n.name == "one") {
      const auto& c = std::get<ElementwiseChain>(n.op);
      for (const ChainStep& st : c.steps) kinds.push_back(st.kind);
      EXPECT_EQ(n.inputs.size(), 5u);  // x, the BatchNorm's scale and shift, the slopes and 1s
      EXPECT_EQ(c.steps.back().a, 0.25f);
    }
  EXPECT_EQ(kinds, (std::vector<ChainStepKind>{ChainStepKind::affine, ChainStepKind::prelu,
                                               ChainStepKind::mish, ChainStepKind::leaky_relu}))
      << dump(fused);
  EXPECT_EQ(count_ops<Relu>(fused), 0) << dump(fused);    // lone ones become one-step chains
  EXPECT_EQ(count_ops<Binary>(fused), 3) << dump(fused);  // input_slope's Mul and Add, not_mish
  expect_same_outputs(g, fused, random_inputs(g, 17, -3.0f, 3.0f), 1e-5, 1e-6);
}

// HardSwish as TensorFlow's MobileNetV3 writes it, x * relu6(x + 3) / 6 exported as Add, Clip,
// Mul and a Mul by 1/6 (outermost, or on the Clip as a Div by 6, operands either way round),
// is one hard_swish step. With another constant (x + 2), or the Clip's output read twice, it
// stays as written.
TEST(FuseElementwiseChains, Relu6SwishBecomesOneStep) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 6, 5, 7}, Layout::nhwc);
  auto k = [&](const std::string& name, float v) { return b.constant(name, {1}, {v}); };
  auto relu6_shifted = [&](const std::string& name, ValueId in, float shift) {
    return b.clip(name + "_relu6",
                  b.op(name + "_add", Binary{BinaryOp::add}, {k(name + "_3", shift), in}), 0.0f,
                  6.0f);
  };
  // (x * relu6(x + 3)) * (1/6)
  const ValueId outer =
      b.op("outer", Binary{BinaryOp::mul},
           {b.op("outer_mul", Binary{BinaryOp::mul}, {x, relu6_shifted("outer", x, 3.0f)}),
            k("outer_sixth", 1.0f / 6.0f)});
  // relu6(y + 3) / 6 * y, y the first one's output
  const ValueId inner = b.op("inner", Binary{BinaryOp::mul},
                             {b.op("inner_div", Binary{BinaryOp::div},
                                   {relu6_shifted("inner", outer, 3.0f), k("six", 6.0f)}),
                              outer});
  b.output(inner);
  // Not the pattern: x + 2; and a relu6(x + 3) that is also an output.
  b.output(b.op("shift2", Binary{BinaryOp::mul},
                {b.op("shift2_mul", Binary{BinaryOp::mul}, {x, relu6_shifted("shift2", x, 2.0f)}),
                 k("s2_sixth", 1.0f / 6.0f)}));
  const ValueId twice = relu6_shifted("twice", x, 3.0f);
  b.output(b.op("twice", Binary{BinaryOp::div},
                {b.op("twice_mul", Binary{BinaryOp::mul}, {x, twice}), k("six2", 6.0f)}));
  b.output(twice);
  const Graph g = b.finish();
  const Graph fused = fuse_elementwise_chains(g);
  verify(fused);
  bool found = false;
  for (const Node& n : fused.nodes()) {
    if (n.name != "inner") continue;
    found = true;
    const auto& c = std::get<ElementwiseChain>(n.op);
    ASSERT_EQ(c.steps.size(), 2u) << dump(fused);
    EXPECT_EQ(c.steps[0].kind, ChainStepKind::hard_swish);
    EXPECT_EQ(c.steps[1].kind, ChainStepKind::hard_swish);
    EXPECT_EQ(n.inputs, std::vector<ValueId>{x});
  }
  EXPECT_TRUE(found) << dump(fused);
  // shift2's and twice's products of two tensors (their scalings are affine steps).
  EXPECT_EQ(count_ops<Binary>(fused), 2) << dump(fused);
  expect_same_outputs(g, fused, random_inputs(g, 18, -5.0f, 5.0f), 1e-5, 1e-6);
}

// A chain after a dense or depthwise NHWC conv goes into the conv (Conv2d::post) when the
// conv's output has no other reader; after an output read twice, it stays a chain.
TEST(FuseElementwiseChains, ChainsGoIntoTheDenseConvBeforeThem) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 5, 5, 8}, Layout::nhwc);
  auto conv = [&](const std::string& name, ValueId in, int64_t ci_per_group, int groups, uint64_t seed) {
    Conv2d attrs;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = 1;
    attrs.groups = groups;
    return b.conv2d(name, in,
                    b.constant(name + ".w", {3, 3, ci_per_group, 8}, random_uniform(72 * ci_per_group, -0.3f, 0.3f, seed),
                               Layout::hwio),
                    vec(b, name + ".b", 8, -0.1f, 0.1f, seed + 1), attrs);
  };
  const ValueId dense = conv("dense", x, 8, 1, 1);
  const ValueId silu = b.op("silu", Binary{BinaryOp::mul}, {dense, b.op("sig", Sigmoid{}, {dense})});
  const ValueId bn = b.batch_norm("bn", silu, vec(b, "g", 8, 0.5f, 1.5f, 3), vec(b, "be", 8, -0.2f, 0.2f, 4),
                                  vec(b, "m", 8, -0.2f, 0.2f, 5), vec(b, "v", 8, 0.5f, 2.0f, 6));
  const ValueId dw = conv("dw", bn, 1, 8, 7);  // depthwise
  const ValueId dw_act = b.op("dw_sig", Sigmoid{}, {dw});
  const ValueId twice = conv("twice", dw_act, 8, 1, 9);  // read by the chain and by an output
  b.output(b.op("twice_sig", Sigmoid{}, {twice}));
  b.output(twice);
  const Graph g = b.finish();
  const Graph fused = fuse_elementwise_chains(g);
  verify(fused);
  ASSERT_EQ(count_ops<Conv2d>(fused), 3) << dump(fused);
  EXPECT_EQ(count_ops<ElementwiseChain>(fused), 1) << dump(fused);  // after twice
  for (const Node& n : fused.nodes()) {
    const auto* c = std::get_if<Conv2d>(&n.op);
    if (!c) continue;
    if (n.name == "dense") {
      ASSERT_EQ(c->post.size(), 2u) << dump(fused);
      EXPECT_EQ(c->post[0].kind, ChainStepKind::silu);
      EXPECT_EQ(c->post[1].kind, ChainStepKind::affine);
      EXPECT_EQ(n.inputs.size(), 5u);  // x, w, b, the BN's scale and shift
    } else if (n.name == "dw") {
      ASSERT_EQ(c->post.size(), 1u) << dump(fused);
      EXPECT_EQ(c->post[0].kind, ChainStepKind::sigmoid);
    } else {
      EXPECT_TRUE(c->post.empty()) << n.name;
    }
  }
  expect_same_outputs(g, fused, random_inputs(g, 16, -2.0f, 2.0f), 1e-5, 1e-6);
}

}  // namespace
}  // namespace kiln::graph

namespace kiln::graph {
namespace {

// fuse_conv_prologues: a BN + ReLU chain goes into the convolution that alone reads it, as its
// input; a chain with two readers, or before a depthwise convolution (which would compute it
// once per tap), stays a kernel of its own. The numbers are the unfused graph's.
TEST(FuseConvPrologues, OnlyIntoTheDenseOrGroupedConvThatAloneReadsTheChain) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 7, 9});
  auto conv = [&](const std::string& name, ValueId in, int64_t ci, int64_t co, int groups, uint64_t seed) {
    Conv2d attrs;
    attrs.groups = groups;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = 1;
    return b.conv2d(name, in,
                    b.constant(name + "_w", {co, ci / groups, 3, 3},
                               random_uniform(co * ci / groups * 9, -0.3f, 0.3f, seed), Layout::oihw),
                    vec(b, name + "_b", co, -0.1f, 0.1f, seed + 1), attrs);
  };
  auto bn_relu = [&](const std::string& name, ValueId in, uint64_t seed) {
    return b.relu(name + "_relu", b.batch_norm(name, in, vec(b, name + "_g", 8, 0.5f, 1.5f, seed),
                                               vec(b, name + "_be", 8, 0.2f, 0.8f, seed + 1),
                                               vec(b, name + "_m", 8, -0.3f, 0.3f, seed + 2),
                                               vec(b, name + "_v", 8, 0.5f, 2.0f, seed + 3)));
  };
  const ValueId stem = conv("stem", x, 3, 8, 1, 1);  // read by three BNs: none folds
  const ValueId shared = bn_relu("shared", stem, 10);
  b.output(conv("reads_shared_a", shared, 8, 4, 1, 20));
  b.output(conv("reads_shared_b", shared, 8, 4, 1, 30));
  b.output(conv("depthwise", bn_relu("before_dw", stem, 40), 8, 8, 8, 50));
  b.output(conv("grouped", bn_relu("before_grouped", stem, 60), 8, 8, 2, 70));
  b.output(conv("dense", bn_relu("before_dense", stem, 80), 8, 6, 1, 90));
  const Graph g = b.finish();
  const Graph opt = run_passes(g);
  verify(opt);
  EXPECT_EQ(count_ops<ElementwiseChain>(opt), 2) << dump(opt);  // shared, before_dw
  for (const Node& n : opt.nodes()) {
    const auto* c = std::get_if<Conv2d>(&n.op);
    if (!c) continue;
    const bool fused = n.name == "grouped" || n.name == "dense";
    EXPECT_EQ(c->pre.size(), fused ? 2u : 0u) << n.name;
    if (fused) EXPECT_EQ(n.computes.front(), "batchnorm") << n.name;
  }
  expect_same_outputs(g, opt, random_inputs(g, 14, -2.0f, 2.0f), 1e-5, 1e-5);
}

// fuse_conv_pooling: a pooling goes into the convolution whose output it alone reads, after the
// epilogue (here BN folded, ReLU); a convolution whose output has another reader or is a graph
// output keeps its pooling a kernel of its own, and so does a pooling of what no convolution
// produced. The numbers are the unfused graph's.
TEST(FuseConvPooling, OnlyThePoolingThatAloneReadsAConvolution) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 8, 11, 10});
  auto conv_relu = [&](const std::string& name, ValueId in, uint64_t seed) {
    Conv2d attrs;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = 1;
    const ValueId c = b.conv2d(name, in,
                               b.constant(name + "_w", {8, 8, 3, 3},
                                          random_uniform(8 * 8 * 9, -0.3f, 0.3f, seed), Layout::oihw),
                               vec(b, name + "_b", 8, -0.1f, 0.1f, seed + 1), attrs);
    return b.relu(name + "_relu", b.batch_norm(name + "_bn", c, vec(b, name + "_g", 8, 0.5f, 1.5f, seed + 2),
                                               vec(b, name + "_be", 8, -0.2f, 0.2f, seed + 3),
                                               vec(b, name + "_m", 8, -0.3f, 0.3f, seed + 4),
                                               vec(b, name + "_v", 8, 0.5f, 2.0f, seed + 5)));
  };
  const Pool2d max3{PoolKind::max, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false};
  const Pool2d avg2{PoolKind::avg, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, true, false};
  b.output(b.op("fused_max", max3, {conv_relu("alone", x, 10)}));
  b.output(b.op("fused_avg", avg2, {conv_relu("alone_avg", x, 20)}));
  const ValueId shared = conv_relu("shared", x, 30);
  b.output(b.op("pool_of_shared", max3, {shared}));
  b.output(b.relu("other_reader", shared));
  const ValueId out = conv_relu("graph_output", x, 40);
  b.output(out);
  b.output(b.op("pool_of_output", max3, {out}));
  b.output(b.op("pool_of_input", avg2, {x}));
  const Graph g = b.finish();
  const Graph opt = run_passes(g);
  verify(opt);
  EXPECT_EQ(count_ops<Pool2d>(opt), 3) << dump(opt);  // pool_of_shared, _of_output, _of_input
  for (const Node& n : opt.nodes()) {
    const auto* c = std::get_if<Conv2d>(&n.op);
    if (!c) continue;
    const bool fused = n.name == "alone" || n.name == "alone_avg";
    EXPECT_EQ(c->pool.has_value(), fused) << n.name;
    if (fused) {
      EXPECT_EQ(c->pool->kind, n.name == "alone" ? PoolKind::max : PoolKind::avg) << n.name;
      EXPECT_TRUE(c->activation.is_relu()) << n.name;
      EXPECT_EQ(n.computes.back(), n.name == "alone" ? "maxpool" : "averagepool") << n.name;
    }
  }
  expect_same_outputs(g, opt, random_inputs(g, 15, -2.0f, 2.0f), 1e-5, 1e-5);
}

// fuse_conv_resize: a Resize goes into the convolution whose output it alone reads: a bilinear
// one through the transform back to NCHW (nchw_output), a nearest one in NHWC. A convolution
// whose output has another reader or is a graph output keeps its Resize apart, and so does a
// Resize of what no convolution produced or one that resizes the channels. The numbers are the
// unfused graph's.
TEST(FuseConvResize, OnlyTheResizeThatAloneReadsAConvolution) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 8, 9, 10});
  auto conv_relu = [&](const std::string& name, ValueId in, uint64_t seed) {
    Conv2d attrs;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = 1;
    return b.relu(name + "_relu",
                  b.conv2d(name, in,
                           b.constant(name + "_w", {8, 8, 3, 3},
                                      random_uniform(8 * 8 * 9, -0.3f, 0.3f, seed), Layout::oihw),
                           vec(b, name + "_b", 8, -0.1f, 0.1f, seed + 1), attrs));
  };
  auto resize = [](ResizeMode mode, Shape sizes, std::vector<float> scales) {
    Resize r;
    r.mode = mode;
    r.coordinates = ResizeCoordinates::half_pixel;
    r.sizes = std::move(sizes);
    r.scales = std::move(scales);
    return r;
  };
  const Resize linear_x2 = resize(ResizeMode::linear, {1, 8, 18, 20}, {1, 1, 2, 2});
  const Resize nearest_x2 = resize(ResizeMode::nearest, {1, 8, 18, 20}, {1, 1, 2, 2});
  b.output(b.op("fused_linear", linear_x2, {conv_relu("alone_linear", x, 10)}));
  b.output(b.op("fused_nearest", nearest_x2, {conv_relu("alone_nearest", x, 20)}));
  const ValueId shared = conv_relu("shared", x, 30);
  b.output(b.op("resize_of_shared", linear_x2, {shared}));
  b.output(b.relu("other_reader", shared));
  const ValueId out = conv_relu("graph_output", x, 40);
  b.output(out);
  b.output(b.op("resize_of_output", nearest_x2, {out}));
  b.output(b.op("resize_of_input", linear_x2, {x}));
  b.output(b.op("channels_resized", resize(ResizeMode::nearest, {1, 16, 9, 10}, {1, 2, 1, 1}),
                {conv_relu("channels", x, 50)}));
  const Graph g = b.finish();
  const Graph opt = run_passes(g);
  verify(opt);
  EXPECT_EQ(count_ops<Resize>(opt), 4) << dump(opt);  // shared, output, input, channels
  for (const Node& n : opt.nodes()) {
    const auto* c = std::get_if<Conv2d>(&n.op);
    if (!c) continue;
    const bool fused = n.name == "alone_linear" || n.name == "alone_nearest";
    EXPECT_EQ(c->resize.has_value(), fused) << n.name;
    EXPECT_EQ(c->nchw_output, n.name == "alone_linear") << n.name;
    if (fused) {
      EXPECT_EQ(c->resize->mode, n.name == "alone_linear" ? ResizeMode::linear : ResizeMode::nearest);
      EXPECT_TRUE(c->activation.is_relu()) << n.name;
      const Shape want = n.name == "alone_linear" ? Shape{1, 8, 18, 20} : Shape{1, 18, 20, 8};
      EXPECT_EQ(opt.value(n.outputs[0]).shape, want) << n.name;
    }
  }
  expect_same_outputs(g, opt, random_inputs(g, 16, -2.0f, 2.0f), 1e-5, 1e-5);
}

// fuse_conv_shortcut: an Add after a convolution's activation and post steps goes into that
// convolution when the other operand exists before it runs (a YOLO bottleneck: x + SiLU(conv));
// of two convolutions summed, the later one takes it. A convolution whose output has another
// reader, an Add with a broadcast operand and an Add before any activation (fuse_epilogues'
// residual) stay as they were. The numbers are the unfused graph's.
TEST(FuseConvShortcut, OnlyTheAddAfterTheEpilogueOfAConvolutionItAloneReads) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 8, 9, 10});
  auto conv = [&](const std::string& name, ValueId in, uint64_t seed) {
    Conv2d attrs;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = 1;
    return b.conv2d(name, in,
                    b.constant(name + "_w", {8, 8, 3, 3}, random_uniform(8 * 8 * 9, -0.3f, 0.3f, seed), Layout::oihw),
                    vec(b, name + "_b", 8, -0.1f, 0.1f, seed + 1), attrs);
  };
  auto silu = [&](const std::string& name, ValueId in) {
    return b.op(name, Binary{BinaryOp::mul}, {in, b.op(name + "_sig", Sigmoid{}, {in})});
  };
  auto add = [&](const std::string& name, ValueId a, ValueId c) { return b.op(name, Binary{BinaryOp::add}, {a, c}); };
  const ValueId h = silu("h_silu", conv("h", x, 10));
  const ValueId bottleneck = add("shortcut_add", h, silu("bottleneck_silu", conv("bottleneck", h, 20)));
  const ValueId p = b.relu("p_relu", conv("p", bottleneck, 30));
  const ValueId q = b.relu("q_relu", conv("q", bottleneck, 40));
  const ValueId pq = add("later_takes_it", p, q);
  const ValueId shared = b.relu("shared_relu", conv("shared", pq, 50));
  b.output(add("shared_add", shared, pq));
  b.output(b.relu("other_reader", shared));
  b.output(add("broadcast_add", b.relu("wide_relu", conv("wide", pq, 60)), b.input("per_channel", {1, 8, 1, 1})));
  b.output(add("residual_add", conv("residual", pq, 80), bottleneck));
  const Graph g = b.finish();
  const Graph opt = run_passes(g);
  verify(opt);
  EXPECT_EQ(count_ops<Binary>(opt), 2) << dump(opt);  // shared_add, broadcast_add
  for (const Node& n : opt.nodes()) {
    const auto* c = std::get_if<Conv2d>(&n.op);
    if (!c) continue;
    EXPECT_EQ(c->shortcut, n.name == "bottleneck" || n.name == "q") << n.name;
    EXPECT_EQ(c->residual, n.name == "residual") << n.name;
    if (c->shortcut) EXPECT_EQ(n.computes.back(), "add (shortcut)") << n.name;
  }
  expect_same_outputs(g, opt, random_inputs(g, 17, -2.0f, 2.0f), 1e-5, 1e-5);
}

// MobileNet inverted-residual blocks as exported (NCHW, OIHW, BatchNorm, Clip): the expansion
// goes into the depthwise convolution that alone reads it where expansion_fusion_pays, and
// nowhere else; the fused graph computes what the unfused one does; in bf16 mode the same blocks
// fuse (their expansion in float32) and the expansions kept apart run in bf16.
TEST(FuseExpandDepthwise, OnlyWhereTheRuleSaysAndTheDepthwiseAloneReadsIt) {
  GraphBuilder b;
  auto conv_bn = [&](const std::string& name, ValueId in, int64_t ci, int64_t co, int64_t k,
                     int stride, int groups, bool clip, uint64_t seed) {
    Conv2d attrs;
    attrs.stride_h = attrs.stride_w = stride;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = static_cast<int>(k / 2);
    attrs.groups = groups;
    const int64_t fan_in = ci / groups * k * k;
    const ValueId c = b.conv2d(name, in,
                               b.constant(name + "_w", {co, ci / groups, k, k},
                                          random_uniform(co * fan_in, -0.5f, 0.5f, seed), Layout::oihw),
                               vec(b, name + "_b", co, -0.1f, 0.1f, seed + 1), attrs);
    const ValueId bn = b.batch_norm(name + "_bn", c, vec(b, name + "_g", co, 0.5f, 1.5f, seed + 2),
                                    vec(b, name + "_be", co, -0.2f, 0.2f, seed + 3),
                                    vec(b, name + "_m", co, -0.3f, 0.3f, seed + 4),
                                    vec(b, name + "_v", co, 0.5f, 2.0f, seed + 5));
    return clip ? b.op(name + "_clip", Clip{0.0f, 6.0f}, {bn}) : bn;
  };
  // expand -> depthwise -> project; `reader`: the expanded tensor has a second reader; `silu`:
  // EfficientNet's block, SiLU (x * Sigmoid(x)) after the expansion and a k x k depthwise.
  auto block = [&](const std::string& name, int64_t side, int stride, bool reader, uint64_t seed,
                   bool silu = false, int64_t k = 3) {
    const ValueId x = b.input(name + "_x", {1, 8, side, side});
    ValueId e = conv_bn(name + "_expand", x, 8, 32, 1, 1, 1, !silu, seed);
    if (silu) e = b.op(name + "_silu", Binary{BinaryOp::mul}, {e, b.op(name + "_sig", Sigmoid{}, {e})});
    const ValueId d = conv_bn(name + "_dw", e, 32, 32, k, stride, 32, true, seed + 10);
    b.output(conv_bn(name + "_project", d, 32, 8, 1, 1, 1, false, seed + 20));
    if (reader) b.output(b.relu(name + "_reader", e));
  };
  block("s1_28", 28, 1, false, 100);
  block("s2_28", 28, 2, false, 200);
  block("s2_56", 56, 2, false, 300);
  block("s1_56", 56, 1, false, 400);  // more than 28x28 at stride 1
  block("s1_7", 7, 1, false, 500);    // rows narrower than 14 pixels
  block("shared", 28, 1, true, 600);
  block("s2_silu_56", 56, 2, false, 700, true);
  block("s1_5x5_28", 28, 1, false, 800, true, 5);  // a 5x5 window at stride 1
  const Graph g = b.finish();
  const Graph opt = run_passes(g);
  verify(opt);
  int expanded = 0;
  for (const Node& n : opt.nodes()) {
    const auto* c = std::get_if<Conv2d>(&n.op);
    if (!c || n.name.find("_dw") == std::string::npos) continue;
    const bool fused = n.name.rfind("s1_28", 0) == 0 || n.name.rfind("s2_", 0) == 0;
    EXPECT_EQ(c->expand.has_value(), fused) << n.name << "\n" << dump(opt);
    // The blocks the rule refuses say so in the kernel's list (kiln inspect's groups).
    const bool refused = n.name.rfind("s1_56", 0) == 0 || n.name.rfind("s1_7", 0) == 0 ||
                         n.name.rfind("s1_5x5", 0) == 0;
    EXPECT_EQ(n.computes.back().rfind("its 1x1 expansion kept apart", 0) == 0, refused) << n.name;
    if (!fused) continue;
    ++expanded;
    const bool silu = n.name.find("silu") != std::string::npos;
    EXPECT_EQ(c->expand->is_relu6(), !silu) << n.name;
    EXPECT_EQ(c->expand_post.size(), silu ? 1u : 0u) << n.name;
    if (silu) EXPECT_EQ(c->expand_post[0].kind, ChainStepKind::silu) << n.name;
    EXPECT_EQ(n.computes.front().rfind("1x1 expansion (conv2d", 0), 0u) << n.name;
    EXPECT_EQ(opt.value(n.inputs[0]).shape[3], 8) << n.name << ": reads the block input";
  }
  EXPECT_EQ(expanded, 4);
  expect_same_outputs(g, opt, random_inputs(g, 16, -2.0f, 2.0f), 1e-4, 1e-5);

  PipelineOptions bf16;
  bf16.precision = Precision::bf16;
  const Graph in_bf16 = run_passes(g, bf16);
  // bf16 mode fuses none (keep_expansions_apart): each expansion runs bf16 on its own, and each
  // depthwise convolution that could have taken one says why it did not.
  int expanded_bf16 = 0, noted = 0;
  for (const Node& n : in_bf16.nodes()) {
    const auto* c = std::get_if<Conv2d>(&n.op);
    if (!c) continue;
    expanded_bf16 += c->expand.has_value();
    for (const std::string& s : n.computes) noted += s.find("kept apart in bf16 mode") != std::string::npos;
    if (n.name.find("_expand") != std::string::npos) EXPECT_TRUE(c->bf16) << n.name;
  }
  EXPECT_EQ(expanded_bf16, 0) << dump(in_bf16);
  EXPECT_GE(noted, 4) << dump(in_bf16);

  EXPECT_TRUE(expansion_fusion_pays(16, {1, 112, 112, 96}, 2, 3));
  EXPECT_TRUE(expansion_fusion_pays(24, {1, 56, 56, 144}, 2, 5));
  EXPECT_TRUE(expansion_fusion_pays(96, {1, 14, 14, 576}, 1, 3));
  EXPECT_TRUE(expansion_fusion_pays(112, {1, 14, 14, 672}, 2, 5));
  EXPECT_FALSE(expansion_fusion_pays(40, {1, 28, 28, 240}, 1, 5));
  EXPECT_FALSE(expansion_fusion_pays(24, {1, 56, 56, 144}, 1, 3));
  EXPECT_FALSE(expansion_fusion_pays(160, {1, 7, 7, 960}, 1, 3));
  EXPECT_FALSE(expansion_fusion_pays(16, {1, 13, 13, 64}, 2, 3));
  // Xception's middle flow: a 728 -> 728 pointwise convolution before each depthwise one.
  EXPECT_FALSE(expansion_fusion_pays(728, {1, 14, 14, 728}, 1, 3));
  EXPECT_FALSE(expansion_fusion_pays(384, {1, 28, 28, 768}, 2, 3));
}

}  // namespace
}  // namespace kiln::graph
