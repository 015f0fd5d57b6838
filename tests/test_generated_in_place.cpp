// Tensors written and read in place, through the passes and the generated kernels, against the
// reference run of the unoptimized graph on every CPU target: channel splits read as views, and
// convolutions and poolings writing their slices of a Concat's output (memory_plan.h). The
// other whole graphs: test_generated_graphs.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "graph/builder.h"
#include "graph/kernel_spec.h"
#include "graph/memory_plan.h"
#include "graph/passes/pipeline.h"
#include "graph_test_util.h"
#include "test_generator.h"

namespace kiln {
namespace {

using graph::Layout;
using namespace testing_util;

// Channel splits as views (PlanOptions::slice_views): two ShuffleNet units (split in halves,
// one through 1x1 -> depthwise 3x3 -> 1x1, concatenated with the other, then shuffled; the
// second unit splits the shuffled tensor, which the layout pass relabels, a Reshape's view) and
// a CSP block's split into 7 and 13 channels (slices that start mid-vector, the second read by
// a bottleneck and by the Concat). No Slice runs as a kernel, the readers take the halves at the
// split tensor's strides; the CSP Concat (both parts of the split, then the bottleneck) copies
// nothing: the split convolution and the bottleneck write into their places. The model matches
// the reference on every CPU target with poisoned outputs.
TEST(GeneratedKernels, ChannelSplitsAreReadInPlace) {
  graph::GraphBuilder b;
  auto conv = [&](const std::string& name, graph::ValueId x, int64_t ci, int64_t co, int k,
                  int groups, uint64_t seed) {
    return b.relu(name + "_relu",
                  graph::testing_util::random_conv(b, name, x, ci, co, k, groups, seed));
  };
  auto split = [&](const std::string& name, graph::ValueId x, int64_t from, int64_t to, int64_t h, int64_t w) {
    return b.op(name, graph::Slice{{0, from, 0, 0}, {1, to, h, w}, {1, 1, 1, 1}}, {x});
  };
  const graph::ValueId x = b.input("x", {1, 8, 10, 12});
  const graph::ValueId s = conv("stem", x, 8, 32, 3, 1, 1);
  const graph::ValueId right = conv("pw2", conv("dw", conv("pw1", split("right", s, 16, 32, 10, 12), 16, 16, 1, 1, 10),
                                                16, 16, 3, 16, 20), 16, 16, 1, 1, 30);
  const graph::ValueId cat = b.op("cat", graph::Concat{1}, {split("left", s, 0, 16, 10, 12), right});
  const graph::ValueId grouped = b.op("groups", graph::Reshape{{1, 2, 16, 10, 12}}, {cat});
  const graph::ValueId swapped = b.op("swap", graph::Transpose{{0, 2, 1, 3, 4}}, {grouped});
  const graph::ValueId shuffled = b.op("shuffle", graph::Reshape{{1, 32, 10, 12}}, {swapped});
  const graph::ValueId right2 = conv("pw3", split("right2", shuffled, 16, 32, 10, 12), 16, 16, 1, 1, 35);
  const graph::ValueId cat2 = b.op("cat2", graph::Concat{1}, {split("left2", shuffled, 0, 16, 10, 12), right2});
  const graph::ValueId c = conv("csp", cat2, 32, 20, 1, 1, 40);
  const graph::ValueId a = split("csp_a", c, 0, 7, 10, 12), bb = split("csp_b", c, 7, 20, 10, 12);
  const graph::ValueId bottleneck = conv("bottleneck", bb, 13, 13, 3, 1, 50);
  b.output(conv("csp_out", b.op("csp_cat", graph::Concat{1}, {a, bb, bottleneck}), 33, 16, 1, 1, 60));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  int strided = 0;
  std::set<std::string> concats;
  for (const graph::KernelSpec& k : lowered_kernels(optimized)) {
    const auto* o = std::get_if<graph::OpKernelSpec>(&k);
    EXPECT_FALSE(o && std::holds_alternative<graph::Slice>(o->op)) << graph::kernel_name(k) << " copies";
    if (o && std::holds_alternative<graph::Concat>(o->op)) concats.insert(graph::kernel_name(k));
    for (const graph::TensorDesc& t : graph::generated_kernel_arguments(k)) strided += !t.strides.empty();
  }
  // The ShuffleNet units' Concats copy (half of a tensor, then a convolution's output).
  EXPECT_EQ(concats, (std::set<std::string>{"cat", "cat2"}));
  // pw1, pw3 and those two Concats read the halves; the bottleneck reads its part in place.
  EXPECT_EQ(strided, 5);
  expect_whole_graph_matches_reference(input, optimized);
}

// A pooled convolution whose output is one input of a channel Concat (a DenseNet transition
// feeding the next block, an Inception branch): the fused kernel writes the pooled tensor into
// its slice of the Concat, which copies nothing, and the model matches the reference.
TEST(GeneratedKernels, PooledConvolutionWritesItsConcatSlice) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {1, 16, 18, 16});
  graph::Conv2d attrs;
  attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = 1;
  const graph::ValueId conv = b.relu(
      "relu", b.conv2d("conv", x,
                       b.constant("w", {24, 16, 3, 3}, graph::random_uniform(24 * 16 * 9, -0.2f, 0.2f, 91),
                                  Layout::oihw),
                       b.constant("b", {24}, graph::random_uniform(24, -0.2f, 0.2f, 92)), attrs));
  const graph::ValueId pooled =
      b.op("pool", graph::Pool2d{graph::PoolKind::avg, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, false, false}, {conv});
  graph::Conv2d strided;  // the other branch: a 1x1 stride-2 convolution, the same 9x8 output
  strided.stride_h = strided.stride_w = 2;
  const graph::ValueId other = b.conv2d(
      "other", x,
      b.constant("w2", {8, 16, 1, 1}, graph::random_uniform(8 * 16, -0.3f, 0.3f, 93), Layout::oihw),
      b.constant("b2", {8}, graph::random_uniform(8, -0.2f, 0.2f, 94)), strided);
  b.output(b.op("concat", graph::Concat{1}, {pooled, other}));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  size_t pooled_convs = 0;
  for (const graph::KernelSpec& k : lowered_kernels(optimized)) {
    const auto* o = std::get_if<graph::OpKernelSpec>(&k);
    EXPECT_FALSE(o && std::holds_alternative<graph::Concat>(o->op)) << graph::kernel_name(k) << " copies";
    if (const auto* c = std::get_if<graph::ConvKernelSpec>(&k)) pooled_convs += c->pool.has_value();
  }
  EXPECT_EQ(pooled_convs, 1u);
  expect_whole_graph_matches_reference(input, optimized);
}

