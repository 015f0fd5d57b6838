// fold_batch_norm: Conv2d -> BatchNorm becomes one Conv2d, and only when that is legal.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/passes/passes.h"
#include "graph/reference.h"
#include "graph/shape_inference.h"
#include "graph/verify.h"
#include "graph_test_util.h"

namespace kiln::graph {
namespace {

using testing_util::count_ops;
using testing_util::expect_same_outputs_atol_per_unit;
using testing_util::random_inputs;

const Node& only_conv(const Graph& g) {
  const Node* found = nullptr;
  for (const Node& n : g.nodes())
    if (std::holds_alternative<Conv2d>(n.op)) found = &n;
  KILN_CHECK(found && count_ops<Conv2d>(g) == 1, "expected exactly one Conv2d");
  return *found;
}

// Per-channel parameters far from the identity; variance log-uniform in [1e-4, 1e3].
std::vector<float> log_uniform(size_t n, float lo_exp, float hi_exp, uint64_t seed) {
  std::vector<float> v = random_uniform(n, lo_exp, hi_exp, seed);
  for (float& x : v) x = std::pow(10.0f, x);
  return v;
}

// Adds the constants of a Conv2d (weights in the layout `x` needs, bias) and the conv itself.
ValueId add_conv(GraphBuilder& b, const std::string& name, ValueId x, Layout layout, int64_t ci,
                 int64_t co, int64_t kh, int64_t kw, const Conv2d& attrs, uint64_t seed) {
  const Layout wl = filter_layout_for(layout);
  const Shape ws = filter_shape(FilterDims{co, ci, kh, kw}, wl);
  const ValueId w =
      b.constant(name + "_w", ws, random_uniform(num_elements(ws), -0.5f, 0.5f, seed), wl);
  const ValueId bias = b.constant(name + "_b", {co}, random_uniform(co, -0.5f, 0.5f, seed + 1));
  return b.conv2d(name, x, w, bias, attrs);
}

struct BnParams {
  ValueId gamma, beta, mean, var;
};
BnParams add_bn_params(GraphBuilder& b, int64_t co, uint64_t seed) {
  return {b.constant("gamma", {co}, random_uniform(co, -2.0f, 2.0f, seed + 10)),
          b.constant("beta", {co}, random_uniform(co, -1.0f, 1.0f, seed + 11)),
          b.constant("mean", {co}, random_uniform(co, -1.0f, 1.0f, seed + 12)),
          b.constant("var", {co}, log_uniform(co, -4.0f, 3.0f, seed + 13))};
}

struct FoldCase {
  const char* name;
  Layout layout;  // of the graph input: NCHW (OIHW weights) or NHWC (HWIO weights)
  int64_t n, c, h, w, co, kh, kw;
  Conv2d attrs;
};

Conv2d conv_attrs(int sh, int sw, int top, int left, int bottom, int right) {
  Conv2d c;
  c.stride_h = sh, c.stride_w = sw;
  c.pad_top = top, c.pad_left = left, c.pad_bottom = bottom, c.pad_right = right;
  return c;
}

const FoldCase kCases[] = {
    {"square3x3_nchw", Layout::nchw, 1, 4, 8, 8, 6, 3, 3, conv_attrs(1, 1, 1, 1, 1, 1)},
    {"k2x3_stride2_asym_pads_nchw", Layout::nchw, 2, 3, 11, 9, 5, 2, 3,
     conv_attrs(2, 2, 0, 1, 1, 2)},
    {"k1x5_stride2x1_nchw", Layout::nchw, 1, 5, 7, 10, 7, 1, 5, conv_attrs(2, 1, 0, 2, 1, 2)},
    {"square3x3_nhwc", Layout::nhwc, 1, 4, 8, 8, 6, 3, 3, conv_attrs(1, 1, 1, 1, 1, 1)},
    {"k2x3_stride2_asym_pads_nhwc", Layout::nhwc, 2, 3, 11, 9, 5, 2, 3,
     conv_attrs(2, 2, 0, 1, 1, 2)},
    {"k5x1_stride1x2_nhwc", Layout::nhwc, 1, 6, 9, 8, 4, 5, 1, conv_attrs(1, 2, 2, 0, 2, 1)},
    {"pointwise_nhwc", Layout::nhwc, 1, 8, 5, 5, 16, 1, 1, conv_attrs(1, 1, 0, 0, 0, 0)},
};

void PrintTo(const FoldCase& c, std::ostream* os) { *os << c.name; }

class FoldBatchNorm : public ::testing::TestWithParam<FoldCase> {};

TEST_P(FoldBatchNorm, FoldedConvMatchesConvPlusBatchNorm) {
  const FoldCase& k = GetParam();
  for (uint64_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    GraphBuilder b;
    const ValueId x = b.input("x", image_shape(ImageDims{k.n, k.c, k.h, k.w}, k.layout), k.layout);
    const ValueId conv = add_conv(b, "conv", x, k.layout, k.c, k.co, k.kh, k.kw, k.attrs, seed);
    const BnParams p = add_bn_params(b, k.co, seed);
    b.output(b.batch_norm("bn", conv, p.gamma, p.beta, p.mean, p.var, 1e-5f));
    const Graph before = b.finish();

    const Graph after = fold_batch_norm(before);
    ASSERT_TRUE(verify_problems(after).empty()) << dump(after);
    EXPECT_EQ(count_ops<BatchNorm>(before), 1) << "the pass must not mutate its input";
    EXPECT_EQ(count_ops<BatchNorm>(after), 0) << dump(after);
    ASSERT_EQ(after.num_nodes(), 1u);
    const Node& c = only_conv(after);
    EXPECT_EQ(c.computes, (std::vector<std::string>{"conv2d", "batchnorm (folded)"}));
    ASSERT_EQ(after.outputs.size(), 1u);
    EXPECT_EQ(c.outputs[0], after.outputs[0]);
    EXPECT_EQ(after.value(after.outputs[0]).layout, k.layout);
    // The folded weights are new constants in the same layout, not the originals.
    const Value& w = after.value(c.inputs[1]);
    ASSERT_TRUE(w.is_constant());
    EXPECT_EQ(w.layout, filter_layout_for(k.layout));
    EXPECT_NE(w.data, before.value(before.node(NodeId{0}).inputs[1]).data);

    expect_same_outputs_atol_per_unit(before, after, random_inputs(before, seed + 1000), 1e-5,
                                      1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FoldBatchNorm, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// conv -> BN -> relu on NCHW: BN is folded, the relu stays (fusion is another pass).
TEST(FoldBatchNormPass, FoldsWhenBatchNormFeedsRelu) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 10, 10});
  const ValueId conv =
      add_conv(b, "conv", x, Layout::nchw, 3, 8, 3, 3, conv_attrs(1, 1, 1, 1, 1, 1), 7);
  const BnParams p = add_bn_params(b, 8, 7);
  b.output(b.relu("out", b.batch_norm("bn", conv, p.gamma, p.beta, p.mean, p.var)));
  const Graph before = b.finish();
  const Graph after = fold_batch_norm(before);
  verify(after, "after fold_batch_norm");
  EXPECT_EQ(count_ops<BatchNorm>(after), 0);
  EXPECT_EQ(count_ops<Relu>(after), 1);
  EXPECT_EQ(after.num_nodes(), 2u);
  expect_same_outputs_atol_per_unit(before, after, random_inputs(before, 8), 1e-5, 1e-6);
}

// The graph is unchanged in meaning and still has its BatchNorm.
void expect_not_folded(const Graph& before, const std::vector<Tensor>& ins) {
  const Graph after = fold_batch_norm(before);
  ASSERT_TRUE(verify_problems(after).empty()) << dump(after);
  EXPECT_EQ(count_ops<BatchNorm>(after), 1) << dump(after);
  EXPECT_EQ(after.num_nodes(), before.num_nodes());
  for (const Node& n : after.nodes()) {
    if (std::holds_alternative<Conv2d>(n.op)) {
      EXPECT_EQ(n.computes, std::vector<std::string>{"conv2d"});
    }
  }
  expect_same_outputs_atol_per_unit(before, after, ins, 1e-6, 1e-7);
}

TEST(FoldBatchNormPass, NotFoldedWhenConvOutputIsAlsoAGraphOutput) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 4, 6, 6});
  const ValueId conv =
      add_conv(b, "conv", x, Layout::nchw, 4, 5, 3, 3, conv_attrs(1, 1, 1, 1, 1, 1), 3);
  const BnParams p = add_bn_params(b, 5, 3);
  b.output(conv);
  b.output(b.batch_norm("bn", conv, p.gamma, p.beta, p.mean, p.var));
  const Graph g = b.finish();
  expect_not_folded(g, random_inputs(g, 4));
}

