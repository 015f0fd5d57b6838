// Helpers shared by the graph-layer tests: op counts, seeded inputs, reference-output comparison.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "graph/builder.h"
#include "graph/ir.h"
#include "graph/reference.h"

namespace kiln::graph::testing_util {

// A path in GoogleTest's temporary directory that no other process's test uses (the process id
// is in the name): two checkouts testing at once on one machine must not share files.
inline std::string unique_temp_path(const std::string& name) {
  return ::testing::TempDir() + "kiln_" + std::to_string(::getpid()) + "_" + name;
}

// How many nodes of `g` hold op T.
template <typename T>
int count_ops(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes()) n += std::holds_alternative<T>(node.op) ? 1 : 0;
  return n;
}

// One tensor per graph input, in its declared shape and layout, uniform in [lo, hi).
inline std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed, float lo = -1.0f,
                                         float hi = 1.0f) {
  std::vector<Tensor> ins;
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    const Value& v = g.value(g.inputs[k]);
    ins.push_back(
        {v.shape, v.layout, random_uniform(num_elements(v.shape), lo, hi, seed + 97 * k)});
  }
  return ins;
}

// Reference outputs of `before` vs `after` on the same inputs, `after`'s converted to the
// layout of `before`'s (the layout pass leaves outputs NHWC). With `after_layout`, each of
// `after`'s outputs must also be in that layout.
inline void expect_same_outputs(const Graph& before, const Graph& after,
                                const std::vector<Tensor>& ins, double rtol, double atol,
                                std::optional<Layout> after_layout = std::nullopt) {
  const std::vector<Tensor> want = run_reference(before, ins);
  const std::vector<Tensor> got = run_reference(after, ins);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (after_layout) {
      EXPECT_EQ(got[i].layout, *after_layout) << "output " << i;
    }
    const Tensor g = to_layout(got[i], want[i].layout);
    ASSERT_EQ(g.shape, want[i].shape) << "output " << i;
    EXPECT_LE(worst_error_ratio(g.data, want[i].data, rtol, atol), 1.0) << "output " << i;
  }
}

// Like expect_same_outputs, but outputs are compared as they come (no layout conversion), every
// output must be non-zero, and atol is per unit of the output's largest magnitude (at least 1).
// For fold_batch_norm: a variance of 1e-4 scales a channel by ~100, and near a zero crossing
// float32 rounding of the unfolded conv output then shows up as an absolute error of
// ~1e-8 * max|out| that no relative tolerance covers.
inline void expect_same_outputs_atol_per_unit(const Graph& before, const Graph& after,
                                              const std::vector<Tensor>& ins, double rtol,
                                              double atol_per_unit) {
  const std::vector<Tensor> want = run_reference(before, ins);
  const std::vector<Tensor> got = run_reference(after, ins);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].shape, want[i].shape) << "output " << i;
    const double scale = max_abs_diff(want[i].data, std::vector<float>(want[i].data.size(), 0.0f));
    EXPECT_GT(scale, 0.0) << "output " << i << " is all zeros: the comparison proves nothing";
    const double atol = atol_per_unit * std::max(1.0, scale);
    EXPECT_LE(worst_error_ratio(got[i].data, want[i].data, rtol, atol), 1.0) << "output " << i;
  }
}

// A same-padded k x k convolution of x, ci -> co channels in `groups` groups, with weights
// uniform in +-gain / sqrt(fan-in) (seeded with `seed`) and biases in +-0.2 (seed + 1), so that
// activations keep their size through a stack of them.
inline ValueId random_conv(GraphBuilder& b, const std::string& name, ValueId x, int64_t ci,
                           int64_t co, int k, int groups, uint64_t seed, float gain = 1.0f) {
  Conv2d attrs;
  attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = k / 2;
  attrs.groups = groups;
  const int64_t fan_in = ci / groups * k * k;
  const float r = gain / std::sqrt(static_cast<float>(fan_in));
  return b.conv2d(name, x,
                  b.constant(name + "_w", {co, ci / groups, k, k},
                             random_uniform(co * fan_in, -r, r, seed), Layout::oihw),
                  b.constant(name + "_b", {co}, random_uniform(co, -0.2f, 0.2f, seed + 1)), attrs);
}

}  // namespace kiln::graph::testing_util