// A dense block (DenseNet's pattern, in preact_se): each layer's BN + ReLU reads the running
// Concat, and its conv's output joins it. Every Concat is stored in place, nested in the last
// one, and each BN + ReLU is the prologue of its bottleneck conv (fuse_conv_prologues), so the
// bottleneck convs and a pooling of a middle Concat read slices at the full tensor's strides,
// and the stem and each layer's 3x3 conv write theirs.
// Poisoned arena (the test preset's environment), random inputs, reference interpreter.
TEST(GeneratedKernels, DenseBlockReadsAndWritesSlicesInPlace) {
  graph::GraphBuilder b;
  auto vec = [&](const std::string& name, int64_t n, float lo, float hi, uint64_t seed) {
    return b.constant(name, {n}, graph::random_uniform(n, lo, hi, seed));
  };
  auto conv = [&](const std::string& name, graph::ValueId x, int64_t ci, int64_t co, int k, uint64_t seed) {
    graph::Conv2d attrs;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = k / 2;
    const float r = 1.0f / std::sqrt(static_cast<float>(ci * k * k));
    return b.conv2d(name, x,
                    b.constant(name + "_w", {co, ci, k, k},
                               graph::random_uniform(co * ci * k * k, -r, r, seed), Layout::oihw),
                    vec(name + "_b", co, -0.2f, 0.2f, seed + 1), attrs);
  };
  const graph::ValueId x = b.input("x", {1, 3, 11, 13});
  graph::ValueId cat = b.relu("stem_relu", conv("stem", x, 3, 16, 3, 1));
  int64_t channels = 16;
  const int64_t growth = 12;  // not a multiple of a vector: slices start mid-vector
  graph::ValueId middle;
  for (int layer = 0; layer < 3; ++layer) {
    const std::string p = "l" + std::to_string(layer);
    const uint64_t seed = 10 * static_cast<uint64_t>(layer) + 100;
    const graph::ValueId act = b.relu(p + "_relu", b.batch_norm(p + "_bn", cat,
        vec(p + "_g", channels, 0.5f, 1.5f, seed), vec(p + "_be", channels, -0.5f, 0.5f, seed + 1),
        vec(p + "_m", channels, -0.3f, 0.3f, seed + 2), vec(p + "_v", channels, 0.5f, 2.0f, seed + 3)));
    const graph::ValueId bottleneck = b.relu(p + "_relu2", conv(p + "_conv1", act, channels, 24, 1, seed + 4));
    cat = b.op(p + "_cat", graph::Concat{1}, {cat, conv(p + "_conv2", bottleneck, 24, growth, 3, seed + 6)});
    channels += growth;
    if (layer == 1) middle = cat;
  }
  b.output(conv("transition", cat, channels, 8, 1, 200));
  b.output(b.op("pool", graph::Pool2d{graph::PoolKind::max, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false},
                {middle}));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);

  int strided = 0, prologues = 0;
  for (const graph::KernelSpec& k : lowered_kernels(optimized)) {
    const auto* o = std::get_if<graph::OpKernelSpec>(&k);
    EXPECT_FALSE(o && std::holds_alternative<graph::Concat>(o->op)) << graph::kernel_name(k) << " copies";
    EXPECT_FALSE(o && std::holds_alternative<graph::ElementwiseChain>(o->op))
        << graph::kernel_name(k) << " runs on its own";
    for (const graph::TensorDesc& t : graph::generated_kernel_arguments(k)) strided += !t.strides.empty();
    if (const auto* c = std::get_if<graph::ConvKernelSpec>(&k)) prologues += !c->pre.empty();
  }
  EXPECT_EQ(prologues, 3) << "each layer's BN + ReLU is its bottleneck conv's prologue";
  EXPECT_EQ(strided, 4) << "the three bottleneck convs and the pooling read slices";
  expect_whole_graph_matches_reference(input, optimized);
}

