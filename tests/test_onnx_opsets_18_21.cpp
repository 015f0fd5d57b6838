// ONNX frontend, opsets 18-21: what changed for the ops Kiln supports (the reductions' axes as an
// input, Mish, Split's num_outputs, Pad's axes, Resize's new attributes), Gelu (opset 20) and
// GroupNormalization (18 and 21), GridSample (16, renamed modes at 20), each against values
// computed here from the ONNX definitions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "graph/passes/pipeline.h"
#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using namespace onnx_test;  // ModelBuilder, import, import_error, run_one, attr_*, rnd, Dims
using testing::HasSubstr;

TEST(OnnxOpsets18To21, ReduceMeanTakesAxesAsAnInput) {
  ModelBuilder m(18);
  m.input("x", {2, 3, 4});
  m.init_i64("axes", {1}, {-2});
  attr_i(m.node("ReduceMean", {"x", "axes"}, {"y"}, "mean"), "keepdims", 0);
  m.output("y");
  const std::vector<float> x = rnd(24, 180);
  const Tensor y = run_one(m, x);
  ASSERT_EQ(y.shape, (Shape{2, 4}));
  for (int n = 0; n < 2; ++n)
    for (int w = 0; w < 4; ++w) {
      const float want = (x[(n * 3 + 0) * 4 + w] + x[(n * 3 + 1) * 4 + w] + x[(n * 3 + 2) * 4 + w]) / 3;
      EXPECT_NEAR(y.data[n * 4 + w], want, 1e-6f);
    }
  // No axes: every axis, or none with noop_with_empty_axes.
  ModelBuilder all(18);
  all.input("x", {2, 3});
  all.node("ReduceMean", {"x"}, {"y"}, "mean");
  all.output("y");
  EXPECT_EQ(import(all).value(import(all).outputs[0]).shape, (Shape{1, 1}));
  attr_i(*all.graph().mutable_node(0), "noop_with_empty_axes", 1);
  const std::vector<float> x2 = rnd(6, 181);
  EXPECT_EQ(run_one(all, x2).data, x2);
}

// Opset 18 moved every reduction's axes to an input (ReduceSum's moved in 13, which Debian's node
// tests cover). noop_with_empty_axes keeps the kind's elementwise part, as ONNX's reference
// computes np.sum(np.square(x), axis=()).
TEST(OnnxOpsets18To21, EveryReductionTakesAxesAsAnInput) {
  ModelBuilder m(18);
  m.input("x", {2, 3});
  m.init_i64("axes", {1}, {-1});
  m.node("ReduceMax", {"x", "axes"}, {"mx"}, "max");
  m.node("ReduceLogSumExp", {"x", "axes"}, {"lse"}, "lse");
  attr_i(m.node("ReduceL2", {"x", "axes"}, {"l2"}, "l2"), "keepdims", 0);
  for (const char* o : {"mx", "lse", "l2"}) m.output(o);
  const Graph g = import(m);
  const std::vector<float> x = {1, -4, 2, 0.5f, 3, -1};
  const std::vector<Tensor> y = run_reference(g, {Tensor{{2, 3}, Layout::any, x}});
  EXPECT_EQ(y[0].shape, (Shape{2, 1}));
  EXPECT_EQ(y[0].data, (std::vector<float>{2, 3}));
  EXPECT_NEAR(y[1].data[0], std::log(std::exp(1.0) + std::exp(-4.0) + std::exp(2.0)), 1e-5);
  EXPECT_EQ(y[2].shape, (Shape{2}));
  EXPECT_NEAR(y[2].data[1], std::sqrt(0.25 + 9 + 1), 1e-5);

  ModelBuilder noop(18);
  noop.input("x", {2, 3});
  attr_i(noop.node("ReduceSumSquare", {"x"}, {"ss"}, "ss"), "noop_with_empty_axes", 1);
  attr_i(noop.node("ReduceMin", {"x"}, {"mn"}, "mn"), "noop_with_empty_axes", 1);
  noop.output("ss");
  noop.output("mn");
  const std::vector<Tensor> z = run_reference(import(noop), {Tensor{{2, 3}, Layout::any, x}});
  EXPECT_EQ(z[0].data, (std::vector<float>{1, 16, 4, 0.25f, 9, 1}));
  EXPECT_EQ(z[1].data, x);
}