TEST(FoldBatchNormPass, NotFoldedWhenConvOutputFeedsReluAndBatchNorm) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 6, 6, 4}, Layout::nhwc);
  const ValueId conv =
      add_conv(b, "conv", x, Layout::nhwc, 4, 5, 3, 3, conv_attrs(2, 2, 1, 1, 1, 1), 5);
  const BnParams p = add_bn_params(b, 5, 5);
  b.output(b.relu("r", conv));
  b.output(b.batch_norm("bn", conv, p.gamma, p.beta, p.mean, p.var));
  const Graph g = b.finish();
  expect_not_folded(g, random_inputs(g, 6));
}

TEST(FoldBatchNormPass, NotFoldedWhenVarianceIsAGraphInput) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 7, 7});
  const ValueId var = b.input("var", {4}, Layout::any);
  const ValueId conv =
      add_conv(b, "conv", x, Layout::nchw, 3, 4, 3, 3, conv_attrs(1, 1, 0, 0, 0, 0), 9);
  const BnParams p = add_bn_params(b, 4, 9);
  b.output(b.batch_norm("bn", conv, p.gamma, p.beta, p.mean, var));
  const Graph g = b.finish();
  std::vector<Tensor> ins = random_inputs(g, 10);
  ins[1].data = log_uniform(4, -3.0f, 2.0f, 11);  // a variance must be positive
  expect_not_folded(g, ins);
}