// Inception's reduction block (Mixed_6a) and YOLO's SPPF: max poolings whose outputs a Concat
// joins with convolutions'. The poolings write their slices of the Concat's output in place,
// at its strides (one starting mid-vector, at channel 12), so the Concat runs no kernel; a 1x1
// convolution reads the whole tensor. Poisoned arena, random inputs, reference interpreter.
TEST(GeneratedKernels, PoolingsWriteTheirConcatSlicesInPlace) {
  graph::GraphBuilder b;
  auto conv = [&](const std::string& name, graph::ValueId x, int64_t ci, int64_t co, int k, int stride,
                  uint64_t seed) {
    graph::Conv2d attrs;
    attrs.stride_h = attrs.stride_w = stride;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = k / 2;
    const float r = 1.0f / std::sqrt(static_cast<float>(ci * k * k));
    return b.relu(name + "_relu",
                  b.conv2d(name, x,
                           b.constant(name + "_w", {co, ci, k, k},
                                      graph::random_uniform(co * ci * k * k, -r, r, seed), Layout::oihw),
                           b.constant(name + "_b", {co}, graph::random_uniform(co, -0.2f, 0.2f, seed + 1)),
                           attrs));
  };
  const graph::Pool2d pool3s2{graph::PoolKind::max, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false};
  const graph::Pool2d pool5s1{graph::PoolKind::max, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, false, false};
  const graph::ValueId x = conv("stem", b.input("x", {1, 3, 17, 19}), 3, 24, 3, 1, 1);
  const graph::ValueId reduced = b.op(
      "reduce_cat", graph::Concat{1},
      {conv("branch3x3", x, 24, 12, 3, 2, 10), b.op("branch_pool", pool3s2, {x})});
  // SPPF: three chained poolings of one tensor, all four concatenated.
  const graph::ValueId p1 = b.op("sppf_p1", pool5s1, {reduced});
  const graph::ValueId p2 = b.op("sppf_p2", pool5s1, {p1});
  const graph::ValueId p3 = b.op("sppf_p3", pool5s1, {p2});
  const graph::ValueId sppf = b.op("sppf_cat", graph::Concat{1}, {reduced, p1, p2, p3});
  b.output(conv("after", sppf, 4 * 36, 16, 1, 1, 20));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  int strided_pool_outputs = 0;
  for (const graph::KernelSpec& k : lowered_kernels(optimized)) {
    const auto* o = std::get_if<graph::OpKernelSpec>(&k);
    EXPECT_FALSE(o && std::holds_alternative<graph::Concat>(o->op)) << graph::kernel_name(k) << " copies";
    if (o && std::holds_alternative<graph::Pool2d>(o->op)) strided_pool_outputs += !o->output.strides.empty();
  }
  EXPECT_EQ(strided_pool_outputs, 4) << "each pooling writes its slice in place";
  expect_whole_graph_matches_reference(input, optimized);
}

