// ONNX frontend, opsets 22-28: for the ops Kiln supports these changed dtypes only, except for
// SpaceToDepth's `mode` (28), Cast's `round_mode` (24) and Range's `stash_type` (27), and added
// Swish (24). Each is checked here against values computed from the ONNX definitions; so is a
// network of opset 28 against the same network at opset 14, and the first opset Kiln does not
// know. CastLike (opset 15) is here too: exporters that write opset 22 and later use it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using namespace onnx_test;  // ModelBuilder, import, import_error, run_one, attr_*, rnd, Dims
using testing::HasSubstr;

// SpaceToDepth in both orders of the moved block, against the definition's index map: output
// channel (by * b + bx) * C + c (DCR) or (c * b + by) * b + bx (CRD) at (h, w) holds input
// channel c at (h * b + by, w * b + bx).
TEST(OnnxOpsets22To28, SpaceToDepthTakesBothModes) {
  constexpr int64_t N = 2, C = 3, H = 4, W = 6, b = 2;
  const std::vector<float> x = rnd(N * C * H * W, 2201);
  for (const char* mode : {"", "DCR", "CRD"}) {
    SCOPED_TRACE(mode);
    ModelBuilder m(28);
    m.input("x", {N, C, H, W});
    auto& n = m.node("SpaceToDepth", {"x"}, {"y"}, "s2d");
    attr_i(n, "blocksize", b);
    if (*mode) attr_s(n, "mode", mode);
    m.output("y");
    const Tensor y = run_one(m, x);
    ASSERT_EQ(y.shape, (Shape{N, C * b * b, H / b, W / b}));
    const bool crd = std::string(mode) == "CRD";
    for (int64_t i = 0; i < N; ++i)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t by = 0; by < b; ++by)
          for (int64_t bx = 0; bx < b; ++bx)
            for (int64_t h = 0; h < H / b; ++h)
              for (int64_t w = 0; w < W / b; ++w) {
                const int64_t oc = crd ? (c * b + by) * b + bx : (by * b + bx) * C + c;
                const float want = x[((i * C + c) * H + h * b + by) * W + w * b + bx];
                ASSERT_EQ(y.data[((i * C * b * b + oc) * (H / b) + h) * (W / b) + w], want)
                    << "n " << i << " c " << c << " by " << by << " bx " << bx;
              }
  }
  ModelBuilder bad(28);
  bad.input("x", {1, 1, 2, 2});
  auto& n = bad.node("SpaceToDepth", {"x"}, {"y"}, "s2d");
  attr_i(n, "blocksize", 2);
  attr_s(n, "mode", "RDC");
  bad.output("y");
  EXPECT_THAT(import_error(bad.bytes()),
              HasSubstr("attribute 'mode' is 'RDC', expected DCR or CRD"));
}

// Cast's round_mode (24) applies to float8e8m0 targets only, Range's stash_type (27) to float16
// and bfloat16 operands only: with float32 they are accepted and change nothing.
TEST(OnnxOpsets22To28, RoundModeAndStashTypeChangeNothingForFloat32) {
  ModelBuilder m(28);
  m.input("x", {2, 4});
  m.init("start", {}, {0.5f});
  m.init("limit", {}, {2.5f});
  m.init("delta", {}, {0.5f});
  attr_i(m.node("Range", {"start", "limit", "delta"}, {"ramp"}, "range"), "stash_type", 1);
  auto& cast = m.node("Cast", {"x"}, {"xf"}, "cast");
  attr_i(cast, "to", TP::FLOAT);
  attr_s(cast, "round_mode", "nearest");
  m.node("Add", {"xf", "ramp"}, {"y"}, "add");
  m.output("y");
  const std::vector<float> x = rnd(8, 2202);
  const Tensor y = run_one(m, x);
  ASSERT_EQ(y.shape, (Shape{2, 4}));
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 4; ++k) EXPECT_EQ(y.data[r * 4 + k], x[r * 4 + k] + 0.5f * (k + 1));
}

