// Import of the comparisons, logic ops, Where, Trilu, Floor/Ceil/Round, Sign, Shrink, IsNaN, IsInf,
// Pow with a tensor exponent and Expand: the nodes they become, their values against the ONNX
// definitions computed here, the boolean boundary rule (a BOOL graph input or output is float32
// 0/1), folding of integer operands known at import, and the errors for what stays unsupported.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "graph/reference.h"
#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using onnx_test::Dims;
using onnx_test::import;
using onnx_test::import_error;
using onnx_test::ModelBuilder;
using onnx_test::op_at;
using onnx_test::rnd;
using testing::HasSubstr;
using TP = ::onnx::TensorProto;

void declare_output(ModelBuilder& m, const std::string& name, int dtype) {
  m.output(name);
  auto* out = m.graph().mutable_output(m.graph().output_size() - 1);
  out->mutable_type()->mutable_tensor_type()->set_elem_type(dtype);
}

// Random values with a third of them equal to the matching element of `like` (when given) and
// many exact halves of both signs.
std::vector<float> draw(size_t n, uint64_t seed, const std::vector<float>* like = nullptr) {
  const std::vector<float> u = rnd(static_cast<int64_t>(n), seed, 0.0f, 1.0f);
  const std::vector<float> w = rnd(static_cast<int64_t>(n), seed + 100, -3.0f, 3.0f);
  std::vector<float> d(n);
  for (size_t k = 0; k < n; ++k)
    d[k] = like && u[k] < 0.35f ? (*like)[k] : u[k] < 0.6f ? std::round(w[k] * 3.0f) / 2.0f : w[k];
  return d;
}

// Every comparison and logic op on two [3, 4] tensors: Binary nodes of their kind, values 0/1
// as ONNX defines them; BOOL outputs declared as such are accepted.
TEST(OnnxLogic, ComparisonsAndLogicOpsAreBinaryNodes) {
  ModelBuilder m(13);
  m.input("a", {3, 4});
  m.input("b", {3, 4});
  const std::vector<std::pair<const char*, BinaryOp>> ops = {
      {"Equal", BinaryOp::equal},
      {"Less", BinaryOp::less},
      {"Greater", BinaryOp::greater},
      {"LessOrEqual", BinaryOp::less_equal},
      {"GreaterOrEqual", BinaryOp::greater_equal}};
  for (const auto& [op, kind] : ops) m.node(op, {"a", "b"}, {op});
  m.node("Not", {"Less"}, {"not"});
  m.node("And", {"Equal", "Greater"}, {"and"});
  m.node("Or", {"Equal", "Greater"}, {"or"});
  m.node("Xor", {"Less", "LessOrEqual"}, {"xor"});
  for (const auto& [op, kind] : ops) declare_output(m, op, TP::BOOL);
  for (const char* o : {"not", "and", "or", "xor"}) declare_output(m, o, TP::BOOL);
  const Graph g = import(m);
  for (uint32_t i = 0; i < ops.size(); ++i) EXPECT_EQ(op_at<Binary>(g, i).op, ops[i].second);
  EXPECT_EQ(op_at<ElementwiseChain>(g, 5).steps[0].kind, ChainStepKind::logical_not);
  EXPECT_EQ(op_at<Binary>(g, 6).op, BinaryOp::logical_and);
  EXPECT_EQ(op_at<Binary>(g, 7).op, BinaryOp::logical_or);
  EXPECT_EQ(op_at<Binary>(g, 8).op, BinaryOp::logical_xor);

  const std::vector<float> a = draw(12, 1), b = draw(12, 2, &a);
  const std::vector<Tensor> y =
      run_reference(g, {{{3, 4}, Layout::any, a}, {{3, 4}, Layout::any, b}});
  int equal = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    equal += a[k] == b[k];
    EXPECT_EQ(y[0].data[k], a[k] == b[k] ? 1.0f : 0.0f);
    EXPECT_EQ(y[1].data[k], a[k] < b[k] ? 1.0f : 0.0f);
    EXPECT_EQ(y[2].data[k], a[k] > b[k] ? 1.0f : 0.0f);
    EXPECT_EQ(y[3].data[k], a[k] <= b[k] ? 1.0f : 0.0f);
    EXPECT_EQ(y[4].data[k], a[k] >= b[k] ? 1.0f : 0.0f);
    EXPECT_EQ(y[5].data[k], !(a[k] < b[k]) ? 1.0f : 0.0f);
    EXPECT_EQ(y[6].data[k], a[k] == b[k] && a[k] > b[k] ? 1.0f : 0.0f);
    EXPECT_EQ(y[7].data[k], a[k] == b[k] || a[k] > b[k] ? 1.0f : 0.0f);
    EXPECT_EQ(y[8].data[k], (a[k] < b[k]) != (a[k] <= b[k]) ? 1.0f : 0.0f);
  }
  EXPECT_GT(equal, 0);  // the equal elements are what tell < from <=
}

