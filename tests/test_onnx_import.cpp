// ONNX frontend: convolutions, Clip bounds and import-time folding of constants (structure and
// numerics against the reference interpreter). Shape and data-movement ops are in
// test_onnx_import_data.cpp, what the importer refuses in test_onnx_refusals.cpp, loader safety
// in test_onnx_loader.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "graph/builder.h"
#include "graph_test_util.h"
#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using onnx_test::attr_f;
using onnx_test::attr_i;
using onnx_test::attr_ints;
using onnx_test::attr_s;
using onnx_test::import;
using onnx_test::import_error;
using onnx_test::input_tensor;
using onnx_test::ModelBuilder;
using onnx_test::op_at;
using onnx_test::rnd;
using testing::HasSubstr;
using testing_util::count_ops;
using TP = ::onnx::TensorProto;

// Conv -> BatchNormalization -> Relu, as an exporter writes it; compared with the same network
// built directly.
TEST(OnnxImport, ConvBatchNormReluKeepsNamesAttributesAndNumerics) {
  const auto w = rnd(4 * 3 * 9, 1), b = rnd(4, 2), scale = rnd(4, 3, 0.5f, 1.5f);
  const auto beta = rnd(4, 4), mean = rnd(4, 5), var = rnd(4, 6, 0.5f, 2.0f);
  ModelBuilder m;
  m.input("x", {1, 3, 9, 9});
  m.init("w", {4, 3, 3, 3}, w), m.init("b", {4}, b), m.init("s", {4}, scale);
  m.init("beta", {4}, beta), m.init("mean", {4}, mean), m.init("var", {4}, var);
  auto& conv = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv1");
  attr_ints(conv, "strides", {2, 2});
  attr_ints(conv, "pads", {1, 0, 2, 1});
  attr_ints(conv, "kernel_shape", {3, 3});
  attr_f(m.node("BatchNormalization", {"c", "s", "beta", "mean", "var"}, {"n"}, "bn1"), "epsilon",
         1e-3f);
  m.node("Relu", {"n"}, {"y"}, "relu1");
  m.output("y");
  const Graph g = import(m);

  ASSERT_EQ(g.num_nodes(), 3u);
  EXPECT_EQ(g.node(NodeId{0}).name, "conv1");
  EXPECT_EQ(g.value(g.node(NodeId{0}).outputs[0]).name, "c");
  const Conv2d& c = op_at<Conv2d>(g, 0);
  EXPECT_EQ(c.stride_h, 2);
  EXPECT_EQ(c.stride_w, 2);
  EXPECT_EQ(c.pad_top, 1);
  EXPECT_EQ(c.pad_left, 0);
  EXPECT_EQ(c.pad_bottom, 2);
  EXPECT_EQ(c.pad_right, 1);
  EXPECT_EQ(g.value(g.node(NodeId{0}).inputs[1]).layout, Layout::oihw);
  EXPECT_FLOAT_EQ(op_at<BatchNorm>(g, 1).epsilon, 1e-3f);
  EXPECT_TRUE(std::holds_alternative<Relu>(g.node(NodeId{2}).op));
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.value(g.outputs[0]).name, "y");
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{1, 4, 5, 4}));

  GraphBuilder e;
  Conv2d a;
  a.stride_h = a.stride_w = 2;
  a.pad_top = 1, a.pad_bottom = 2, a.pad_right = 1;
  const ValueId x = e.input("x", {1, 3, 9, 9});
  const ValueId cv =
      e.conv2d("c", x, e.constant("w", {4, 3, 3, 3}, w, Layout::oihw), e.constant("b", {4}, b), a);
  const ValueId n = e.batch_norm("n", cv, e.constant("s", {4}, scale), e.constant("be", {4}, beta),
                                 e.constant("m", {4}, mean), e.constant("v", {4}, var), 1e-3f);
  e.output(e.relu("y", n));
  const std::vector<Tensor> in{input_tensor(g, 0, 7)};
  onnx_test::expect_close(run_reference(g, in)[0], run_reference(e.finish(), in)[0]);
}

