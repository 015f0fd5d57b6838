// ONNX import-time evaluation of values that depend on constants only: float arithmetic cast
// to integers (TensorFlow-style "same" padding), CumSum, Sin, Cos and Mod; and the refusals when
// such an op reads a runtime tensor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "graph/reference.h"
#include "graph_test_util.h"
#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using onnx_test::attr_f;
using onnx_test::attr_i;
using onnx_test::attr_ints;
using onnx_test::import;
using onnx_test::import_error;
using onnx_test::ModelBuilder;
using onnx_test::rnd;
using testing::HasSubstr;
using TP = ::onnx::TensorProto;

::onnx::NodeProto& float_constant(ModelBuilder& m, const std::string& name, float v) {
  ::onnx::NodeProto& n = m.node("Constant", {}, {name});
  attr_f(n, "value_float", v);
  return n;
}

// timm's Conv2dSame as torch.onnx traces it: the padding of a 3x3 stride-2 convolution of a
// 9-pixel axis, max((ceil(9 / 2) - 1) * 2 + 3 - 9, 0) = 2, computed in float from constants,
// halved and cast to INT64 for a Pad before the convolution (1 on each side here).
TEST(OnnxConstantEval, SamePaddingComputedInFloatBecomesPadAttributes) {
  ModelBuilder m(13);
  m.input("x", {1, 2, 9, 9});
  float_constant(m, "half_size", 4.5f);
  float_constant(m, "one", 1.0f);
  float_constant(m, "stride", 2.0f);
  float_constant(m, "window", 3.0f);
  float_constant(m, "size", 9.0f);
  float_constant(m, "zero", 0.0f);
  m.node("Ceil", {"half_size"}, {"out_size"});
  m.node("Sub", {"out_size", "one"}, {"steps"});
  m.node("Mul", {"steps", "stride"}, {"span"});
  m.node("Add", {"span", "window"}, {"reach"});
  m.node("Sub", {"reach", "size"}, {"excess"});
  m.node("Clip", {"excess", "zero", ""}, {"total"});
  m.node("Div", {"total", "stride"}, {"half"});
  attr_i(m.node("Cast", {"half"}, {"begin"}), "to", TP::INT64);
  m.init_i64("axis0", {1}, {0});
  m.node("Unsqueeze", {"begin", "axis0"}, {"begin1"});
  m.init_i64("zeros", {2}, {0, 0});
  attr_i(m.node("Concat", {"zeros", "begin1", "begin1", "zeros", "begin1", "begin1"}, {"pads"}),
         "axis", 0);
  m.node("Pad", {"x", "pads"}, {"padded"});
  m.init("w", {3, 2, 3, 3}, rnd(3 * 2 * 9, 51));
  attr_ints(m.node("Conv", {"padded", "w"}, {"y"}), "strides", {2, 2});
  m.output("y");
  const Graph g = import(m);
  const Pad* pad = nullptr;
  for (const Node& n : g.nodes())
    if (const auto* p = std::get_if<Pad>(&n.op)) pad = p;
  ASSERT_NE(pad, nullptr) << dump(g);
  EXPECT_EQ(pad->pads, (std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(g.value(g.outputs.at(0)).shape, (Shape{1, 3, 5, 5}));

  // The same arithmetic on the image itself is shape-dependent data, not a constant: refused.
  ModelBuilder r(13);
  r.input("x", {1, 2, 9, 9});
  attr_i(r.node("Cast", {"x"}, {"xi"}), "to", TP::INT64);
  r.output("xi");
  EXPECT_THAT(import_error(r.bytes()),
              HasSubstr("casting the runtime tensor 'x' to INT64 is not supported"));
}

// The running sums along an axis, inclusive and exclusive, forward and reversed, of a float
// constant (added to the input, so the reference run shows them) and of an integer one (a
// Reshape's target shape).
TEST(OnnxConstantEval, CumSumOfConstants) {
  const std::vector<float> c = rnd(2 * 3, 52);
  for (const int exclusive : {0, 1})
    for (const int reverse : {0, 1}) {
      ModelBuilder m(14);
      m.input("x", {2, 3});
      m.init("c", {2, 3}, c);
      m.init_i64("axis", {}, {-1});
      ::onnx::NodeProto& n = m.node("CumSum", {"c", "axis"}, {"sums"});
      attr_i(n, "exclusive", exclusive);
      attr_i(n, "reverse", reverse);
      m.node("Add", {"x", "sums"}, {"y"});
      m.output("y");
      const Graph g = import(m);
      const Tensor x{{2, 3}, Layout::any, rnd(6, 53)};
      const std::vector<float> y = run_reference(g, {x}).at(0).data;
      for (int row = 0; row < 2; ++row)
        for (int k = 0; k < 3; ++k) {
          float sum = 0.0f;  // over the elements before k (after it when reversed)
          for (int j = 0; j < 3; ++j) {
            const bool before = reverse ? j > k : j < k;
            if (before || (j == k && !exclusive)) sum += c[static_cast<size_t>(row * 3 + j)];
          }
          EXPECT_FLOAT_EQ(y[static_cast<size_t>(row * 3 + k)],
                          x.data[static_cast<size_t>(row * 3 + k)] + sum)
              << "exclusive " << exclusive << " reverse " << reverse << " at " << row << "," << k;
        }
    }

  ModelBuilder s(14);
  s.input("x", {6});
  s.init_i64("parts", {2}, {2, 1});
  s.init_i64("axis", {1}, {0});
  s.node("CumSum", {"parts", "axis"}, {"shape"});  // [2, 3]
  s.node("Reshape", {"x", "shape"}, {"y"});
  s.output("y");
  EXPECT_EQ(import(s).value(import(s).outputs.at(0)).shape, (Shape{2, 3}));

  ModelBuilder r(14);
  r.input("x", {2, 3});
  r.init_i64("axis", {}, {1});
  r.node("CumSum", {"x", "axis"}, {"y"});
  r.output("y");
  EXPECT_THAT(import_error(r.bytes()), HasSubstr("the cumulative sum of the runtime tensor 'x'"));
}

// Sinusoidal encodings of constants (EdgeNeXt's positional encoding): computed at import, and
// so are the other trigonometric and hyperbolic functions and their inverses of constants. Of a
// runtime tensor, each is a chain step of one node (generated kernels:
// GeneratedKernels.SinCosTanAccuracyAcrossTheirRange and
// InverseTrigAndHyperbolicAccuracyAcrossTheirDomains).
TEST(OnnxConstantEval, TrigonometricAndHyperbolicFunctionsOfConstants) {
  using K = ChainStepKind;
  struct Function {
    const char* op;
    K kind;
    double (*f)(double);
  };
  const std::vector<Function> functions = {
      {"Sin", K::sin, [](double v) { return std::sin(v); }},
      {"Cos", K::cos, [](double v) { return std::cos(v); }},
      {"Tan", K::tan, [](double v) { return std::tan(v); }},
      {"Asin", K::asin, [](double v) { return std::asin(v); }},
      {"Acos", K::acos, [](double v) { return std::acos(v); }},
      {"Atan", K::atan, [](double v) { return std::atan(v); }},
      {"Sinh", K::sinh, [](double v) { return std::sinh(v); }},
      {"Cosh", K::cosh, [](double v) { return std::cosh(v); }},
      {"Asinh", K::asinh, [](double v) { return std::asinh(v); }},
      {"Acosh", K::acosh, [](double v) { return std::acosh(v); }},
      {"Atanh", K::atanh, [](double v) { return std::atanh(v); }}};
  for (const Function& fn : functions) {
    SCOPED_TRACE(fn.op);
    // Values inside each domain: acosh's from 1 on, the others' within (-1, 1).
    const float lo = fn.kind == K::acosh ? 1.0f : -0.99f, hi = fn.kind == K::acosh ? 4.0f : 0.99f;
    const std::vector<float> c = rnd(8, 54, lo, hi);
    const Tensor x{{8}, Layout::any, rnd(8, 55, lo, hi)};
    ModelBuilder m(13);
    m.input("x", {8});
    m.init("c", {8}, c);
    m.node(fn.op, {"c"}, {"s"});
    m.node("Add", {"x", "s"}, {"y"});
    m.output("y");
    const Graph g = import(m);
    EXPECT_EQ(g.num_nodes(), 1u) << "the function of the constant folded";
    const std::vector<float> y = run_reference(g, {x}).at(0).data;
    for (size_t k = 0; k < 8; ++k) EXPECT_NEAR(y[k], x.data[k] + fn.f(c[k]), 1e-6f) << k;

    ModelBuilder r(13);
    r.input("x", {8});
    r.node(fn.op, {"x"}, {"y"});
    r.output("y");
    const Graph rg = import(r);
    ASSERT_EQ(rg.num_nodes(), 1u);
    const auto* chain = std::get_if<ElementwiseChain>(&rg.nodes()[0].op);
    ASSERT_NE(chain, nullptr);
    ASSERT_EQ(chain->steps.size(), 1u);
    EXPECT_EQ(chain->steps[0].kind, fn.kind);
    const std::vector<float> ry = run_reference(rg, {x}).at(0).data;
    for (size_t k = 0; k < 8; ++k) EXPECT_NEAR(ry[k], fn.f(x.data[k]), 1e-6) << k;
  }
}

// Swin's padding to whole windows, (7 - 9 % 7) % 7 = 5, as a Pad's pads from Mod of constants;
// every sign pair under fmod=0 (the divisor's sign, Python's %) and fmod=1 (the dividend's),
// checked through a Reshape's target shape; float Mod (fmod=1) added to the input; and the
// refusals: a runtime tensor, fmod=0 on floats, an integer Mod by zero.
TEST(OnnxConstantEval, ModOfConstants) {
  ModelBuilder m(13);
  m.input("x", {1, 2, 9, 9});
  m.init_i64("window", {}, {7});
  m.init_i64("size", {}, {9});
  m.node("Mod", {"size", "window"}, {"rest"});
  m.node("Sub", {"window", "rest"}, {"short"});
  m.node("Mod", {"short", "window"}, {"pad"});
  m.init_i64("axis0", {1}, {0});
  m.node("Unsqueeze", {"pad", "axis0"}, {"pad1"});
  m.init_i64("zeros", {6}, {0, 0, 0, 0, 0, 0});
  attr_i(m.node("Concat", {"zeros", "pad1", "pad1"}, {"pads"}), "axis", 0);
  m.node("Pad", {"x", "pads"}, {"y"});
  m.output("y");
  EXPECT_EQ(import(m).value(import(m).outputs.at(0)).shape, (Shape{1, 2, 14, 14}));

  // {7 % 3, -7 % 3, 7 % -3, -7 % -3} with fmod=0: {1, 2, -2, -1}; with fmod=1: {1, -1, 1, -1}.
  // Shifted by 3 into positive dimensions for the Reshape.
  for (const int fmod : {0, 1}) {
    ModelBuilder s(13);
    s.input("x", {fmod ? 64 : 40});
    s.init_i64("a", {4}, {7, -7, 7, -7});
    s.init_i64("b", {4}, {3, 3, -3, -3});
    attr_i(s.node("Mod", {"a", "b"}, {"r"}), "fmod", fmod);
    s.init_i64("three", {1}, {3});
    s.node("Add", {"r", "three"}, {"shape"});
    s.node("Reshape", {"x", "shape"}, {"y"});
    s.output("y");
    const Shape want = fmod ? Shape{4, 2, 4, 2} : Shape{4, 5, 1, 2};
    EXPECT_EQ(import(s).value(import(s).outputs.at(0)).shape, want) << "fmod " << fmod;
  }

  const std::vector<float> a = rnd(6, 56);
  ModelBuilder f(13);
  f.input("x", {6});
  f.init("a", {6}, a);
  f.init("b", {1}, {0.3f});
  attr_i(f.node("Mod", {"a", "b"}, {"r"}), "fmod", 1);
  f.node("Add", {"x", "r"}, {"y"});
  f.output("y");
  const Tensor x{{6}, Layout::any, rnd(6, 57)};
  const std::vector<float> y = run_reference(import(f), {x}).at(0).data;
  for (size_t k = 0; k < 6; ++k) EXPECT_FLOAT_EQ(y[k], x.data[k] + std::fmod(a[k], 0.3f)) << k;

  ModelBuilder r(13);
  r.input("x", {6});
  r.init("b", {1}, {0.3f});
  attr_i(r.node("Mod", {"x", "b"}, {"y"}), "fmod", 1);
  r.output("y");
  EXPECT_THAT(import_error(r.bytes()), HasSubstr("Mod of the runtime tensor 'x' is not supported"));
  ModelBuilder nf(13);
  nf.input("x", {6});
  nf.init("a", {1}, {1.5f});
  nf.init("b", {1}, {0.3f});
  nf.node("Mod", {"a", "b"}, {"r"});
  nf.node("Add", {"x", "r"}, {"y"});
  nf.output("y");
  EXPECT_THAT(import_error(nf.bytes()), HasSubstr("fmod=0 on floats"));
  ModelBuilder z(13);
  z.input("x", {2, 3});
  z.init_i64("a", {2}, {2, 3});
  z.init_i64("b", {2}, {1, 0});
  z.node("Mod", {"a", "b"}, {"shape"});
  z.node("Reshape", {"x", "shape"}, {"y"});
  z.output("y");
  EXPECT_THAT(import_error(z.bytes()), HasSubstr("integer Mod by zero"));
}

}  // namespace
}  // namespace kiln::graph