// A BOOL graph input is a float32 0/1 tensor; Where selects by it with broadcasting.
TEST(OnnxLogic, BoolInputAndWhere) {
  ModelBuilder m(13);
  m.input("cond", {2, 1, 4}, TP::BOOL);
  m.input("x", {3, 4});
  m.input("y", {2, 3, 1});
  m.node("Where", {"cond", "x", "y"}, {"out"});
  m.output("out");
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 1u);
  EXPECT_TRUE(std::holds_alternative<Where>(g.node(NodeId{0}).op));
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{2, 3, 4}));
  std::vector<float> cond = rnd(8, 3, 0.0f, 1.0f);
  for (float& c : cond) c = c < 0.5f ? 0.0f : 1.0f;
  const std::vector<float> x = rnd(12, 4), y = rnd(6, 5);
  const std::vector<Tensor> out = run_reference(
      g, {{{2, 1, 4}, Layout::any, cond}, {{3, 4}, Layout::any, x}, {{2, 3, 1}, Layout::any, y}});
  for (int n = 0; n < 2; ++n)
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 4; ++c)
        EXPECT_EQ(out[0].data[(n * 3 + r) * 4 + c],
                  cond[n * 4 + c] != 0.0f ? x[r * 4 + c] : y[n * 3 + r]);
}

// The boundary rule changes nothing else: a BOOL output must be a boolean Kiln computes, and
// other integer dtypes stay refused at the boundary.
TEST(OnnxLogic, BoolBoundaryRefusesWhatIsNotBoolean) {
  ModelBuilder sum(13);
  sum.input("a", {3});
  sum.node("Add", {"a", "a"}, {"s"});
  declare_output(sum, "s", TP::BOOL);
  EXPECT_THAT(import_error(sum.bytes()),
              HasSubstr("graph output 's' is declared BOOL, but Kiln computes it as FLOAT"));
  ModelBuilder ints(13);
  ints.input("i", {3}, TP::INT32);
  ints.node("Not", {"i"}, {"n"});
  ints.output("n");
  EXPECT_THAT(import_error(ints.bytes()), HasSubstr("graph input 'i' has dtype INT32"));
  // Where of two booleans is a boolean; of floats it is not.
  ModelBuilder where(13);
  where.input("c", {4}, TP::BOOL);
  where.input("x", {4});
  where.node("Where", {"c", "c", "c"}, {"bools"});
  where.node("Where", {"c", "x", "x"}, {"floats"});
  declare_output(where, "bools", TP::BOOL);
  declare_output(where, "floats", TP::BOOL);
  EXPECT_THAT(import_error(where.bytes()), HasSubstr("graph output 'floats' is declared BOOL"));
  // Data movement keeps a boolean one: an Unsqueeze (a Reshape) of a comparison.
  ModelBuilder moved(13);
  moved.input("a", {4});
  moved.input("b", {4});
  moved.node("Less", {"a", "b"}, {"l"});
  moved.init_i64("axes", {1}, {0});
  moved.node("Unsqueeze", {"l", "axes"}, {"u"});
  declare_output(moved, "u", TP::BOOL);
  EXPECT_EQ(import_error(moved.bytes()), "");
}