TEST(OnnxImport, DepthwiseDilatedConvWithoutBiasGetsZeroBias) {
  const auto w = rnd(4 * 9, 11);
  ModelBuilder m;
  m.input("x", {1, 4, 8, 8});
  m.init("w", {4, 1, 3, 3}, w);
  auto& conv = m.node("Conv", {"x", "w"}, {"y"});
  attr_i(conv, "group", 4);
  attr_ints(conv, "dilations", {2, 1});
  m.output("y");
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 1u);
  EXPECT_EQ(g.node(NodeId{0}).name, "Conv_0");
  EXPECT_EQ(op_at<Conv2d>(g, 0).groups, 4);
  EXPECT_EQ(op_at<Conv2d>(g, 0).dilation_h, 2);
  const Value& bias = g.value(g.node(NodeId{0}).inputs[2]);
  ASSERT_TRUE(bias.is_constant());
  EXPECT_EQ(*bias.data, std::vector<float>(4, 0.0f));

  GraphBuilder e;
  Conv2d a;
  a.groups = 4, a.dilation_h = 2;
  e.output(e.conv2d("y", e.input("x", {1, 4, 8, 8}), e.constant("w", {4, 1, 3, 3}, w, Layout::oihw),
                    e.constant("b", {4}, std::vector<float>(4, 0.0f)), a));
  const std::vector<Tensor> in{input_tensor(g, 0, 12)};
  onnx_test::expect_close(run_reference(g, in)[0], run_reference(e.finish(), in)[0]);
}

// SAME padding keeps ceil(in / stride) outputs; with an odd total, LOWER pads more in front.
TEST(OnnxImport, AutoPadSameLowerAndUpper) {
  const auto w = rnd(3 * 2 * 16, 21);
  for (const char* mode : {"SAME_LOWER", "SAME_UPPER"}) {
    ModelBuilder m;
    m.input("x", {1, 2, 7, 7});
    m.init("w", {3, 2, 4, 4}, w);
    auto& conv = m.node("Conv", {"x", "w"}, {"y"});
    attr_s(conv, "auto_pad", mode);
    attr_ints(conv, "strides", {2, 2});
    m.output("y");
    const Graph g = import(m);
    const Conv2d& c = op_at<Conv2d>(g, 0);
    const bool lower = std::string(mode) == "SAME_LOWER";
    EXPECT_EQ(c.pad_top, lower ? 2 : 1) << mode;  // total (4-1)*2 + 4 - 7 = 3
    EXPECT_EQ(c.pad_bottom, lower ? 1 : 2) << mode;
    EXPECT_EQ(c.pad_left, c.pad_top) << mode;
    EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{1, 3, 4, 4})) << mode;

    // The expected conv written out from the ONNX attributes, not copied from the import.
    GraphBuilder e;
    Conv2d a;
    a.stride_h = a.stride_w = 2;
    a.pad_top = a.pad_left = lower ? 2 : 1;
    a.pad_bottom = a.pad_right = lower ? 1 : 2;
    e.output(e.conv2d("y", e.input("x", {1, 2, 7, 7}),
                      e.constant("w", {3, 2, 4, 4}, w, Layout::oihw),
                      e.constant("b", {3}, std::vector<float>(3, 0.0f)), a));
    const std::vector<Tensor> in{input_tensor(g, 0, 22)};
    onnx_test::expect_close(run_reference(g, in)[0], run_reference(e.finish(), in)[0]);
  }
}

TEST(OnnxImport, ClipBoundsFromInputsAndAttributes) {
  const float inf = std::numeric_limits<float>::infinity();
  ModelBuilder m(13);
  m.input("x", {2, 3});
  m.init("lo", {}, {-0.25f}), m.init("hi", {}, {0.5f});
  m.node("Clip", {"x", "lo", "hi"}, {"a"});
  m.node("Clip", {"a", "", "hi"}, {"y"});
  m.output("y");
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 2u);
  EXPECT_EQ(op_at<Clip>(g, 0).min, -0.25f);
  EXPECT_EQ(op_at<Clip>(g, 0).max, 0.5f);
  EXPECT_EQ(op_at<Clip>(g, 1).min, -inf);
  const std::vector<Tensor> in{input_tensor(g, 0, 31)};
  const Tensor out = run_reference(g, in)[0];
  for (size_t k = 0; k < out.data.size(); ++k)
    EXPECT_EQ(out.data[k], std::min(std::max(in[0].data[k], -0.25f), 0.5f));

  ModelBuilder old(6);
  old.input("x", {2, 3});
  auto& clip = old.node("Clip", {"x"}, {"y"});
  attr_f(clip, "min", -1.5f);
  old.output("y");
  const Graph go = import(old);
  EXPECT_EQ(op_at<Clip>(go, 0).min, -1.5f);
  EXPECT_EQ(op_at<Clip>(go, 0).max, inf);
}