// Mish (opset 18): x * tanh(softplus(x)).
TEST(OnnxOpsets18To21, Mish) {
  ModelBuilder m(18);
  m.input("x", {4});
  m.node("Mish", {"x"}, {"y"}, "mish");
  m.output("y");
  const std::vector<float> x = {-3, -0.5f, 0.25f, 4};
  const Tensor y = run_one(m, x);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(y.data[i], x[i] * std::tanh(std::log1p(std::exp(double{x[i]}))), 1e-6) << x[i];
}

TEST(OnnxOpsets18To21, SplitNumOutputsLeavesTheLastPartSmaller) {
  ModelBuilder m(18);
  m.input("x", {7, 2});
  attr_i(m.node("Split", {"x"}, {"a", "b", "c"}, "split"), "num_outputs", 3);
  for (const char* o : {"a", "b", "c"}) m.output(o);
  const Graph g = import(m);
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{3, 2}));
  EXPECT_EQ(g.value(g.outputs[2]).shape, (Shape{1, 2}));
  m.graph().mutable_node(0)->mutable_attribute(0)->set_i(2);
  EXPECT_THAT(import_error(m.bytes()), HasSubstr("attribute 'num_outputs' is 2 for 3 outputs"));
}

TEST(OnnxOpsets18To21, PadAxesInputAndResizeAttributes) {
  ModelBuilder m(18);
  m.input("x", {1, 2, 3, 3});
  m.init_i64("pads", {2}, {1, 2});
  m.init("value", {}, {0.5f});
  m.init_i64("axes", {1}, {-1});
  m.node("Pad", {"x", "pads", "value", "axes"}, {"y"}, "pad");
  m.output("y");
  const std::vector<float> x = rnd(18, 182);
  const Tensor y = run_one(m, x);
  ASSERT_EQ(y.shape, (Shape{1, 2, 3, 6}));
  EXPECT_EQ(y.data[0], 0.5f);
  EXPECT_EQ(y.data[1], x[0]);
  EXPECT_EQ(y.data[5], 0.5f);

  ModelBuilder r(19);
  r.input("x", {1, 1, 2, 2});
  r.init("roi", {0}, {});
  r.init("scales", {4}, {1, 1, 0.5f, 0.5f});
  attr_i(r.node("Resize", {"x", "roi", "scales"}, {"y"}, "resize"), "antialias", 1);
  r.output("y");
  EXPECT_THAT(import_error(r.bytes()), HasSubstr("attribute 'antialias'=1 is not supported"));
  r.graph().mutable_node(0)->mutable_attribute()->RemoveLast();
  attr_s(*r.graph().mutable_node(0), "coordinate_transformation_mode", "half_pixel_symmetric");
  EXPECT_THAT(import_error(r.bytes()), HasSubstr("half_pixel_symmetric"));
}

TEST(OnnxOpsets18To21, GeluExactAndTanh) {
  for (const char* approximate : {"none", "tanh"}) {
    ModelBuilder m(20);
    m.input("x", {3, 5});
    attr_s(m.node("Gelu", {"x"}, {"y"}, "gelu"), "approximate", approximate);
    m.output("y");
    const std::vector<float> x = rnd(15, 183, -4.0f, 4.0f);
    const Tensor y = run_one(m, x);
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      const double want =
          approximate[0] == 'n'
              ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))
              : 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      EXPECT_NEAR(y.data[i], want, 1e-5) << approximate << " " << v;
    }
  }
  ModelBuilder bad(20);
  bad.input("x", {3});
  attr_s(bad.node("Gelu", {"x"}, {"y"}, "gelu"), "approximate", "erf");
  bad.output("y");
  EXPECT_THAT(import_error(bad.bytes()), HasSubstr("attribute 'approximate' is 'erf'"));
}