// Integer operands known at import (shape arithmetic) fold: Equal of a shape with a constant,
// Where on integers, Not, then Cast to float scales x. Nothing but the Mul is left.
TEST(OnnxLogic, IntegerComparisonsFoldAtImport) {
  ModelBuilder m(13);
  m.input("x", {3, 2});
  m.node("Shape", {"x"}, {"shape"});  // [3, 2]
  m.init_i64("three", {2}, {3, 3});
  m.node("Equal", {"shape", "three"}, {"is3"});  // [1, 0]
  m.node("Not", {"is3"}, {"not3"});              // [0, 1]
  m.init_i64("big", {2}, {7, 5});
  m.node("Where", {"not3", "big", "shape"}, {"w"});  // [3, 5]
  m.init_i64("lim", {1}, {4});
  m.node("Less", {"w", "lim"}, {"small"});  // [1, 0]
  onnx_test::attr_i(m.node("Cast", {"small"}, {"f"}), "to", TP::FLOAT);
  m.node("Mul", {"x", "f"}, {"y"});
  m.output("y");
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 1u) << dump(g);
  EXPECT_EQ(op_at<Binary>(g, 0).op, BinaryOp::mul);
  const std::vector<float> x = rnd(6, 6);
  const std::vector<Tensor> y = run_reference(g, {{{3, 2}, Layout::any, x}});
  for (size_t k = 0; k < x.size(); ++k) EXPECT_EQ(y[0].data[k], k % 2 == 0 ? x[k] : 0.0f * x[k]);
}

// Floor, Ceil and Round are chain steps; Round halves to even.
TEST(OnnxLogic, FloorCeilRound) {
  ModelBuilder m(13);
  m.input("x", {40});
  m.node("Floor", {"x"}, {"f"});
  m.node("Ceil", {"x"}, {"c"});
  m.node("Round", {"x"}, {"r"});
  for (const char* o : {"f", "c", "r"}) m.output(o);
  const Graph g = import(m);
  EXPECT_EQ(op_at<ElementwiseChain>(g, 0).steps[0].kind, ChainStepKind::floor);
  EXPECT_EQ(op_at<ElementwiseChain>(g, 1).steps[0].kind, ChainStepKind::ceil);
  EXPECT_EQ(op_at<ElementwiseChain>(g, 2).steps[0].kind, ChainStepKind::round);
  const std::vector<float> x = draw(40, 7);
  const std::vector<Tensor> y = run_reference(g, {{{40}, Layout::any, x}});
  int halves = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    EXPECT_EQ(y[0].data[k], std::floor(x[k]));
    EXPECT_EQ(y[1].data[k], std::ceil(x[k]));
    const float lo = std::floor(x[k]), frac = x[k] - lo;
    const float want = frac < 0.5f                   ? lo
                       : frac > 0.5f                 ? lo + 1
                       : std::fmod(lo, 2.0f) == 0.0f ? lo
                                                     : lo + 1;
    halves += frac == 0.5f;
    EXPECT_EQ(y[2].data[k], want) << x[k];
  }
  EXPECT_GT(halves, 3);
}