// Resize at opset 10 (Upsample-9 renamed, inputs X and scales): asymmetric coordinates, the
// nearest source pixel rounded down when enlarging and up when shrinking, as onnxruntime's
// opset-10 Resize takes it; nearest resizing that does both at once is refused.
TEST(OnnxImport, ResizeOpset10RoundsDownToEnlargeAndUpToShrink) {
  const auto resize = [](std::vector<float> scales, Shape in, const std::string& mode) {
    ModelBuilder m(10);
    m.input("x", in);
    m.init("scales", {4}, scales);
    attr_s(m.node("Resize", {"x", "scales"}, {"y"}, "resize"), "mode", mode);
    m.output("y");
    return m;
  };
  const std::vector<float> x = rnd(7, 41);
  // Shrinking 7 by 0.34: 2 outputs at source 0 and 1 / 0.34 = 2.94, which rounds up to 3.
  const Tensor down = onnx_test::run_one(resize({1, 1, 1, 0.34f}, {1, 1, 1, 7}, "nearest"), x);
  ASSERT_EQ(down.shape, (Shape{1, 1, 1, 2}));
  EXPECT_EQ(down.data[0], x[0]);
  EXPECT_EQ(down.data[1], x[3]);
  // Enlarging 3 by 2.5: 7 outputs at sources i / 2.5 rounded down: 0 0 0 1 1 2 2.
  const std::vector<float> x3(x.begin(), x.begin() + 3);
  const Tensor up = onnx_test::run_one(resize({1, 1, 1, 2.5f}, {1, 1, 1, 3}, "nearest"), x3);
  ASSERT_EQ(up.shape, (Shape{1, 1, 1, 7}));
  const int want[7] = {0, 0, 0, 1, 1, 2, 2};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(up.data[i], x[want[i]]) << "output " << i;
  // Linear, asymmetric: output 1 of 3 -> 6 reads source 0.5.
  const Tensor lin = onnx_test::run_one(resize({1, 1, 1, 2}, {1, 1, 1, 3}, "linear"), x3);
  ASSERT_EQ(lin.shape, (Shape{1, 1, 1, 6}));
  EXPECT_NEAR(lin.data[1], 0.5f * (x[0] + x[1]), 1e-6f);
  EXPECT_THAT(import_error(resize({1, 1, 2, 0.5f}, {1, 1, 3, 4}, "nearest").bytes()),
              HasSubstr("enlarges some axes and shrinks others"));
}

// A bound computed from constants folds into the attribute; float arithmetic the graph reads
// stays a node.
TEST(OnnxImport, ConstantExpressionsFeedBoundsButFloatArithmeticStaysInGraph) {
  ModelBuilder m(13);
  m.input("x", {1, 3, 4, 4});
  attr_f(m.node("Constant", {}, {"six"}), "value_float", 6.0f);
  attr_f(m.node("Constant", {}, {"half"}), "value_float", 0.5f);
  m.node("Mul", {"six", "half"}, {"three"});
  m.init("c1", {3, 1, 1}, rnd(3, 41)), m.init("c2", {3, 1, 1}, rnd(3, 42));
  m.node("Add", {"c1", "c2"}, {"c12"});
  m.node("Add", {"x", "c12"}, {"sum"});
  m.node("Clip", {"sum", "", "three"}, {"y"});
  m.output("y");
  const Graph g = import(m);
  EXPECT_EQ(count_ops<Binary>(g), 2);
  ASSERT_EQ(count_ops<Clip>(g), 1);
  EXPECT_EQ(std::get<Clip>(g.nodes().back().op).max, 3.0f);

  // Weights computed from constants are compiled in: a constant, not a node.
  const auto w = rnd(2 * 3, 43), scale = rnd(2, 44);
  ModelBuilder cw(13);
  cw.input("x", {1, 3, 4, 4});
  cw.init("w", {2, 3, 1, 1}, w), cw.init("s", {2, 1, 1, 1}, scale);
  cw.node("Mul", {"w", "s"}, {"ws"});
  cw.node("Conv", {"x", "ws"}, {"y"});
  cw.output("y");
  const Graph gw = import(cw);
  ASSERT_EQ(gw.num_nodes(), 1u);
  const Value& wv = gw.value(gw.node(NodeId{0}).inputs[1]);
  ASSERT_TRUE(wv.is_constant());
  EXPECT_EQ(wv.layout, Layout::oihw);
  for (int k = 0; k < 6; ++k) EXPECT_EQ((*wv.data)[k], w[k] * scale[k / 3]);
}

