// Rewrites of normalizations and token-major layers, each against the reference run of the
// unoptimized graph on every CPU target: GroupNorms as torch exports them kept in their input's
// layout with the block's end in their kernel, and a transformer's linear layers on tokens run
// as 1x1 convolutions with what follows them folded or fused. The other rewrites:
// test_generated_rewrites.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "codegen/kernel_pipeline.h"
#include "generated_cases.h"
#include "graph/builder.h"
#include "graph/kernel_spec.h"
#include "graph/passes/pipeline.h"
#include "graph_test_util.h"
#include "runtime/kernels.h"
#include "test_generator.h"

namespace kiln {
namespace {

using namespace testing_util;

// GroupNorm as torch exports it before opset 18: a Reshape to [N, G, C/G*H*W], an
// InstanceNormalization (a LayerNorm of the last axis with a unit scale, or `uniform_scale`
// false: one of [C/G*H*W] random values, then a Mul and an Add by one value per group), a
// Reshape back, then the per-channel affine.
graph::ValueId exported_group_norm(graph::GraphBuilder& b, const std::string& name,
                                   graph::ValueId x, const graph::Shape& s, int64_t groups,
                                   bool uniform_scale, uint64_t& seed) {
  const int64_t m = s[1] / groups * s[2] * s[3];
  const graph::ValueId rows = b.op(name + "_view", graph::Reshape{{s[0], groups, m}}, {x});
  const graph::ValueId scale =
      uniform_scale ? b.constant(name + "_unit", {1}, {1.0f})
                    : b.constant(name + "_unit", {m}, graph::random_uniform(m, 0.5f, 1.5f, seed++));
  graph::ValueId y = b.op(name + "_norm", graph::LayerNorm{2, 1e-5f}, {rows, scale});
  y = b.op(name + "_in_scale", graph::Binary{graph::BinaryOp::mul},
           {y, b.constant(name + "_s", {groups, 1},
                          graph::random_uniform(groups, 0.75f, 1.25f, seed++))});
  y = b.op(name + "_in_shift", graph::Binary{graph::BinaryOp::add},
           {y, b.constant(name + "_b", {groups, 1},
                          graph::random_uniform(groups, -0.25f, 0.25f, seed++))});
  y = b.op(name + "_back", graph::Reshape{s}, {y});
  y = b.op(
      name + "_gamma", graph::Binary{graph::BinaryOp::mul},
      {y, b.constant(name + "_g", {s[1], 1, 1}, graph::random_uniform(s[1], 0.5f, 1.5f, seed++))});
  return b.op(name + "_beta", graph::Binary{graph::BinaryOp::add},
              {y, b.constant(name + "_be", {s[1], 1, 1},
                             graph::random_uniform(s[1], -0.5f, 0.5f, seed++))});
}

// Exported GroupNorms between convolutions (then a ReLU). With one group,
// simplify_exported_ops makes each a LayerNorm from axis 1 with one-value scale and shift; with
// more, a GroupNorm with its scale and shift per channel. The layout pass keeps both NHWC: no
// Reshape and no layout transform but the input's and the output's. One group: one image of
// 16 x 48 x 48 (one long row: its bands in parallel) and two of 8 x 10 x 12 (a row each).
// Groups: 32 of 2 channels (ResNet-GN's), 6 of 4 channels over two images, 4 over one row of
// pixels. Kept as it is: the same view with a scale that is not one value. Matches the
// reference on every CPU target.
TEST(GeneratedKernels, ExportedGroupNormsStayChannelsLast) {
  graph::GraphBuilder b;
  uint64_t seed = 600;
  struct Case {
    graph::Shape shape;
    int64_t groups;
    bool uniform_scale;
  };
  const std::vector<Case> cases = {{{1, 16, 48, 48}, 1, true},  {{2, 8, 10, 12}, 1, true},
                                   {{1, 64, 14, 14}, 32, true}, {{2, 24, 10, 12}, 6, true},
                                   {{1, 48, 1, 9}, 4, true},    {{1, 8, 6, 7}, 2, false}};
  for (size_t i = 0; i < cases.size(); ++i) {
    const graph::Shape& s = cases[i].shape;
    const std::string name = "gn" + std::to_string(i);
    graph::ValueId x =
        pointwise_relu(b, name + "_in", b.input(name + "_x", {s[0], 4, s[2], s[3]}), 4, s[1], seed);
    x = exported_group_norm(b, name, x, s, cases[i].groups, cases[i].uniform_scale, seed);
    x = b.op(name + "_relu", graph::Relu{}, {x});
    b.output(pointwise_relu(b, name + "_out", x, s[1], 8, seed));
  }
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  size_t transforms = 0, views = 0, sample_norms = 0, group_norms = 0;
  for (const graph::Node& n : optimized.nodes()) {
    transforms += std::holds_alternative<graph::LayoutTransform>(n.op) &&
                  !optimized.is_graph_output(n.outputs[0]) &&
                  optimized.value(n.inputs[0]).name.find("_x") == std::string::npos;
    views += std::holds_alternative<graph::Reshape>(n.op);
    const bool nhwc = optimized.value(n.inputs[0]).layout == Layout::nhwc;
    if (const auto* ln = std::get_if<graph::LayerNorm>(&n.op))
      sample_norms += ln->axis == 1 && nhwc;
    group_norms += std::holds_alternative<graph::GroupNorm>(n.op) && nhwc;
  }
  EXPECT_EQ(sample_norms, 2u) << graph::dump(optimized);
  EXPECT_EQ(group_norms, 3u) << graph::dump(optimized);
  // The last case keeps its two views, and the transforms to NCHW and back around them.
  EXPECT_EQ(views, 2u) << graph::dump(optimized);
  EXPECT_EQ(transforms, 2u) << graph::dump(optimized);
  // A sum of 36,864 floats in partial sums: 1e-4 relative, where one-kernel graphs take 1e-5.
  expect_whole_graph_matches_reference(input, optimized, 1e-4, 1e-5);
}

// The end of a GroupNorm ResNet's downsampling block: the main branch's and the shortcut's
// convolutions, each followed by an exported GroupNorm(32), their sum, a ReLU, and the next
// convolution. fuse_norm_epilogues puts the Add (the other norm's output as its residual) and
// the ReLU into one norm's kernel: two GroupNorm nodes, one with a residual and a post step, no
// Add and no chain left. Matches the reference on every CPU target.
TEST(GeneratedKernels, GroupNormBlockEndIsOneKernel) {
  graph::GraphBuilder b;
  uint64_t seed = 700;
  const graph::Shape s = {1, 64, 12, 10};
  const graph::ValueId x = b.input("x", {1, 16, 12, 10});
  const graph::ValueId main = exported_group_norm(
      b, "main", pointwise_relu(b, "conv_main", x, 16, 64, seed), s, 32, true, seed);
  const graph::ValueId shortcut = exported_group_norm(
      b, "short", pointwise_relu(b, "conv_short", x, 16, 64, seed), s, 32, true, seed);
  const graph::ValueId sum = b.op("add", graph::Binary{graph::BinaryOp::add}, {main, shortcut});
  b.output(pointwise_relu(b, "next", b.op("relu", graph::Relu{}, {sum}), 64, 8, seed));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  size_t fused = 0, plain = 0, others = 0;
  for (const graph::Node& n : optimized.nodes()) {
    if (const auto* gn = std::get_if<graph::GroupNorm>(&n.op)) {
      fused += gn->residual && gn->post.size() == 1;
      plain += !gn->residual && gn->post.empty();
    }
    others += std::holds_alternative<graph::Binary>(n.op) ||
              std::holds_alternative<graph::ElementwiseChain>(n.op);
  }
  EXPECT_EQ(fused, 1u) << graph::dump(optimized);
  EXPECT_EQ(plain, 1u) << graph::dump(optimized);
  EXPECT_EQ(others, 0u) << graph::dump(optimized);
  expect_whole_graph_matches_reference(input, optimized, 1e-4, 1e-5);
}

// A transformer's MLP on tokens, [B, T, K] x [K, M] + bias -> GELU -> x [M, K] + bias, and a
// [T, K] linear layer: matmul_to_conv makes each a 1x1 convolution of the tokens viewed as
// one image row with the bias Add as its bias and the GELU in the first one's epilogue; and
// LeViT's linear layer without a bias, its BatchNorm over the flattened tokens folded into the
// weights and its HardSwish in the epilogue: four kernels, no MatMul, Add, BatchNorm, chain or
// copy around them. Matches the reference on every CPU target.
TEST(GeneratedKernels, TokenLinearLayersRunAsConvolutions) {
  graph::GraphBuilder b;
  uint64_t seed = 800;
  const auto linear = [&](const std::string& name, graph::ValueId x, int64_t k, int64_t m) {
    const float r = 1.0f / std::sqrt(static_cast<float>(k));
    const graph::ValueId y =
        b.op(name, graph::MatMul{},
             {x, b.constant(name + "_w", {k, m}, graph::random_uniform(k * m, -r, r, seed++))});
    return b.op(name + "_bias", graph::Binary{graph::BinaryOp::add},
                {y, b.constant(name + "_b", {m}, graph::random_uniform(m, -0.2f, 0.2f, seed++))});
  };
  graph::ValueId h = linear("fc1", b.input("tokens", {2, 49, 32}), 32, 96);
  h = b.op("gelu", graph::ElementwiseChain{{graph::ChainStep{graph::ChainStepKind::gelu}}}, {h});
  b.output(linear("fc2", h, 96, 32));
  b.output(linear("head", b.input("cls", {10, 32}), 32, 17));
  // LeViT's form: no bias, a BatchNorm over the flattened tokens, views, HardSwish.
  const graph::ValueId p =
      b.op("proj", graph::MatMul{},
           {b.input("tokens2", {2, 49, 32}),
            b.constant("proj_w", {32, 48}, graph::random_uniform(32 * 48, -0.2f, 0.2f, seed++))});
  const auto vec = [&](const std::string& n, float lo, float hi) {
    return b.constant(n, {48}, graph::random_uniform(48, lo, hi, seed++));
  };
  const graph::ValueId normalized = b.batch_norm(
      "proj_bn", b.op("proj_flat", graph::Reshape{{98, 48}}, {p}), vec("proj_g", 0.5f, 1.5f),
      vec("proj_be", -0.2f, 0.2f), vec("proj_m", -0.1f, 0.1f), vec("proj_v", 0.5f, 1.5f));
  b.output(b.op("proj_act", graph::HardSwish{},
                {b.op("proj_back", graph::Reshape{{2, 49, 48}}, {normalized})}));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  size_t convs = 0, chains = 0, others = 0;
  for (const graph::Node& n : optimized.nodes()) {
    convs += std::holds_alternative<graph::Conv2d>(n.op);
    chains += std::holds_alternative<graph::ElementwiseChain>(n.op);
    others += std::holds_alternative<graph::MatMul>(n.op) ||
              std::holds_alternative<graph::Transpose>(n.op) ||
              std::holds_alternative<graph::LayoutTransform>(n.op) ||
              std::holds_alternative<graph::Binary>(n.op) ||
              std::holds_alternative<graph::BatchNorm>(n.op) ||
              std::holds_alternative<graph::HardSwish>(n.op);
  }
  EXPECT_EQ(convs, 4u) << graph::dump(optimized);
  EXPECT_EQ(chains, 0u) << graph::dump(optimized);
  EXPECT_EQ(others, 0u) << graph::dump(optimized);
  expect_whole_graph_matches_reference(input, optimized, 1e-4, 1e-5);
}

}  // namespace
}  // namespace kiln
