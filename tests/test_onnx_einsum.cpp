// ONNX Einsum (graph/onnx/ops_einsum.cpp): the Transposes, Reshapes, sums and MatMuls it
// imports as, run by the reference interpreter, against a direct evaluation of the equation
// here (every assignment of the letters, summed in double); and the equations it refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "graph_test_util.h"
#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using onnx_test::attr_s;
using onnx_test::Dims;
using onnx_test::import;
using onnx_test::import_error;
using onnx_test::ModelBuilder;
using onnx_test::rnd;
using testing::HasSubstr;

struct Operand {
  std::string letters;  // explicit: one lower-case letter per axis
  Dims shape;
  std::vector<float> data;
};

// out[output letters] = sum over the other letters of the product of the operands, by brute
// force over every assignment of every letter.
std::vector<double> direct_einsum(const std::vector<Operand>& in, const std::string& out,
                                  Dims* out_shape) {
  std::map<char, int64_t> size;
  for (const Operand& x : in)
    for (size_t a = 0; a < x.letters.size(); ++a) size[x.letters[a]] = x.shape[a];
  std::vector<char> letters;
  for (const auto& [ch, n] : size) letters.push_back(ch);
  out_shape->clear();
  int64_t out_count = 1;
  for (char ch : out) out_shape->push_back(size[ch]), out_count *= size[ch];
  std::vector<double> result(static_cast<size_t>(out_count), 0.0);
  std::map<char, int64_t> at;
  for (char ch : letters) at[ch] = 0;
  const auto flat = [&](const std::string& ls, const Dims& shape) {
    int64_t i = 0;
    for (size_t a = 0; a < ls.size(); ++a) i = i * shape[a] + at[ls[a]];
    return static_cast<size_t>(i);
  };
  for (;;) {
    double p = 1.0;
    for (const Operand& x : in) p *= x.data[flat(x.letters, x.shape)];
    result[flat(out, *out_shape)] += p;
    size_t k = 0;
    for (; k < letters.size(); ++k) {
      if (++at[letters[k]] < size[letters[k]]) break;
      at[letters[k]] = 0;
    }
    if (k == letters.size()) break;
  }
  return result;
}

// `equation` on operands of the given shapes and letters: inputs x0, x1, ... (or initializers
// for those marked constant), imported, run by the reference interpreter, compared with
// direct_einsum over `explicit_output`.
void expect_einsum_matches(const std::string& equation, std::vector<Operand> in,
                           const std::string& explicit_output, std::vector<bool> constant = {}) {
  SCOPED_TRACE(equation);
  constant.resize(in.size(), false);
  ModelBuilder m(12);
  std::vector<std::string> names;
  std::vector<Tensor> feeds;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : in[i].shape) n *= d;
    in[i].data = rnd(n, 50 + i);
    names.push_back("x" + std::to_string(i));
    if (constant[i]) {
      m.init(names.back(), in[i].shape, in[i].data);
    } else {
      m.input(names.back(), in[i].shape);
    }
  }
  attr_s(m.node("Einsum", names, {"y"}, "einsum"), "equation", equation);
  m.output("y");
  const Graph g = import(m);
  for (size_t i = 0; i < in.size(); ++i)
    if (!constant[i]) {
      const Value& v = g.value(g.inputs.at(feeds.size()));
      feeds.push_back({v.shape, v.layout, in[i].data});
    }
  const Tensor got = run_reference(g, feeds)[0];
  Dims want_shape;
  const std::vector<double> want = direct_einsum(in, explicit_output, &want_shape);
  ASSERT_EQ(got.shape, Shape(want_shape.begin(), want_shape.end()));
  const std::vector<float> want_f(want.begin(), want.end());
  EXPECT_LE(worst_error_ratio(got.data, want_f, 1e-5, 1e-6), 1.0);
}

