// fuse_epilogues (and the run_passes pipeline): elementwise ops absorbed into conv epilogues.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/example.h"
#include "graph/kernel_spec.h"
#include "graph/passes/passes.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "graph/shape_inference.h"
#include "graph/verify.h"
#include "graph_test_util.h"

namespace kiln::graph {
namespace {

using testing_util::count_ops;
using testing_util::expect_same_outputs;
using testing_util::random_inputs;

ValueId add_conv(GraphBuilder& b, const std::string& name, ValueId x, int64_t ci, int64_t co,
                 uint64_t seed) {
  const ValueId w = b.constant(name + "_w", {co, ci, 3, 3},
                               random_uniform(co * ci * 9, -1.0f, 1.0f, seed), Layout::oihw);
  const ValueId bias = b.constant(name + "_b", {co}, random_uniform(co, -0.5f, 0.5f, seed + 1));
  Conv2d attrs;
  attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = 1;
  return b.conv2d(name, x, w, bias, attrs);
}

const Conv2d& conv_attrs(const Graph& g) {
  for (const Node& n : g.nodes())
    if (const auto* c = std::get_if<Conv2d>(&n.op)) return *c;
  throw std::logic_error("no Conv2d in the graph");
}

const ExampleShape kSmall{1, 8, 9, 9, 12};

TEST(FuseEpilogues, ReferenceExampleBecomesOneConvWithRelu) {
  const Graph g = reference_example(kSmall, 3);
  ASSERT_EQ(g.num_nodes(), 3u);
  const Graph folded = fold_batch_norm(g);
  verify(folded, "after fold_batch_norm");
  const Graph fused = fuse_epilogues(folded);
  verify(fused, "after fuse_epilogues");

  ASSERT_EQ(fused.num_nodes(), 1u) << dump(fused);
  const Node& conv = fused.node(NodeId{0});
  ASSERT_TRUE(std::holds_alternative<Conv2d>(conv.op));
  EXPECT_TRUE(std::get<Conv2d>(conv.op).activation.is_relu());
  EXPECT_EQ(conv.computes, (std::vector<std::string>{"conv2d", "batchnorm (folded)", "relu"}));
  ASSERT_EQ(fused.outputs.size(), 1u);
  EXPECT_EQ(conv.outputs[0], fused.outputs[0]);
  EXPECT_EQ(folded.num_nodes(), 2u) << "the pass must not mutate its input";

  const std::vector<Tensor> ins = random_inputs(g, 4);
  expect_same_outputs(folded, fused, ins, 1e-6, 1e-7);  // fusing a clamp is exact
  expect_same_outputs(g, fused, ins, 1e-5, 1e-6);
}

TEST(FuseEpilogues, ReluThenClip06FusesToRelu6) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 8, 7, 7});
  b.output(b.clip("six", b.relu("r", add_conv(b, "conv", x, 8, 6, 11)), 0.0f, 6.0f));
  const Graph g = b.finish();
  const Graph fused = fuse_epilogues(g);
  verify(fused, "after fuse_epilogues");

  ASSERT_EQ(fused.num_nodes(), 1u) << dump(fused);
  EXPECT_TRUE(conv_attrs(fused).activation.is_relu6());
  EXPECT_EQ(fused.node(NodeId{0}).computes.size(), 3u);

  // Inputs in [-2, 2] push conv outputs past both bounds, so both sides of the clamp matter.
  const std::vector<Tensor> ins = random_inputs(g, 12, -2.0f, 2.0f);
  const std::vector<float> want = run_reference(g, ins)[0].data;
  EXPECT_GT(std::count(want.begin(), want.end(), 6.0f), 0);
  EXPECT_GT(std::count(want.begin(), want.end(), 0.0f), 0);
  expect_same_outputs(g, fused, ins, 1e-6, 1e-7);
}

TEST(FuseEpilogues, ClipZeroOneIsNotFused) {
  ASSERT_FALSE(conv_epilogue_supported(Activation{0.0f, 1.0f}));
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 4, 6, 6});
  b.output(b.clip("unit", add_conv(b, "conv", x, 4, 4, 21), 0.0f, 1.0f));
  const Graph g = b.finish();
  const Graph fused = fuse_epilogues(g);
  verify(fused, "after fuse_epilogues");
  EXPECT_EQ(fused.num_nodes(), 2u) << dump(fused);
  EXPECT_EQ(count_ops<Clip>(fused), 1);
  EXPECT_TRUE(conv_attrs(fused).activation.is_identity());
  expect_same_outputs(g, fused, random_inputs(g, 22), 1e-6, 1e-7);
}