// Sign, Shrink (lambd, bias), IsNaN and IsInf (detect_negative, detect_positive) are chain steps
// with ONNX's values, NaN and infinities among the inputs; the tests' BOOL outputs are 0/1; on
// tensors known at import (an integer Sign, a float IsInf) they fold.
TEST(OnnxLogic, SignShrinkIsNanIsInf) {
  ModelBuilder m(13);
  m.input("x", {40});
  m.node("Sign", {"x"}, {"s"});
  auto& shrink = m.node("Shrink", {"x"}, {"h"});
  onnx_test::attr_f(shrink, "lambd", 1.0f);
  onnx_test::attr_f(shrink, "bias", 0.5f);
  m.node("IsNaN", {"x"}, {"n"});
  onnx_test::attr_i(m.node("IsInf", {"x"}, {"i"}), "detect_positive", 0);
  m.output("s");
  m.output("h");
  declare_output(m, "n", TP::BOOL);
  declare_output(m, "i", TP::BOOL);
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 4u) << dump(g);
  EXPECT_EQ(op_at<ElementwiseChain>(g, 0).steps[0].kind, ChainStepKind::sign);
  const ChainStep& h = op_at<ElementwiseChain>(g, 1).steps[0];
  EXPECT_EQ(h.kind, ChainStepKind::shrink);
  EXPECT_EQ(h.a, 1.0f);
  EXPECT_EQ(h.b, 0.5f);
  EXPECT_EQ(op_at<ElementwiseChain>(g, 2).steps[0].kind, ChainStepKind::is_nan);
  const ChainStep& i = op_at<ElementwiseChain>(g, 3).steps[0];
  EXPECT_EQ(i.kind, ChainStepKind::is_inf);
  EXPECT_EQ(i.a, 1.0f);  // detect_negative, 1 by default
  EXPECT_EQ(i.b, 0.0f);
  std::vector<float> x = draw(40, 11);
  x[3] = NAN, x[9] = INFINITY, x[17] = -INFINITY, x[21] = 1.0f, x[22] = -1.0f, x[30] = -0.0f;
  const std::vector<Tensor> y = run_reference(g, {{{40}, Layout::any, x}});
  for (size_t k = 0; k < x.size(); ++k) {
    const float v = x[k];
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(y[0].data[k]));
    } else {
      EXPECT_EQ(y[0].data[k], v > 0 ? 1.0f : v < 0 ? -1.0f : 0.0f) << v;
    }
    EXPECT_EQ(y[1].data[k], v < -1.0f ? v + 0.5f : v > 1.0f ? v - 0.5f : 0.0f) << v;
    EXPECT_EQ(y[2].data[k], std::isnan(v) ? 1.0f : 0.0f) << v;
    EXPECT_EQ(y[3].data[k], v == -INFINITY ? 1.0f : 0.0f) << v;
  }

  ModelBuilder f(13);
  f.input("y", {3});
  f.init_i64("k", {3}, {-7, 0, 4});
  f.node("Sign", {"k"}, {"sk"});  // [-1, 0, 1]
  onnx_test::attr_i(f.node("Cast", {"sk"}, {"skf"}), "to", TP::FLOAT);
  f.init("c", {3}, {INFINITY, 2.0f, -INFINITY});
  onnx_test::attr_i(f.node("IsInf", {"c"}, {"ci"}), "detect_negative", 0);  // [1, 0, 0]
  onnx_test::attr_i(f.node("Cast", {"ci"}, {"cif"}), "to", TP::FLOAT);
  f.node("Add", {"skf", "cif"}, {"sum"});  // [0, 0, 1]
  f.node("Mul", {"y", "sum"}, {"z"});
  f.output("z");
  const Graph folded = import(f);
  ASSERT_EQ(folded.num_nodes(), 2u) << dump(folded);  // the Add of the two folded constants
  for (const ValueId v : folded.node(NodeId{0}).inputs)
    EXPECT_TRUE(folded.value(v).is_constant()) << dump(folded);
  const std::vector<Tensor> z = run_reference(folded, {{{3}, Layout::any, {2.0f, 3.0f, 5.0f}}});
  EXPECT_EQ(z[0].data, (std::vector<float>{0.0f, 0.0f, 5.0f}));
}

// Pow by a tensor exponent is a broadcasting Binary pow; a scalar constant exponent stays a chain
// step; an integer exponent known at import is converted to float32 when exact.
TEST(OnnxLogic, PowWithATensorExponent) {
  ModelBuilder m(13);
  m.input("x", {2, 5});
  m.input("e", {5});
  m.node("Pow", {"x", "e"}, {"p"});
  TP& ints = *m.graph().add_initializer();
  ModelBuilder::fill(ints, "k", {2, 1}, TP::INT32);
  ints.add_int32_data(3);
  ints.add_int32_data(-2);
  m.node("Pow", {"x", "k"}, {"q"});
  m.init("two", {}, {2.0f});
  m.node("Pow", {"x", "two"}, {"sq"});
  for (const char* o : {"p", "q", "sq"}) m.output(o);
  const Graph g = import(m);
  EXPECT_EQ(op_at<Binary>(g, 0).op, BinaryOp::pow);
  EXPECT_EQ(op_at<Binary>(g, 1).op, BinaryOp::pow);
  EXPECT_EQ(op_at<ElementwiseChain>(g, 2).steps[0].kind, ChainStepKind::pow);
  const std::vector<float> x = rnd(10, 8, -2.0f, 2.0f), e = rnd(5, 9, 0.5f, 2.5f);
  const std::vector<Tensor> y = run_reference(g, {{{2, 5}, Layout::any, x}, {{5}, Layout::any, e}});
  for (size_t k = 0; k < x.size(); ++k) {
    const float want = std::pow(x[k], e[k % 5]);  // NaN for x < 0
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(y[0].data[k])) << x[k] << " " << e[k % 5];
    else
      EXPECT_FLOAT_EQ(y[0].data[k], want);
    EXPECT_FLOAT_EQ(y[1].data[k], k < 5 ? x[k] * x[k] * x[k] : 1.0f / (x[k] * x[k]));
    EXPECT_FLOAT_EQ(y[2].data[k], x[k] * x[k]);
  }
  // Before opset 7: numpy broadcasting through the broadcast attribute, as Add has it.
  ModelBuilder legacy(6);
  legacy.input("x", {2, 5});
  legacy.input("e", {5});
  onnx_test::attr_i(legacy.node("Pow", {"x", "e"}, {"p"}), "broadcast", 1);
  legacy.node("Less", {"x", "x"}, {"l"}, "lt");
  legacy.output("p");
  legacy.output("l");
  const Graph lg = import(legacy);
  EXPECT_EQ(op_at<Binary>(lg, 0).op, BinaryOp::pow);
  ModelBuilder no_broadcast(6);
  no_broadcast.input("x", {2, 5});
  no_broadcast.input("e", {5});
  no_broadcast.node("Pow", {"x", "e"}, {"p"}, "pw");
  no_broadcast.output("p");
  EXPECT_THAT(
      import_error(no_broadcast.bytes()),
      HasSubstr("node 'pw' (Pow): shapes [2, 5] and [5] differ and attribute 'broadcast' is 0"));
  ModelBuilder huge(13);
  huge.input("x", {2});
  huge.init_i64("e", {2}, {1, (int64_t{1} << 24) + 1});
  huge.node("Pow", {"x", "e"}, {"p"}, "pw");
  huge.output("p");
  EXPECT_THAT(import_error(huge.bytes()),
              HasSubstr("node 'pw' (Pow): exponent value 16777217 is not exactly a float32"));
}