TEST(OnnxEinsum, AttentionProductsAndLinearMaps) {
  // q k^T and attn v per batch and head, as torch.einsum writes attention.
  expect_einsum_matches("bhid,bhjd->bhij", {{"bhid", {2, 3, 5, 4}}, {"bhjd", {2, 3, 6, 4}}},
                        "bhij");
  expect_einsum_matches("bhij,bhjd->bhid", {{"bhij", {2, 3, 5, 6}}, {"bhjd", {2, 3, 6, 4}}},
                        "bhid");
  // A linear map over the last axis with constant weights: one MatMul by the 2-D weights.
  expect_einsum_matches("bij,jk->bik", {{"bij", {2, 7, 5}}, {"jk", {5, 3}}}, "bik", {false, true});
  // The contracted axis first, free letters on both sides and in a new order.
  expect_einsum_matches("nb,anm->mba", {{"nb", {4, 3}}, {"anm", {2, 4, 5}}}, "mba");
  // A batch letter that is not the first axis of either operand.
  expect_einsum_matches("ibj,jbk->bik", {{"ibj", {3, 2, 4}}, {"jbk", {4, 2, 5}}}, "bik");
}

TEST(OnnxEinsum, SumsTransposesAndScalars) {
  expect_einsum_matches("ij->ji", {{"ij", {3, 4}}}, "ji");
  expect_einsum_matches("ijk->j", {{"ijk", {2, 3, 4}}}, "j");
  expect_einsum_matches("ij->", {{"ij", {3, 4}}}, "");
  expect_einsum_matches("i,i->", {{"i", {6}}, {"i", {6}}}, "");
  // k only in the first operand and not in the output: summed before the product.
  expect_einsum_matches("ijk,jl->il", {{"ijk", {2, 3, 4}}, {"jl", {3, 5}}}, "il");
  // An outer product (nothing contracted).
  expect_einsum_matches("i,j->ij", {{"i", {3}}, {"j", {4}}}, "ij");
}

TEST(OnnxEinsum, ImplicitOutputEllipsisAndThreeOperands) {
  // Without "->": the letters used once, in alphabetical order.
  expect_einsum_matches("ij,jk", {{"ij", {3, 4}}, {"jk", {4, 5}}}, "ik");
  expect_einsum_matches("ba,ac", {{"ba", {3, 4}}, {"ac", {4, 5}}}, "bc");
  // The ellipsis as leading batch axes (expanded to letters the test writes out).
  expect_einsum_matches("...ij,...jk->...ik", {{"xyij", {2, 3, 4, 5}}, {"xyjk", {2, 3, 5, 6}}},
                        "xyik");
  expect_einsum_matches("ij,jk,kl->il", {{"ij", {2, 3}}, {"jk", {3, 4}}, {"kl", {4, 5}}}, "il");
}

TEST(OnnxEinsum, RefusalsNameTheProblem) {
  const auto error_for = [](const std::string& eq, const std::vector<Dims>& shapes) {
    ModelBuilder m(12);
    std::vector<std::string> names;
    for (size_t i = 0; i < shapes.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      m.input(names.back(), shapes[i]);
    }
    attr_s(m.node("Einsum", names, {"y"}, "einsum"), "equation", eq);
    m.output("y");
    return import_error(m.bytes());
  };
  EXPECT_THAT(error_for("ii->i", {{3, 3}}), HasSubstr("repeats within a term (a diagonal)"));
  EXPECT_THAT(error_for("ij,jk->ik", {{3, 4, 2}, {4, 5}}),
              HasSubstr("has 2 subscripts for an input of rank 3"));
  EXPECT_THAT(error_for("ij,jk->ik", {{3, 4}, {5, 6}}),
              HasSubstr("subscript 'j' has sizes 4 and 5"));
  EXPECT_THAT(error_for("ij->ik", {{3, 4}}), HasSubstr("output subscript 'k' is in no input"));
  EXPECT_THAT(error_for("iJ->i", {{3, 4}}), HasSubstr("is not a lower-case letter"));
  EXPECT_THAT(error_for("ij,jk->ik", {{3, 4}}), HasSubstr("has 2 terms for 1 inputs"));
  EXPECT_THAT(error_for("...ij,...jk->...ik", {{2, 3, 4}, {3, 2, 4, 5}}),
              HasSubstr("the ellipsis stands for different numbers of axes"));
}

}  // namespace
}  // namespace kiln::graph