// A linear layer without bias on the last axis, [..., k] x [k, m], weights uniform in
// +-1 / sqrt(k) (seeded with `seed`).
graph::ValueId random_linear(graph::GraphBuilder& b, const std::string& name, graph::ValueId x,
                             int64_t k, int64_t m, uint64_t seed) {
  const float r = 1.0f / std::sqrt(static_cast<float>(k));
  return b.op(name, graph::MatMul{},
              {x, b.constant(name + "_w", {k, m}, graph::random_uniform(k * m, -r, r, seed))});
}

// Attention's q, k and v taken from one linear layer's output, [B, T, 3 * H * D] viewed as
// [B, T, 3, H, D] and transposed to [3, B, H, T, D]: each Slice of the leading axis is one
// contiguous run of the transposed tensor, so it stores nothing and runs no kernel (nor does its
// Squeeze), and its readers (a Softmax, the transpose of k, the second product) read the run in
// place, whether or not they read strided inputs; so are the class token and the
// other tokens cut from a linear layer's output. A Slice that is a graph output still copies.
// The model matches the reference on every CPU target.
TEST(GeneratedKernels, ContiguousSlicesAreViews) {
  graph::GraphBuilder b;
  const int64_t tokens = 10, heads = 2, dim = 8, width = heads * dim;
  uint64_t seed = 900;
  const graph::ValueId x = b.input("tokens", {1, tokens, width});
  const graph::ValueId qkv = b.op("qkv_heads", graph::Reshape{{1, tokens, 3, heads, dim}},
                                  {random_linear(b, "qkv", x, width, 3 * width, seed++)});
  const graph::ValueId t = b.op("qkv_t", graph::Transpose{{2, 0, 3, 1, 4}}, {qkv});
  const auto part = [&](const std::string& name, int64_t i) {
    const graph::ValueId s = b.op(
        name, graph::Slice{{i, 0, 0, 0, 0}, {i + 1, 1, heads, tokens, dim}, {1, 1, 1, 1, 1}}, {t});
    return b.op(name + "_squeeze", graph::Reshape{{1, heads, tokens, dim}}, {s});
  };
  // A Softmax reads dense inputs only, so the Transpose is no strided view here
  // (AttentionHeadsAreStridedViews) and its output has a buffer of its own.
  const graph::ValueId q = b.op("q_normalized", graph::Softmax{3}, {part("q", 0)});
  const graph::ValueId kt = b.op("k_t", graph::Transpose{{0, 1, 3, 2}}, {part("k", 1)});
  const graph::ValueId attn =
      b.op("attn", graph::Softmax{3}, {b.op("scores", graph::MatMul{}, {q, kt})});
  const graph::ValueId mixed = b.op("mixed", graph::MatMul{}, {attn, part("v", 2)});
  b.output(b.op("merged", graph::Reshape{{1, tokens, width}},
                {b.op("heads_back", graph::Transpose{{0, 2, 1, 3}}, {mixed})}));
  const graph::ValueId y = random_linear(b, "proj", x, width, width, seed++);
  b.output(b.relu("cls_relu", b.op("cls", graph::Slice{{0, 0, 0}, {1, 1, width}, {1, 1, 1}}, {y})));
  b.output(b.relu("rest_relu",
                  b.op("rest", graph::Slice{{0, 1, 0}, {1, tokens, width}, {1, 1, 1}}, {y})));
  b.output(b.op("out_slice", graph::Slice{{0, 2, 0}, {1, 4, width}, {1, 1, 1}}, {y}));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  const graph::ArenaPlan plan = graph::plan_arena(optimized);
  std::set<std::string> viewed;
  for (const graph::ArenaAlias& a : plan.aliases) {
    const graph::Node& n = optimized.node(a.node);
    if (!std::holds_alternative<graph::Slice>(n.op)) continue;
    EXPECT_TRUE(a.is_view()) << n.name;
    EXPECT_EQ(plan.find_alias(a.base), nullptr) << n.name << ": a view of the buffer itself";
    viewed.insert(n.name);
  }
  EXPECT_EQ(viewed, (std::set<std::string>{"q", "k", "v", "cls", "rest"}))
      << graph::describe(plan, optimized);
  for (const graph::ArenaAlias& a : plan.aliases) {
    const std::string& name = optimized.node(a.node).name;
    if (name == "k") EXPECT_EQ(a.offset, heads * tokens * dim);
    if (name == "v") EXPECT_EQ(a.offset, 2 * heads * tokens * dim);
    if (name == "rest") EXPECT_EQ(a.offset, width);
  }
  size_t slices = 0;
  for (const graph::KernelSpec& k : graph::planned_kernels(optimized, plan)) {
    const auto* o = std::get_if<graph::OpKernelSpec>(&k);
    slices += o && std::holds_alternative<graph::Slice>(o->op);
  }
  EXPECT_EQ(slices, 1u) << "only the graph output's Slice runs";
  expect_whole_graph_matches_reference(input, optimized, 1e-4, 1e-5);
}