TEST(FoldBatchNormPass, NotFoldedWhenWeightsAreAGraphInput) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 7, 7});
  const ValueId w = b.input("w", {4, 3, 3, 3}, Layout::oihw);
  const ValueId bias = b.constant("b", {4}, random_uniform(4, -0.5f, 0.5f, 12));
  const ValueId conv = b.conv2d("conv", x, w, bias, conv_attrs(1, 1, 1, 1, 1, 1));
  const BnParams p = add_bn_params(b, 4, 12);
  b.output(b.batch_norm("bn", conv, p.gamma, p.beta, p.mean, p.var));
  const Graph g = b.finish();
  expect_not_folded(g, random_inputs(g, 13));
}

// BN does not commute with a clamp: conv with a fused relu epilogue must keep its BN.
TEST(FoldBatchNormPass, NotFoldedIntoConvWithAnEpilogue) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 7, 7});
  Conv2d attrs = conv_attrs(1, 1, 1, 1, 1, 1);
  attrs.activation = Activation{0.0f, Activation{}.hi};
  const ValueId conv = add_conv(b, "conv", x, Layout::nchw, 3, 4, 3, 3, attrs, 14);
  const BnParams p = add_bn_params(b, 4, 14);
  b.output(b.batch_norm("bn", conv, p.gamma, p.beta, p.mean, p.var));
  const Graph g = b.finish();
  expect_not_folded(g, random_inputs(g, 15));
}

}  // namespace
}  // namespace kiln::graph
