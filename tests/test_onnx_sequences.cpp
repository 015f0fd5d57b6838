// ONNX sequence ops (graph/onnx/ops_sequence.cpp): torch's dynamo exporter writes torch.split as
// SplitToSequence and its items as SequenceAt; and ScatterND as its slice assignment. Each case
// runs the imported graph on the reference interpreter and compares with the slices and joins
// computed here from the input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

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

// ScatterND of whole rows of the first axis: torch's slice_scatter (x[1:3] = u, a contiguous run,
// negative indices counted from the end), rows in any order, and the reductions with repeated
// rows applied in order; every other form is refused.
TEST(OnnxScatterNd, WholeRowsOfTheFirstAxis) {
  const auto model = [](const std::vector<int64_t>& rows, const std::string& reduction,
                        int64_t update_rows) {
    ModelBuilder m(18);
    m.input("x", {4, 3});
    m.input("u", {update_rows, 3});
    m.init_i64("idx", {static_cast<int64_t>(rows.size()), 1}, rows);
    auto& n = m.node("ScatterND", {"x", "idx", "u"}, {"y"}, "scatter");
    if (!reduction.empty()) onnx_test::attr_s(n, "reduction", reduction);
    m.output("y");
    return m;
  };
  const std::vector<float> x = rnd(12, 11), u = rnd(6, 12), all = rnd(12, 13);
  const auto run2 = [&](const ModelBuilder& m, const std::vector<float>& updates) {
    const Graph g = import(m);
    const int64_t n = static_cast<int64_t>(updates.size()) / 3;
    return graph::run_reference(
        g, {Tensor{{4, 3}, graph::Layout::any, x}, Tensor{{n, 3}, graph::Layout::any, updates}})[0];
  };
  const auto row = [](const std::vector<float>& m, int r) {
    return std::vector<float>(m.begin() + 3 * r, m.begin() + 3 * r + 3);
  };
  const auto rows = [](std::initializer_list<std::vector<float>> parts) {
    std::vector<float> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  const Tensor slice = run2(model({1, -2}, "", 2), u);
  EXPECT_EQ(slice.shape, (Shape{4, 3}));
  EXPECT_EQ(slice.data, rows({row(x, 0), row(u, 0), row(u, 1), row(x, 3)}));
  EXPECT_EQ(run2(model({0, 1, 2, 3}, "none", 4), all).data, all);
  EXPECT_EQ(run2(model({3, 0}, "", 2), u).data, rows({row(u, 1), row(x, 1), row(x, 2), row(u, 0)}));
  std::vector<float> sum = row(x, 2), biggest = row(x, 2);
  for (int k = 0; k < 3; ++k) {
    sum[k] = x[6 + k] + u[k] + u[3 + k];
    biggest[k] = std::max({x[6 + k], u[k], u[3 + k]});
  }
  const Tensor added = run2(model({2, 2}, "add", 2), u);
  EXPECT_EQ(added.data, rows({row(x, 0), row(x, 1), sum, row(x, 3)}));
  EXPECT_EQ(run2(model({2, 2}, "max", 2), u).data,
            rows({row(x, 0), row(x, 1), biggest, row(x, 3)}));

  EXPECT_THAT(import_error(model({1, 2}, "bogus", 2).bytes()),
              HasSubstr("node 'scatter' (ScatterND): reduction 'bogus' is not one of"));
  EXPECT_THAT(import_error(model({1, 2}, "", 3).bytes()), HasSubstr("updates [3, 3] do not match"));
  EXPECT_THAT(import_error(model({1, 4}, "", 2).bytes()), HasSubstr("index 4 is outside"));
  ModelBuilder elements(18);  // indices naming single elements, not rows
  elements.input("x", {4, 3});
  elements.input("u", {2});
  elements.init_i64("idx", {2, 2}, {0, 0, 1, 1});
  elements.node("ScatterND", {"x", "idx", "u"}, {"y"});
  elements.output("y");
  EXPECT_THAT(import_error(elements.bytes()), HasSubstr("whole rows of the first axis only"));
}

}  // namespace
}  // namespace kiln