// Expand: a Reshape to the output's rank and a Tile of the size-1 axes; to its own shape it
// is a pass-through; a constant folds; an empty result or shapes that do not broadcast are errors.
TEST(OnnxLogic, ExpandIsReshapeAndTile) {
  ModelBuilder m(13);
  m.input("x", {3, 1});
  m.init_i64("shape", {3}, {2, 1, 4});
  m.node("Expand", {"x", "shape"}, {"y"});
  m.init_i64("same", {2}, {1, 1});
  m.node("Expand", {"x", "same"}, {"z"});
  m.output("y");
  m.output("z");
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 3u) << dump(g);
  EXPECT_EQ(op_at<Reshape>(g, 0).shape, (Shape{1, 3, 1}));
  EXPECT_EQ(op_at<Tile>(g, 1).repeats, (std::vector<int64_t>{2, 1, 4}));
  // z is x unchanged: a copy of the graph input that keeps the output's name.
  EXPECT_EQ(g.value(g.outputs[1]).name, "z");
  EXPECT_EQ(g.node(NodeId{2}).inputs[0], g.inputs[0]);
  const std::vector<float> x = rnd(3, 10);
  const std::vector<Tensor> y = run_reference(g, {{{3, 1}, Layout::any, x}});
  ASSERT_EQ(y[0].shape, (Shape{2, 3, 4}));
  for (size_t k = 0; k < 24; ++k) EXPECT_EQ(y[0].data[k], x[(k / 4) % 3]);

  ModelBuilder folded(13);
  folded.input("x", {2, 3});
  folded.init("c", {3}, {1.0f, 2.0f, 3.0f});
  folded.init_i64("shape", {2}, {2, 3});
  folded.node("Expand", {"c", "shape"}, {"e"});
  folded.node("Add", {"x", "e"}, {"y"});
  folded.output("y");
  const Graph fg = import(folded);
  ASSERT_EQ(fg.num_nodes(), 1u) << dump(fg);
  EXPECT_EQ(fg.value(fg.node(NodeId{0}).inputs[1]).shape, (Shape{2, 3}));

  ModelBuilder bad(13);
  bad.input("x", {3, 2});
  bad.init_i64("shape", {2}, {3, 4});
  bad.node("Expand", {"x", "shape"}, {"y"}, "ex");
  bad.output("y");
  EXPECT_THAT(import_error(bad.bytes()),
              HasSubstr("node 'ex' (Expand): cannot broadcast the input [3, 2] to [3, 4]"));
}