// y[n, c] = (x[n, c] - mean) / sqrt(var + eps) * scale + bias, the statistics over the group of
// channel c (channels / groups of them) and all spatial positions.
std::vector<float> group_norm(const std::vector<float>& x, Dims s, int64_t groups,
                              const std::vector<float>& scale, const std::vector<float>& bias,
                              float eps) {
  const int64_t n = s[0], c = s[1], hw = s[2] * s[3], per = c / groups * hw;
  std::vector<float> y(x.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      const float* row = x.data() + (b * groups + g) * per;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < per; ++i) mean += row[i];
      mean /= per;
      for (int64_t i = 0; i < per; ++i) var += (row[i] - mean) * (row[i] - mean);
      var /= per;
      for (int64_t i = 0; i < per; ++i) {
        const int64_t ch = g * (c / groups) + i / hw;
        y[(b * groups + g) * per + i] =
            static_cast<float>((row[i] - mean) / std::sqrt(var + eps) * scale[ch] + bias[ch]);
      }
    }
  return y;
}

// One group (PoolFormer's GroupNorm(1)) as well: a LayerNorm of x itself from axis 1, no view.
// With groups, the passes make one GroupNorm node of it, whose reference agrees.
TEST(OnnxOpsets18To21, GroupNormalizationPerGroupAndPerChannelParameters) {
  const Dims shape = {2, 6, 3, 4};
  const std::vector<float> x = rnd(2 * 6 * 12, 184, -2.0f, 3.0f);
  for (int groups : {3, 1})
    for (int opset : {18, 21}) {
      const int64_t params = opset == 18 ? groups : 6;
      const std::vector<float> s = rnd(params, 185), b = rnd(params, 186);
      ModelBuilder m(opset);
      m.input("x", shape);
      m.init("scale", {params}, s), m.init("bias", {params}, b);
      auto& node = m.node("GroupNormalization", {"x", "scale", "bias"}, {"y"}, "gn");
      attr_i(node, "num_groups", groups);
      attr_f(node, "epsilon", 1e-3f);
      m.output("y");
      std::vector<float> per_channel_s(6), per_channel_b(6);
      for (int ch = 0; ch < 6; ++ch)
        per_channel_s[ch] = s[ch * params / 6], per_channel_b[ch] = b[ch * params / 6];
      const std::vector<float> want =
          group_norm(x, shape, groups, per_channel_s, per_channel_b, 1e-3f);
      const Tensor y = run_one(m, x);
      ASSERT_EQ(y.data.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(y.data[i], want[i], 1e-4f) << groups << " " << opset << " " << i;
      const Graph g = import(m);
      bool views = false, axis1 = false;
      for (const Node& n : g.nodes()) {
        views = views || std::holds_alternative<Reshape>(n.op);
        if (const auto* ln = std::get_if<LayerNorm>(&n.op)) axis1 = ln->axis == 1;
      }
      EXPECT_EQ(views, groups != 1) << groups;
      EXPECT_EQ(axis1, groups == 1) << groups;
      // The passes make the views, the LayerNorm and the affine one GroupNorm node.
      const Graph optimized = run_passes(g);
      size_t group_norms = 0, nodes = 0;
      for (const Node& n : optimized.nodes()) {
        group_norms += std::holds_alternative<GroupNorm>(n.op);
        nodes += !std::holds_alternative<LayoutTransform>(n.op);
      }
      if (groups != 1) {
        EXPECT_EQ(group_norms, 1u) << dump(optimized);
        EXPECT_EQ(nodes, 1u) << dump(optimized);
      }
      const Tensor yo = run_reference(optimized, {Tensor{shape, Layout::nchw, x}})[0];
      ASSERT_EQ(yo.data.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(yo.data[i], want[i], 1e-4f) << groups << " " << opset << " " << i;
    }
  ModelBuilder bad(21);
  bad.input("x", shape);
  bad.init("scale", {6}, rnd(6, 187)), bad.init("bias", {6}, rnd(6, 188));
  attr_i(bad.node("GroupNormalization", {"x", "scale", "bias"}, {"y"}, "gn"), "num_groups", 4);
  bad.output("y");
  EXPECT_THAT(import_error(bad.bytes()),
              HasSubstr("attribute 'num_groups' is 4, which does not divide the 6 channels"));
}

// GridSample (opset 16; opset 20 renamed bilinear and bicubic to linear and cubic and made
// linear the default): the attributes as the node's, one pixel read exactly; the refusals.
TEST(OnnxOpsets18To21, GridSampleAttributesAndRefusals) {
  const auto model = [](int opset, const std::string& mode, const std::string& padding,
                        int64_t align, const Dims& x) {
    ModelBuilder m(opset);
    m.input("x", x);
    m.input("grid", {x[0], 1, 2, 2});
    auto& n = m.node("GridSample", {"x", "grid"}, {"y"}, "gs");
    if (!mode.empty()) attr_s(n, "mode", mode);
    if (!padding.empty()) attr_s(n, "padding_mode", padding);
    if (align >= 0) attr_i(n, "align_corners", align);
    m.output("y");
    return m;
  };
  const auto op = [](const Graph& g) { return std::get<GridSample>(g.nodes().at(0).op); };
  GridSample d = op(import(model(16, "", "", -1, {1, 2, 3, 4})));
  EXPECT_EQ(d.mode, GridSampleMode::linear);
  EXPECT_EQ(d.padding, GridSamplePadding::zeros);
  EXPECT_FALSE(d.align_corners);
  EXPECT_EQ(op(import(model(20, "", "", -1, {1, 2, 3, 4}))).mode, GridSampleMode::linear);
  EXPECT_EQ(op(import(model(16, "bicubic", "", -1, {1, 2, 3, 4}))).mode, GridSampleMode::cubic);
  EXPECT_EQ(op(import(model(20, "cubic", "", -1, {1, 2, 3, 4}))).mode, GridSampleMode::cubic);
  const GridSample r = op(import(model(16, "nearest", "reflection", 1, {1, 2, 3, 4})));
  EXPECT_EQ(r.mode, GridSampleMode::nearest);
  EXPECT_EQ(r.padding, GridSamplePadding::reflection);
  EXPECT_TRUE(r.align_corners);
  EXPECT_EQ(op(import(model(16, "", "border", 0, {1, 2, 3, 4}))).padding,
            GridSamplePadding::border);

  // align_corners: (-1, -1) is pixel (0, 0) and (1, 1) pixel (3, 2), read exactly.
  const Graph g = import(model(16, "bilinear", "zeros", 1, {1, 2, 3, 4}));
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{1, 2, 1, 2}));
  const std::vector<float> x = rnd(24, 5);
  const std::vector<Tensor> y = run_reference(
      g, {{{1, 2, 3, 4}, Layout::any, x}, {{1, 1, 2, 2}, Layout::any, {-1.0f, -1.0f, 1.0f, 1.0f}}});
  EXPECT_EQ(y[0].data, (std::vector<float>{x[0], x[11], x[12], x[23]}));

  EXPECT_THAT(import_error(model(16, "area", "", -1, {1, 2, 3, 4}).bytes()),
              HasSubstr("node 'gs' (GridSample): mode 'area' is not supported"));
  EXPECT_THAT(import_error(model(16, "", "mirror", -1, {1, 2, 3, 4}).bytes()),
              HasSubstr("padding_mode 'mirror' is not supported"));
  EXPECT_THAT(import_error(model(20, "", "", -1, {1, 2, 3, 4, 5}).bytes()),
              HasSubstr("Kiln samples 4-D images [N, C, H, W] only"));
}

}  // namespace
}  // namespace kiln::graph
