// The cases of the rounding, comparison, logic, Pow and Where kernels (test_generated_logic.cpp
// on the CPU targets, test_generated_gpu.cpp through OpenCL): one-node graphs and inputs made
// for each, random but with what the ops must get right: exact halves and negative values for
// Round, elements equal to the other operand's for the comparisons, 0/1 booleans for the logic
// ops and Where's condition, negative bases with integer exponents for Pow.
#pragma once

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/ir.h"
#include "graph/reference.h"

namespace kiln::testing_util {

// How a case's inputs are drawn.
enum class Draw {
  uniform,   // [-3, 3)
  halves,    // k / 2 for integer k in [-9, 9] (every other one an exact .5), or uniform
  boolean,   // 0 or 1
  like_a,    // a copy of input 0 (broadcast shapes: its leading elements) with a third replaced
  integer,   // integers in [-4, 4] (Pow's exponents)
  positive,  // [0.25, 3)
};

struct LogicCase {
  std::string name;
  graph::Op op;
  std::vector<graph::Shape> inputs;
  std::vector<Draw> draws;                     // per input
  graph::Layout layout = graph::Layout::nchw;  // of every 4-D input
};
inline void PrintTo(const LogicCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<LogicCase> logic_cases() {
  using graph::Binary;
  using graph::BinaryOp;
  using graph::ChainStepKind;
  using graph::ElementwiseChain;
  using graph::Layout;
  const auto chain = [](std::vector<graph::ChainStep> steps) { return ElementwiseChain{steps}; };
  return {
      {"round_halves_negative",
       chain({{ChainStepKind::round, 0, 0}}),
       {{3, 7, 41}},
       {Draw::halves}},
      {"floor_ceil_halves",
       chain(
           {{ChainStepKind::floor, 0, 0}, {ChainStepKind::neg, 0, 0}, {ChainStepKind::ceil, 0, 0}}),
       {{2, 5, 9, 17}},
       {Draw::halves},
       Layout::nhwc},
      {"not_and_compare_constant",
       chain({{ChainStepKind::greater_equal, 0.5f, 0}, {ChainStepKind::logical_not, 0, 0}}),
       {{5, 33}},
       {Draw::halves}},
      {"compare_constant_each_kind",  // x == 1, then (0 or 1) < 1, > 0, <= 0, and not
       chain({{ChainStepKind::equal, 1.0f, 0},
              {ChainStepKind::less, 1.0f, 0},
              {ChainStepKind::greater, 0.0f, 0},
              {ChainStepKind::less_equal, 0.0f, 0},
              {ChainStepKind::logical_not, 0, 0}}),
       {{4, 25}},
       {Draw::halves}},
      {"equal_same_shape",
       Binary{BinaryOp::equal},
       {{4, 5, 19}, {4, 5, 19}},
       {Draw::halves, Draw::like_a}},
      {"less_broadcast_row", Binary{BinaryOp::less}, {{6, 21}, {21}}, {Draw::halves, Draw::like_a}},
      {"greater_both_broadcast",
       Binary{BinaryOp::greater},
       {{4, 1, 6}, {1, 5, 1}},
       {Draw::halves, Draw::halves}},
      {"less_equal_nhwc",
       Binary{BinaryOp::less_equal},
       {{1, 5, 7, 24}, {1, 5, 7, 24}},
       {Draw::halves, Draw::like_a},
       Layout::nhwc},
      {"greater_equal_per_channel",
       Binary{BinaryOp::greater_equal},
       {{2, 3, 9}, {3, 1}},
       {Draw::halves, Draw::like_a}},
      {"and_broadcast",
       Binary{BinaryOp::logical_and},
       {{3, 4, 17}, {4, 1}},
       {Draw::boolean, Draw::boolean}},
      {"or_same", Binary{BinaryOp::logical_or}, {{7, 33}, {7, 33}}, {Draw::boolean, Draw::boolean}},
      {"xor_scalar_operand",
       Binary{BinaryOp::logical_xor},
       {{2, 3, 4, 5}, {1}},
       {Draw::boolean, Draw::boolean}},
      {"pow_integer_exponents",
       Binary{BinaryOp::pow},
       {{5, 37}, {5, 37}},
       {Draw::uniform, Draw::integer}},
      {"pow_positive_broadcast",
       Binary{BinaryOp::pow},
       {{3, 4, 11}, {4, 1}},
       {Draw::positive, Draw::uniform}},
      {"where_same_shape",
       graph::Where{},
       {{3, 5, 19}, {3, 5, 19}, {3, 5, 19}},
       {Draw::boolean, Draw::uniform, Draw::uniform}},
      {"where_broadcast_all",
       graph::Where{},
       {{4, 1, 6}, {1, 5, 1}, {5, 6}},
       {Draw::boolean, Draw::uniform, Draw::uniform}},
      {"where_scalar_y",
       graph::Where{},
       {{2, 3, 4, 9}, {2, 3, 4, 9}, {1}},
       {Draw::boolean, Draw::uniform, Draw::uniform}},
  };
}

inline graph::Graph logic_graph(const LogicCase& c) {
  graph::GraphBuilder b;
  std::vector<graph::ValueId> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const graph::Layout l = c.inputs[i].size() == 4 ? c.layout : graph::Layout::any;
    ins.push_back(b.input(std::string(1, static_cast<char>('a' + i)), c.inputs[i], l));
  }
  b.output(b.op("op", c.op, ins));
  return b.finish();
}

// Inputs for logic_graph(c) (its graph inputs, in order), drawn with `seed`.
inline std::vector<graph::Tensor> logic_inputs(const LogicCase& c, const graph::Graph& g,
                                               uint64_t seed) {
  std::vector<graph::Tensor> ins;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const graph::Value& v = g.value(g.inputs[i]);
    const size_t n = static_cast<size_t>(graph::num_elements(v.shape));
    const std::vector<float> u = graph::random_uniform(n, 0.0f, 1.0f, seed * 31 + i);
    const std::vector<float> w = graph::random_uniform(n, -3.0f, 3.0f, seed * 37 + i);
    std::vector<float> d(n);
    for (size_t k = 0; k < n; ++k) {
      switch (c.draws[i]) {
        case Draw::uniform:
          d[k] = w[k];
          break;
        case Draw::halves:
          d[k] = u[k] < 0.7f ? std::round(w[k] * 3.0f) / 2.0f : w[k];
          break;
        case Draw::boolean:
          d[k] = u[k] < 0.5f ? 0.0f : 1.0f;
          break;
        case Draw::like_a:
          d[k] =
              u[k] < 0.35f ? std::round(w[k] * 3.0f) / 2.0f : ins[0].data[k % ins[0].data.size()];
          break;
        case Draw::integer:
          d[k] = std::round(w[k] * 4.0f / 3.0f);
          break;
        case Draw::positive:
          d[k] = 0.25f + std::fabs(w[k]);
          break;
      }
    }
    ins.push_back({v.shape, v.layout, std::move(d)});
  }
  return ins;
}