// A convolutional network whose ops all changed version in opset 22 (Conv, MaxPool,
// HardSwish, GlobalAveragePool: bfloat16 added) gives at opset 28 exactly what it gives at 14.
TEST(OnnxOpsets22To28, NetworkOfOpset28MatchesItsOpset14Self) {
  const auto build = [](int opset) {
    ModelBuilder m(opset);
    m.input("x", {1, 3, 10, 10});
    m.init("w", {4, 3, 3, 3}, rnd(4 * 3 * 3 * 3, 2203));
    m.init("b", {4}, rnd(4, 2204));
    auto& conv = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
    attr_ints(conv, "pads", {1, 1, 1, 1});
    m.node("HardSwish", {"c"}, {"a"}, "act");
    auto& pool = m.node("MaxPool", {"a"}, {"p"}, "pool");
    attr_ints(pool, "kernel_shape", {2, 2});
    attr_ints(pool, "strides", {2, 2});
    m.node("GlobalAveragePool", {"p"}, {"y"}, "gap");
    m.output("y");
    return m;
  };
  const std::vector<float> x = rnd(300, 2205);
  const Tensor new_y = run_one(build(28), x);
  const Tensor old_y = run_one(build(14), x);
  ASSERT_EQ(new_y.shape, (Shape{1, 4, 1, 1}));
  EXPECT_EQ(new_y.data, old_y.data);
  // The values are not all equal (a network that lost its input would pass the comparison).
  EXPECT_NE(new_y.data[0], new_y.data[1]);
}

// Swish (opset 24): x * sigmoid(alpha * x), alpha 1 by default.
TEST(OnnxOpsets22To28, Swish) {
  for (float alpha : {1.0f, 0.75f, -2.0f}) {
    SCOPED_TRACE(alpha);
    ModelBuilder m(24);
    m.input("x", {3, 7});
    auto& n = m.node("Swish", {"x"}, {"y"}, "swish");
    if (alpha != 1.0f) attr_f(n, "alpha", alpha);
    m.output("y");
    const std::vector<float> x = rnd(21, 2206, -6.0f, 6.0f);
    const Tensor y = run_one(m, x);
    ASSERT_EQ(y.shape, (Shape{3, 7}));
    for (size_t k = 0; k < x.size(); ++k) {
      const double want = x[k] / (1.0 + std::exp(-static_cast<double>(alpha) * x[k]));
      EXPECT_NEAR(y.data[k], want, 1e-6 + 1e-5 * std::abs(want)) << "x " << x[k];
    }
  }
}

// CastLike casts to its second input's dtype: a float graph tensor's (nothing to do), an int64
// constant's (x folded at import, truncated), or a boolean's (x != 0 as float 0/1).
TEST(OnnxOpsets22To28, CastLikeTakesTheDtypeOfItsSecondInput) {
  ModelBuilder m(23);
  m.input("x", {2, 3});
  m.init("c", {3}, {2.75f, -1.5f, 0.0f});
  m.init_i64("like_int", {1}, {7});
  m.node("CastLike", {"c", "like_int"}, {"ci"}, "to_int");
  m.node("CastLike", {"ci", "x"}, {"cf"}, "back_to_float");
  m.node("CastLike", {"x", "x"}, {"xf"}, "same");
  m.node("Add", {"xf", "cf"}, {"sum"}, "add");
  m.init("zero", {}, {0.0f});
  m.node("Greater", {"x", "zero"}, {"positive"}, "greater");
  m.node("CastLike", {"sum", "positive"}, {"nonzero"}, "to_bool");
  attr_i(m.node("Cast", {"nonzero"}, {"y"}, "to_float"), "to", TP::FLOAT);
  m.output("sum");
  m.output("y");
  std::vector<float> x = rnd(6, 2207);
  x[4] = 1.0f;  // sum 0: cast to bool, false
  const Graph g = import(m);
  const Value& in = g.value(g.inputs.at(0));
  const std::vector<Tensor> out = run_reference(g, {Tensor{in.shape, in.layout, x}});
  const float truncated[3] = {2.0f, -1.0f, 0.0f};
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(out[0].data[k], x[k] + truncated[k % 3]) << k;
    EXPECT_EQ(out[1].data[k], x[k] + truncated[k % 3] != 0.0f ? 1.0f : 0.0f) << k;
  }
}

TEST(OnnxOpsets22To28, ANewerOpsetIsRefusedByNumber) {
  ModelBuilder future(29);
  future.input("x", {2});
  future.node("Relu", {"x"}, {"y"});
  future.output("y");
  EXPECT_THAT(import_error(future.bytes()),
              HasSubstr("the model uses opset 29 of the default ONNX domain; Kiln supports "
                        "opsets 1 to 28"));
}

}  // namespace
}  // namespace kiln::graph