// relu is absorbed; relu then clip(0, 1) would be an unsupported clamp, so the clip stays.
TEST(FuseEpilogues, ReluFusesButFollowingClipZeroOneStays) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 4, 6, 6});
  b.output(b.clip("unit", b.relu("r", add_conv(b, "conv", x, 4, 4, 31)), 0.0f, 1.0f));
  const Graph g = b.finish();
  const Graph fused = fuse_epilogues(g);
  verify(fused, "after fuse_epilogues");
  EXPECT_EQ(fused.num_nodes(), 2u) << dump(fused);
  EXPECT_EQ(count_ops<Relu>(fused), 0);
  EXPECT_EQ(count_ops<Clip>(fused), 1);
  EXPECT_TRUE(conv_attrs(fused).activation.is_relu());
  expect_same_outputs(g, fused, random_inputs(g, 32), 1e-6, 1e-7);
}

TEST(FuseEpilogues, ConvOutputThatIsAGraphOutputKeepsItsRelu) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 4, 6, 6});
  const ValueId conv = add_conv(b, "conv", x, 4, 5, 41);
  b.output(conv);
  b.output(b.relu("r", conv));
  const Graph g = b.finish();
  const Graph fused = fuse_epilogues(g);
  verify(fused, "after fuse_epilogues");
  EXPECT_EQ(fused.num_nodes(), 2u) << dump(fused);
  EXPECT_EQ(count_ops<Relu>(fused), 1);
  EXPECT_TRUE(conv_attrs(fused).activation.is_identity());
  expect_same_outputs(g, fused, random_inputs(g, 42), 1e-6, 1e-7);
}

TEST(FuseEpilogues, ConvOutputWithTwoConsumersIsNotFused) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 4, 6, 6});
  const ValueId conv = add_conv(b, "conv", x, 4, 5, 51);
  b.output(b.relu("r", conv));
  b.output(b.clip("six", conv, 0.0f, 6.0f));
  const Graph g = b.finish();
  const Graph fused = fuse_epilogues(g);
  verify(fused, "after fuse_epilogues");
  EXPECT_EQ(fused.num_nodes(), 3u) << dump(fused);
  EXPECT_TRUE(conv_attrs(fused).activation.is_identity());
  expect_same_outputs(g, fused, random_inputs(g, 52), 1e-6, 1e-7);
}

// A BatchNorm that could not be folded is elementwise but not a clamp: it ends the chain.
TEST(FuseEpilogues, UnfoldedBatchNormStopsFusion) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 4, 6, 6});
  const ValueId var = b.input("var", {5}, Layout::any);
  const ValueId conv = add_conv(b, "conv", x, 4, 5, 61);
  const ValueId gamma = b.constant("gamma", {5}, random_uniform(5, 0.5f, 1.5f, 62));
  const ValueId beta = b.constant("beta", {5}, random_uniform(5, -0.5f, 0.5f, 63));
  const ValueId mean = b.constant("mean", {5}, random_uniform(5, -0.5f, 0.5f, 64));
  b.output(b.relu("r", b.batch_norm("bn", conv, gamma, beta, mean, var)));
  const Graph g = b.finish();
  const Graph fused = fuse_epilogues(fold_batch_norm(g));
  verify(fused, "after fuse_epilogues");
  EXPECT_EQ(fused.num_nodes(), 3u) << dump(fused);
  EXPECT_TRUE(conv_attrs(fused).activation.is_identity());
  std::vector<Tensor> ins = random_inputs(g, 65);
  ins[1].data = random_uniform(5, 0.1f, 2.0f, 66);  // variances must be positive
  expect_same_outputs(g, fused, ins, 1e-6, 1e-7);
}

TEST(RunPasses, FullPipelineOnReferenceExample) {
  const Graph g = reference_example(kSmall, 5);
  std::vector<std::string> stages;
  PipelineOptions options;
  options.on_stage = [&](const std::string& stage, const Graph& s) {
    stages.push_back(stage);
    EXPECT_TRUE(verify_problems(s).empty()) << "after " << stage << ":\n" << dump(s);
  };
  const Graph opt = run_passes(g, options);
  verify(opt, "after run_passes");
  std::vector<std::string> expected = {"input"};
  for (const Pass& p : default_passes()) expected.push_back(p.name);
  EXPECT_EQ(stages, expected);

  ASSERT_EQ(opt.num_nodes(), 2u) << dump(opt);
  const Node& transform = opt.node(NodeId{0});
  const Node& conv = opt.node(NodeId{1});
  ASSERT_TRUE(std::holds_alternative<LayoutTransform>(transform.op));
  ASSERT_TRUE(std::holds_alternative<Conv2d>(conv.op));
  EXPECT_EQ(transform.inputs[0], opt.inputs[0]);
  EXPECT_EQ(conv.inputs[0], transform.outputs[0]);
  EXPECT_TRUE(std::get<Conv2d>(conv.op).activation.is_relu());
  EXPECT_EQ(opt.value(opt.outputs[0]).layout, Layout::nhwc);

  expect_same_outputs(g, opt, random_inputs(g, 6), 1e-4, 1e-5);
}

