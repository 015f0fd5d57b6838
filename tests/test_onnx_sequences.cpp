// ONNX sequence ops (graph/onnx/ops_sequence.cpp): torch's dynamo exporter writes torch.split as
// SplitToSequence and its items as SequenceAt. Each case runs the imported graph on the
// reference interpreter and compares with the slices and joins computed here from the input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/reference.h"
#include "onnx_test_models.h"

namespace kiln {
namespace {

using graph::Graph;
using graph::Shape;
using graph::Tensor;
using onnx_test::attr_i;
using onnx_test::import;
using onnx_test::import_error;
using onnx_test::ModelBuilder;
using onnx_test::rnd;
using testing::HasSubstr;
using TP = ::onnx::TensorProto;

// Columns [from, to) of a row-major rows x cols matrix.
std::vector<float> columns(const std::vector<float>& m, int64_t cols, int64_t from, int64_t to) {
  std::vector<float> out;
  for (size_t r = 0; r < m.size() / static_cast<size_t>(cols); ++r)
    for (int64_t k = from; k < to; ++k) out.push_back(m[r * static_cast<size_t>(cols) + k]);
  return out;
}

std::vector<Tensor> run(const Graph& g, const std::vector<float>& x) {
  const graph::Value& in = g.value(g.inputs.at(0));
  return graph::run_reference(g, {Tensor{in.shape, in.layout, x}});
}

// torch.split(x, 3, dim=1) on 7 channels: chunks of 3, 3 and 1; items taken by positive and
// negative positions, as the exporter's aten_getitem does.
TEST(OnnxSequences, SplitToSequenceInChunksThenSequenceAt) {
  ModelBuilder m(18);
  m.input("x", {2, 7});
  m.init_i64("chunk", {}, {3});
  m.init_i64("first", {}, {0});
  m.init_i64("last", {}, {-1});
  m.init_i64("middle", {}, {1});
  attr_i(m.node("SplitToSequence", {"x", "chunk"}, {"parts"}, "split"), "axis", 1);
  m.node("SequenceAt", {"parts", "first"}, {"a"});
  m.node("SequenceAt", {"parts", "last"}, {"c"});
  m.node("SequenceAt", {"parts", "middle"}, {"b"});
  m.output("a"), m.output("b"), m.output("c");
  const Graph g = import(m);
  const std::vector<float> x = rnd(14, 3);
  const std::vector<Tensor> out = run(g, x);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].shape, (Shape{2, 3}));
  EXPECT_EQ(out[0].data, columns(x, 7, 0, 3));
  EXPECT_EQ(out[1].data, columns(x, 7, 3, 6));
  EXPECT_EQ(out[2].shape, (Shape{2, 1}));
  EXPECT_EQ(out[2].data, columns(x, 7, 6, 7));
  EXPECT_EQ(g.value(g.outputs[1]).name, "b");
}

// Sizes as a list; without split, one per index with the axis dropped (keepdims 0); a
// constant input folds.
TEST(OnnxSequences, SplitToSequenceBySizesAndByElements) {
  ModelBuilder m(18);
  m.input("x", {3, 5});
  m.init_i64("sizes", {2}, {1, 4});
  m.init_i64("one", {}, {1});
  m.init_i64("two", {}, {2});
  attr_i(m.node("SplitToSequence", {"x", "sizes"}, {"s"}), "axis", -1);
  m.node("SequenceAt", {"s", "one"}, {"wide"});
  auto& rows = m.node("SplitToSequence", {"x"}, {"r"});
  attr_i(rows, "keepdims", 0);
  m.node("SequenceAt", {"r", "two"}, {"row2"});
  m.init("k", {2, 2}, {1.0f, 2.0f, 3.0f, 4.0f});
  m.node("SplitToSequence", {"k"}, {"ks"});
  m.node("SequenceAt", {"ks", "one"}, {"krow"});
  m.output("wide"), m.output("row2"), m.output("krow");
  const Graph g = import(m);
  const std::vector<float> x = rnd(15, 5);
  const std::vector<Tensor> out = run(g, x);
  EXPECT_EQ(out[0].shape, (Shape{3, 4}));
  EXPECT_EQ(out[0].data, columns(x, 5, 1, 5));
  EXPECT_EQ(out[1].shape, (Shape{5}));
  EXPECT_EQ(out[1].data, std::vector<float>(x.begin() + 10, x.end()));
  EXPECT_EQ(out[2].shape, (Shape{1, 2}));
  EXPECT_EQ(out[2].data, (std::vector<float>{3.0f, 4.0f}));
}