// Trilu: a Where of a constant mask of the last two axes between x and 0, for both triangles
// and diagonals below, on and above the main one (past the matrix too); a NaN or an infinity
// in the dropped triangle becomes 0. Of a constant it folds; k must be one integer.
TEST(OnnxLogic, TriluIsAWhereOfAConstantMask) {
  const Shape shape = {2, 3, 4, 5};
  std::vector<float> x = rnd(120, 61);
  x[7] = NAN, x[44] = INFINITY, x[90] = -INFINITY;
  for (const int upper : {0, 1})
    for (const int64_t k : {-7, -2, 0, 1, 3, 9}) {
      SCOPED_TRACE("upper " + std::to_string(upper) + " k " + std::to_string(k));
      ModelBuilder m(14);
      m.input("x", Dims(shape.begin(), shape.end()));
      m.init_i64("k", {}, {k});
      onnx_test::attr_i(m.node("Trilu", {"x", "k"}, {"y"}), "upper", upper);
      m.output("y");
      const Graph g = import(m);
      ASSERT_EQ(g.num_nodes(), 1u) << dump(g);
      EXPECT_TRUE(std::holds_alternative<Where>(g.node(NodeId{0}).op));
      const std::vector<float> y = run_reference(g, {{shape, Layout::any, x}}).at(0).data;
      for (size_t e = 0; e < x.size(); ++e) {
        const int64_t i = static_cast<int64_t>(e / 5 % 4), j = static_cast<int64_t>(e % 5);
        const bool kept = upper ? j - i >= k : j - i <= k;
        if (kept && std::isnan(x[e])) {
          EXPECT_TRUE(std::isnan(y[e])) << e;
        } else {
          EXPECT_EQ(y[e], kept ? x[e] : 0.0f) << e;
        }
      }
    }

  ModelBuilder folded(14);  // the default diagonal (0) and triangle (upper)
  folded.input("x", {2, 2});
  folded.init("c", {2, 2}, {1.0f, 2.0f, 3.0f, 4.0f});
  folded.node("Trilu", {"c"}, {"t"});
  folded.node("Add", {"x", "t"}, {"y"});
  folded.output("y");
  const Graph fg = import(folded);
  ASSERT_EQ(fg.num_nodes(), 1u) << dump(fg);
  const std::vector<float> y =
      run_reference(fg, {{{2, 2}, Layout::any, {10.0f, 20.0f, 30.0f, 40.0f}}}).at(0).data;
  EXPECT_EQ(y, (std::vector<float>{11.0f, 22.0f, 30.0f, 44.0f}));

  ModelBuilder bad(14);
  bad.input("x", {3, 3});
  bad.init_i64("k", {2}, {0, 1});
  bad.node("Trilu", {"x", "k"}, {"y"}, "tri");
  bad.output("y");
  EXPECT_THAT(import_error(bad.bytes()),
              HasSubstr("node 'tri' (Trilu): k must be one integer, got 2"));
  ModelBuilder vec(14);
  vec.input("x", {3});
  vec.node("Trilu", {"x"}, {"y"}, "tri");
  vec.output("y");
  EXPECT_THAT(import_error(vec.bytes()), HasSubstr("Trilu takes tensors of rank 2 or more"));
}

// A runtime Cast to BOOL is x != 0 (Not twice, one chain); Where's shapes must broadcast.
TEST(OnnxLogic, CastToBoolAndWhereErrors) {
  ModelBuilder m(13);
  m.input("x", {6});
  onnx_test::attr_i(m.node("Cast", {"x"}, {"b"}), "to", TP::BOOL);
  declare_output(m, "b", TP::BOOL);
  const Graph g = import(m);
  EXPECT_EQ(op_at<ElementwiseChain>(g, 0).steps.size(), 2u);
  std::vector<float> x = rnd(6, 11);
  x[2] = 0.0f;
  const std::vector<Tensor> y = run_reference(g, {{{6}, Layout::any, x}});
  for (size_t k = 0; k < x.size(); ++k) EXPECT_EQ(y[0].data[k], x[k] != 0.0f ? 1.0f : 0.0f);

  ModelBuilder bad(13);
  bad.input("c", {3}, TP::BOOL);
  bad.input("x", {4});
  bad.node("Where", {"c", "x", "x"}, {"w"}, "wh");
  bad.output("w");
  EXPECT_THAT(import_error(bad.bytes()),
              HasSubstr("node 'wh' (Where): Where node 'wh': cannot broadcast 'x' [4]"));
}

}  // namespace
}  // namespace kiln::graph