// A convolution whose output feeds a comparison by a constant, Not and Where(x > t, x, y):
// `fused` is conv -> Greater(t) -> Not alone (the passes make the chain the conv's post steps);
// otherwise the conv output also feeds Where's x, so the comparison stays its own kernel.
inline graph::Graph conv_compare_graph(bool fused) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {1, 9, 11, 8}, graph::Layout::nhwc);
  const graph::ValueId w = b.constant(
      "w", {3, 3, 8, 12}, graph::random_uniform(9 * 8 * 12, -0.3f, 0.3f, 71), graph::Layout::hwio);
  const graph::ValueId bias = b.constant("bias", {12}, graph::random_uniform(12, -0.2f, 0.2f, 72));
  graph::Conv2d attrs;
  attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = 1;
  const graph::ValueId y = b.conv2d("conv", x, w, bias, attrs);
  const graph::ValueId t = b.constant("t", {1}, {0.125f});
  const graph::ValueId gt = b.op("gt", graph::Binary{graph::BinaryOp::greater}, {y, t});
  if (fused) {
    b.output(
        b.op("not", graph::ElementwiseChain{{{graph::ChainStepKind::logical_not, 0, 0}}}, {gt}));
  } else {
    const graph::ValueId other = b.input("other", {1, 9, 11, 12}, graph::Layout::nhwc);
    b.output(b.op("where", graph::Where{}, {gt, y, other}));
  }
  return b.finish();
}

}  // namespace kiln::testing_util