// Converters without constant folding write a convolution's weights as HWIO initializers with a
// Transpose to OIHW, or a Neg or Tile of one: evaluated at import, they become the convolution's
// constant weights, and the nodes that computed them go. Weights that depend on a graph input
// are still refused, by name.
TEST(OnnxImport, WeightsComputedFromConstantsAloneAreEvaluated) {
  const auto w_hwio = rnd(3 * 3 * 2 * 4, 31), b = rnd(4, 32), unused = rnd(4, 33);
  ModelBuilder m(13);
  m.input("x", {1, 2, 6, 6});
  m.init("w_hwio", {3, 3, 2, 4}, w_hwio);
  attr_ints(m.node("Transpose", {"w_hwio"}, {"w_t"}), "perm", {3, 2, 0, 1});
  m.node("Neg", {"w_t"}, {"w"});
  m.init("b0", {4}, b);
  m.node("Abs", {"b0"}, {"b"});
  m.node("Conv", {"x", "w", "b"}, {"y"}, "conv");
  m.init("u", {4}, unused);
  m.node("Exp", {"u"}, {"dead"});  // read by nothing: dropped
  m.output("y");
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 1u) << dump(g);
  ASSERT_TRUE(std::holds_alternative<Conv2d>(g.node(NodeId{0}).op));
  const Value& w = g.value(g.node(NodeId{0}).inputs[1]);
  ASSERT_TRUE(w.is_constant());
  ASSERT_EQ(w.shape, (Shape{4, 2, 3, 3}));
  for (int64_t o = 0; o < 4; ++o)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t k = 0; k < 9; ++k)
        EXPECT_EQ((*w.data)[(o * 2 + i) * 9 + k], -w_hwio[(k * 2 + i) * 4 + o]) << o << i << k;
  const Value& bias = g.value(g.node(NodeId{0}).inputs[2]);
  ASSERT_TRUE(bias.is_constant());
  for (int64_t o = 0; o < 4; ++o) EXPECT_EQ((*bias.data)[o], std::fabs(b[o]));

  ModelBuilder runtime(13);
  runtime.input("x", {1, 2, 6, 6});
  runtime.input("v", {3, 3, 2, 4});
  attr_ints(runtime.node("Transpose", {"v"}, {"w"}), "perm", {3, 2, 0, 1});
  runtime.node("Conv", {"x", "w"}, {"y"}, "conv");
  runtime.output("y");
  EXPECT_THAT(import_error(runtime.bytes()),
              HasSubstr("weights 'w' must be a constant (an initializer, a Constant or a bound "
                        "input), but it is computed at run time"));
}

TEST(OnnxImport, ConstantInputsBindWeightsAndShapes) {
  ModelBuilder m(13);
  m.input("x", {1, 2, 4, 4});
  m.input("w", {3, 2, 1, 1});
  m.input("shape", {2}, TP::INT64);
  m.node("Conv", {"x", "w"}, {"c"});
  m.node("Reshape", {"c", "shape"}, {"y"});
  m.output("y");
  onnx::ImportOptions o;
  o.constant_inputs = {{"w", Tensor{{3, 2, 1, 1}, Layout::any, rnd(6, 121)}},
                       {"shape", Tensor{{2}, Layout::any, {3.0f, -1.0f}}}};
  const Graph g = import(m, o);
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(op_at<Reshape>(g, 1).shape, (Shape{3, 16}));
  EXPECT_EQ(*g.value(g.node(NodeId{0}).inputs[1]).data, o.constant_inputs[0].second.data);

  EXPECT_THAT(import_error(m.bytes()), HasSubstr("graph input 'shape' has dtype INT64"));
  o.constant_inputs.push_back({"nope", Tensor{{1}, Layout::any, {1.0f}}});
  EXPECT_THAT(import_error(m.bytes(), o),
              HasSubstr("constant input 'nope' does not name a graph input"));
}

}  // namespace
}  // namespace kiln::graph