// Attention as timm's models export it: the heads' Transpose of [B, T, 3, H, D] to
// [3, B, H, T, D] keeps D innermost, and q, k and v are each read by a kernel that takes strided
// inputs (q and k by their scales, v by the second product), so the Transpose, the Slices and
// the Squeezes copy nothing (PlanOptions::strided_views): those readers are compiled for their
// input's strides in the linear layer's output. A Transpose that moves the last axis (XCiT's
// tokens-innermost [3, B, H, D, T]) still copies. The model matches the reference on every CPU
// target.
TEST(GeneratedKernels, AttentionHeadsAreStridedViews) {
  graph::GraphBuilder b;
  const int64_t tokens = 10, heads = 2, dim = 8, width = heads * dim;
  uint64_t seed = 950;
  const auto attention = [&](const std::string& p, graph::ValueId x, std::vector<int> perm) {
    const graph::ValueId qkv = b.op(p + "heads", graph::Reshape{{1, tokens, 3, heads, dim}},
                                    {random_linear(b, p + "qkv", x, width, 3 * width, seed++)});
    const graph::ValueId t = b.op(p + "qkv_t", graph::Transpose{perm}, {qkv});
    const graph::Shape heads_shape = {1, tokens, 3, heads, dim};
    graph::Shape ts;
    for (int a : perm) ts.push_back(heads_shape[static_cast<size_t>(a)]);
    const auto part = [&](const std::string& name, int64_t i) {
      const graph::ValueId s = b.op(
          p + name, graph::Slice{{i, 0, 0, 0, 0}, {i + 1, 1, ts[2], ts[3], ts[4]}, {1, 1, 1, 1, 1}},
          {t});
      return b.op(p + name + "_squeeze", graph::Reshape{{1, ts[2], ts[3], ts[4]}}, {s});
    };
    const graph::ValueId scale = b.constant(p + "scale", {1}, {0.6f});
    const auto scaled = [&](const std::string& name, graph::ValueId v) {
      return b.op(p + name + "_scaled", graph::Binary{graph::BinaryOp::mul}, {v, scale});
    };
    const graph::ValueId q = scaled("q", part("q", 0)), k = scaled("k", part("k", 1));
    const graph::ValueId scores = b.op(p + "scores", graph::MatMul{},
                                       {q, b.op(p + "k_t", graph::Transpose{{0, 1, 3, 2}}, {k})});
    const graph::ValueId attn = b.op(p + "attn", graph::Softmax{3}, {scores});
    const graph::ValueId mixed = b.op(p + "mixed", graph::MatMul{}, {attn, part("v", 2)});
    return b.op(p + "merged", graph::Reshape{{1, tokens, width}},
                {b.op(p + "heads_back", graph::Transpose{{0, 2, 1, 3}}, {mixed})});
  };
  const graph::ValueId x = b.input("tokens", {1, tokens, width});
  b.output(attention("vit_", x, {2, 0, 3, 1, 4}));
  b.output(attention("xcit_", x, {2, 0, 3, 4, 1}));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  const graph::ArenaPlan plan = graph::plan_arena(optimized);
  std::set<std::string> strided;
  for (const graph::ArenaAlias& a : plan.aliases) {
    if (!a.is_strided()) continue;
    strided.insert(optimized.node(a.node).name);
    EXPECT_EQ(plan.find_alias(a.base), nullptr) << "a strided view of the buffer itself";
    EXPECT_EQ(a.strides.back(), 1) << optimized.node(a.node).name;
  }
  EXPECT_EQ(strided, (std::set<std::string>{"vit_qkv_t", "vit_q", "vit_k", "vit_v", "vit_q_squeeze",
                                            "vit_k_squeeze", "vit_v_squeeze"}))
      << graph::describe(plan, optimized);
  // v's strides in the linear layer's output [1, T, 3 * H * D]: heads D apart, tokens 3 * H * D.
  const graph::ArenaAlias* v = nullptr;
  for (const graph::ArenaAlias& a : plan.aliases)
    if (optimized.node(a.node).name == "vit_v_squeeze") v = &a;
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->strides, (std::vector<int64_t>{dim, dim, 3 * width, 1}));
  EXPECT_EQ(v->offset, 2 * width);
  std::set<std::string> kernels;
  for (const graph::KernelSpec& k : graph::planned_kernels(optimized, plan)) {
    const auto* o = std::get_if<graph::OpKernelSpec>(&k);
    if (o && (std::holds_alternative<graph::Transpose>(o->op) ||
              std::holds_alternative<graph::Slice>(o->op)))
      kernels.insert(graph::kernel_name(k));
    if (graph::kernel_name(k) == "vit_mixed")
      EXPECT_EQ(o->inputs[1].strides, v->strides) << "the product reads v in place";
  }
  EXPECT_EQ(kernels.count("vit_qkv_t"), 0u);
  EXPECT_EQ(kernels.count("xcit_qkv_t"), 1u) << "the last axis moves: copied";
  expect_whole_graph_matches_reference(input, optimized, 1e-4, 1e-5);
}

}  // namespace
}  // namespace kiln