// A sequence built up (SequenceEmpty, SequenceInsert at the back and the front, Construct,
// Erase, Length) and joined by ConcatFromSequence, along an axis and stacked on a new one.
TEST(OnnxSequences, BuiltSequencesJoin) {
  ModelBuilder m(18);
  m.input("x", {2, 3});
  m.input("y", {2, 3});
  m.init_i64("front", {}, {0});
  m.node("SequenceEmpty", {}, {"e"});
  m.node("SequenceInsert", {"e", "x"}, {"s1"});
  m.node("SequenceInsert", {"s1", "y", "front"}, {"s2"});  // [y, x]
  attr_i(m.node("ConcatFromSequence", {"s2"}, {"cat"}), "axis", 1);
  auto& stack = m.node("ConcatFromSequence", {"s2"}, {"stacked"});
  attr_i(stack, "axis", 0);
  attr_i(stack, "new_axis", 1);
  m.node("SequenceConstruct", {"x", "y", "x"}, {"t"});
  m.node("SequenceErase", {"t", "front"}, {"t2"});  // [y, x]
  m.node("SequenceLength", {"t2"}, {"n"});
  // x reshaped to [n, -1]: [2, 3] only if the length is 2.
  m.init_i64("zero_axis", {1}, {0});
  m.init_i64("rest", {1}, {-1});
  m.node("Unsqueeze", {"n", "zero_axis"}, {"n1"});
  attr_i(m.node("Concat", {"n1", "rest"}, {"shape"}), "axis", 0);
  m.node("Reshape", {"x", "shape"}, {"x_again"});
  attr_i(m.node("ConcatFromSequence", {"t2"}, {"cat2"}), "axis", 0);
  m.output("cat"), m.output("stacked"), m.output("cat2"), m.output("x_again");
  const Graph g = import(m);
  const std::vector<float> x = rnd(6, 7), y = rnd(6, 8);
  const std::vector<Tensor> out = graph::run_reference(
      g, {Tensor{{2, 3}, graph::Layout::any, x}, Tensor{{2, 3}, graph::Layout::any, y}});
  std::vector<float> cat;
  for (int r = 0; r < 2; ++r) {
    cat.insert(cat.end(), y.begin() + 3 * r, y.begin() + 3 * r + 3);
    cat.insert(cat.end(), x.begin() + 3 * r, x.begin() + 3 * r + 3);
  }
  std::vector<float> stacked = y;
  stacked.insert(stacked.end(), x.begin(), x.end());
  EXPECT_EQ(out[0].shape, (Shape{2, 6}));
  EXPECT_EQ(out[0].data, cat);
  EXPECT_EQ(out[1].shape, (Shape{2, 2, 3}));
  EXPECT_EQ(out[1].data, stacked);
  EXPECT_EQ(out[2].shape, (Shape{4, 3}));
  EXPECT_EQ(out[2].data, stacked);
  EXPECT_EQ(out[3].shape, (Shape{2, 3}));
  EXPECT_EQ(out[3].data, x);
}

TEST(OnnxSequences, MisuseIsRefusedWithTheNodeNamed) {
  const auto model = [](const std::string& op, int64_t position) {
    ModelBuilder m(18);
    m.input("x", {2, 4});
    m.init_i64("chunk", {}, {2});
    m.init_i64("p", {}, {position});
    attr_i(m.node("SplitToSequence", {"x", "chunk"}, {"s"}, "split"), "axis", 1);
    if (op == "Relu") {
      m.node("Relu", {"s"}, {"y"}, "relu");
    } else if (op == "output") {
      m.graph().add_output()->set_name("s");
      return m.bytes();
    } else {
      m.node(op, {"s", "p"}, {"y"}, "at");
    }
    m.output("y");
    return m.bytes();
  };
  EXPECT_THAT(import_error(model("Relu", 0)),
              HasSubstr("node 'relu' (Relu): input 's' is a sequence; Relu takes a tensor"));
  EXPECT_THAT(import_error(model("SequenceAt", 2)),
              HasSubstr("position 2 is outside the sequence of 2 tensors"));
  EXPECT_THAT(import_error(model("SequenceAt", -3)), HasSubstr("position -3 is outside"));
  EXPECT_THAT(import_error(model("output", 0)), HasSubstr("graph output 's' is a sequence"));

  ModelBuilder sizes(18);
  sizes.input("x", {2, 4});
  sizes.init_i64("sizes", {2}, {1, 2});
  sizes.node("SplitToSequence", {"x", "sizes"}, {"s"}, "split");
  attr_i(sizes.node("ConcatFromSequence", {"s"}, {"y"}), "axis", 0);
  sizes.output("y");
  EXPECT_THAT(import_error(sizes.bytes()), HasSubstr("split sizes sum to 3, not to 2"));

  ModelBuilder many(18);  // one part per element of a long axis: refused before any is made
  many.input("x", {1, int64_t{1} << 30});
  many.init_i64("zero", {}, {0});
  attr_i(many.node("SplitToSequence", {"x"}, {"s"}, "split"), "axis", 1);
  many.node("SequenceAt", {"s", "zero"}, {"y"});
  many.output("y");
  EXPECT_THAT(import_error(many.bytes()),
              HasSubstr("a split into 1073741824 parts; Kiln takes at most 4096"));

  ModelBuilder tensor(18);
  tensor.input("x", {2, 4});
  tensor.init_i64("zero", {}, {0});
  tensor.node("SequenceAt", {"x", "zero"}, {"y"}, "at");
  tensor.output("y");
  EXPECT_THAT(import_error(tensor.bytes()),
              HasSubstr("input 'x' must be a sequence, but it is a tensor"));
}

}  // namespace
}  // namespace kiln