TEST(RunPasses, StopAfterFuseEpiloguesKeepsNchw) {
  const Graph g = reference_example(kSmall, 7);
  PipelineOptions options;
  options.stop_after = "fuse_epilogues";
  const Graph opt = run_passes(g, options);
  ASSERT_EQ(opt.num_nodes(), 1u) << dump(opt);
  EXPECT_EQ(count_ops<LayoutTransform>(opt), 0);
  EXPECT_EQ(opt.value(opt.outputs[0]).layout, Layout::nchw);
  expect_same_outputs(g, opt, random_inputs(g, 8), 1e-4, 1e-5);
}

}  // namespace
}  // namespace kiln::graph

namespace kiln::graph {
namespace {

ValueId add_conv_1x1(GraphBuilder& b, const std::string& name, ValueId x, int64_t ci, int64_t co,
                     int stride, uint64_t seed) {
  const ValueId w = b.constant(name + "_w", {co, ci, 1, 1},
                               random_uniform(co * ci, -1.0f, 1.0f, seed), Layout::oihw);
  const ValueId bias = b.constant(name + "_b", {co}, random_uniform(co, -0.5f, 0.5f, seed + 1));
  Conv2d attrs;
  attrs.stride_h = attrs.stride_w = stride;
  return b.conv2d(name, x, w, bias, attrs);
}

const Conv2d& conv_named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes())
    if (n.name == name) return std::get<Conv2d>(n.op);
  throw Error("no node " + name);
}

// ResNet basic block: x -> conv -> relu -> conv -> add(x) -> relu. The second conv takes the
// Add as its residual and the ReLU as its activation: 5 nodes become 2.
TEST(FuseEpilogues, ResidualAddAndReluFuseIntoTheSecondConv) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 6, 7, 7});
  const ValueId c1 = b.relu("r1", add_conv(b, "c1", x, 6, 6, 21));
  const ValueId c2 = add_conv(b, "c2", c1, 6, 6, 23);
  b.output(b.relu("r2", b.op("sum", Binary{BinaryOp::add}, {c2, x})));
  const Graph g = b.finish();
  const Graph fused = fuse_epilogues(g);
  verify(fused);
  ASSERT_EQ(fused.num_nodes(), 2u) << dump(fused);
  const Conv2d& second = conv_named(fused, "c2");
  EXPECT_TRUE(second.residual);
  EXPECT_TRUE(second.activation.is_relu());
  EXPECT_EQ(fused.node(NodeId{1}).inputs.size(), 4u);
  EXPECT_EQ(count_ops<Binary>(fused), 0);
  expect_same_outputs(g, fused, random_inputs(g, 31), 1e-5, 1e-6);
  // And through the whole pipeline (layout included) the numbers still agree.
  expect_same_outputs(g, run_passes(g), random_inputs(g, 32), 1e-5, 1e-6);
}

// Downsampling block: both Add operands are convolutions; the later conv in node order
// absorbs the Add, reading the earlier one's output as its residual.
TEST(FuseEpilogues, DownsampleBlockLaterConvAbsorbsTheAdd) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 4, 8, 8});
  Conv2d s2;
  s2.stride_h = s2.stride_w = 2;
  s2.pad_top = s2.pad_left = s2.pad_bottom = s2.pad_right = 1;
  const ValueId w = b.constant("main_w", {8, 4, 3, 3}, random_uniform(288, -1, 1, 41), Layout::oihw);
  const ValueId bias = b.constant("main_b", {8}, random_uniform(8, -0.5f, 0.5f, 42));
  const ValueId main = b.conv2d("main", x, w, bias, s2);
  const ValueId shortcut = add_conv_1x1(b, "shortcut", x, 4, 8, 2, 43);
  b.output(b.relu("out", b.op("sum", Binary{BinaryOp::add}, {main, shortcut})));
  const Graph g = b.finish();
  const Graph fused = fuse_epilogues(g);
  verify(fused);
  ASSERT_EQ(fused.num_nodes(), 2u) << dump(fused);
  EXPECT_FALSE(conv_named(fused, "main").residual);
  EXPECT_TRUE(conv_named(fused, "shortcut").residual);
  EXPECT_TRUE(conv_named(fused, "shortcut").activation.is_relu());
  expect_same_outputs(g, fused, random_inputs(g, 44), 1e-5, 1e-6);
}

// A broadcasting Add (bias-like [C,1,1] constant) is not a residual; it stays a node.
TEST(FuseEpilogues, BroadcastAddIsNotAResidual) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 5, 5});
  const ValueId c = add_conv_1x1(b, "c", x, 3, 4, 1, 51);
  const ValueId shift = b.constant("shift", {4, 1, 1}, random_uniform(4, -1, 1, 52));
  b.output(b.op("sum", Binary{BinaryOp::add}, {c, shift}));
  const Graph g = b.finish();
  const Graph fused = fuse_epilogues(g);
  EXPECT_EQ(fused.num_nodes(), 2u) << dump(fused);
  EXPECT_FALSE(conv_named(fused, "c").residual);
}

}  // namespace
}  // namespace kiln::graph
