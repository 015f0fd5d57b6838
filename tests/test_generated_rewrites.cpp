// Graph rewrites that change how the generated kernels compute, each against the reference run
// of the unoptimized graph on every CPU target: an average pooling computed before the 1x1
// convolution it commutes with, a squeeze-and-excitation scale folded into the weights of the
// convolution after it, convolutions of a few wide groups split into dense ones, and channel
// shuffles, Slices and nearest Resizes kept NHWC by the layout pass. Exported GroupNorms and
// token linear layers: test_generated_norms_tokens.cpp. Whole graphs otherwise:
// test_generated_graphs.cpp.
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

// DepthToSpace in both modes (DCR, as a transposed convolution whose window is its stride is
// imported, and CRD) and SpaceToDepth, each a Reshape, Transpose, Reshape between convolutions:
// the layout pass makes each one transpose of the NHWC bytes, of as few axes as the axes that
// move together allow (DCR [H, W, b, b * C'] -> [H, b, W, b * C'], CRD [H, W, C', b, b] -> [H,
// b, W, b, C']), and leaves no layout transform but the input's. Matches the reference on every
// CPU target.
TEST(GeneratedKernels, DepthToSpaceAndSpaceToDepthStayChannelsLast) {
  graph::GraphBuilder b;
  uint64_t seed = 800;
  const int64_t h = 6, w = 8;
  const graph::ValueId x = pointwise_relu(b, "stem", b.input("input", {1, 8, h, w}), 8, 32, seed);
  struct Case {
    const char* name;
    graph::Shape split;
    std::vector<int> perm;
    graph::Shape merged;
    size_t rank;  // of the byte transpose
  };
  const Case cases[] = {
      {"dcr", {1, 2, 2, 8, h, w}, {0, 3, 4, 1, 5, 2}, {1, 8, 2 * h, 2 * w}, 4},
      {"crd", {1, 8, 2, 2, h, w}, {0, 1, 4, 2, 5, 3}, {1, 8, 2 * h, 2 * w}, 5},
      {"space_to_depth", {1, 32, h / 2, 2, w / 2, 2}, {0, 3, 5, 1, 2, 4}, {1, 128, h / 2, w / 2}, 4},
  };
  for (const Case& c : cases) {
    const std::string p = c.name;
    const graph::ValueId split = b.op(p + "_split", graph::Reshape{c.split}, {x});
    const graph::ValueId moved = b.op(p + "_transpose", graph::Transpose{c.perm}, {split});
    const graph::ValueId merged = b.op(p + "_merge", graph::Reshape{c.merged}, {moved});
    b.output(pointwise_relu(b, p + "_conv", merged, c.merged[1], 16, seed));
  }
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  size_t transforms = 0, regroupings = 0;
  for (const graph::Node& n : optimized.nodes()) {
    transforms += std::holds_alternative<graph::LayoutTransform>(n.op) &&
                  optimized.value(n.inputs[0]).name != "input" && !optimized.is_graph_output(n.outputs[0]);
    if (const auto* t = std::get_if<graph::Transpose>(&n.op)) {
      ++regroupings;
      for (const Case& c : cases)
        if (n.name == std::string(c.name) + "_transpose") EXPECT_EQ(t->perm.size(), c.rank) << n.name;
    }
  }
  EXPECT_EQ(transforms, 0u) << graph::dump(optimized);
  EXPECT_EQ(regroupings, std::size(cases)) << graph::dump(optimized);
  expect_whole_graph_matches_reference(input, optimized);
}

// An average pooling after a 1x1 convolution with a linear epilogue runs before it, in the same
// kernel (graph::pools_before_conv): a DenseNet transition (BN, ReLU, 1x1 conv, 2x2/s2 average
// pooling), overlapping 3x3/s2 windows, and a 1x1 conv without a prologue. Pooled after, as
// before: a ReLU between them, a padded pooling, and a ceil_mode pooling whose last window
// reaches past the image. Each kind is checked by name, and the model matches the reference,
// which pools after the convolution, on every CPU target.
TEST(GeneratedKernels, AveragePoolingBeforeAPointwiseConvolution) {
  graph::GraphBuilder b;
  auto vec = [&](const std::string& name, int64_t n, float lo, float hi, uint64_t seed) {
    return b.constant(name, {n}, graph::random_uniform(n, lo, hi, seed));
  };
  // Read by every case, so no BN folds into it.
  const graph::ValueId x =
      b.conv2d("stem", b.input("input", {1, 8, 20, 22}),
               b.constant("stem_w", {32, 8, 1, 1}, graph::random_uniform(256, -0.4f, 0.4f, 11),
                          Layout::oihw),
               vec("stem_b", 32, -0.2f, 0.2f, 12), graph::Conv2d{});
  using graph::Pool2d;
  using graph::PoolKind;
  struct Case {
    const char* name;
    bool prologue, relu_between, first;
    Pool2d pool;
  };
  const auto avg = [](int kh, int kw, int sh, int sw, int pad, bool ceil_mode) {
    return Pool2d{PoolKind::avg, kh, kw, sh, sw, pad, pad, pad, pad, 1, 1, ceil_mode, false};
  };
  const Case cases[] = {
      {"transition", true, false, true, avg(2, 2, 2, 2, 0, false)},
      {"overlapping", true, false, true, avg(3, 3, 2, 2, 0, false)},
      {"no_prologue", false, false, true, avg(2, 3, 2, 1, 0, false)},
      {"relu_between", true, true, false, avg(2, 2, 2, 2, 0, false)},
      {"padded", true, false, false, avg(3, 3, 2, 2, 1, false)},
      {"ceil_past_edge", true, false, false, avg(3, 3, 2, 2, 0, true)},
  };
  uint64_t seed = 400;
  for (const Case& c : cases) {
    const std::string p = c.name;
    graph::ValueId in = x;
    if (c.prologue)
      in = b.relu(p + "_relu", b.batch_norm(p + "_bn", x, vec(p + "_g", 32, 0.5f, 1.5f, seed),
                                            vec(p + "_be", 32, 0.2f, 0.8f, seed + 1),
                                            vec(p + "_m", 32, -0.3f, 0.3f, seed + 2),
                                            vec(p + "_v", 32, 0.5f, 2.0f, seed + 3)));
    const graph::ValueId w = b.constant(
        p + "_w", {24, 32, 1, 1}, graph::random_uniform(24 * 32, -0.2f, 0.2f, seed + 4), Layout::oihw);
    graph::ValueId y = b.conv2d(p, in, w, vec(p + "_b", 24, -0.2f, 0.2f, seed + 5), graph::Conv2d{});
    if (c.relu_between) y = b.relu(p + "_after", y);
    b.output(b.op(p + "_pool", c.pool, {y}));
    seed += 10;
  }
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  size_t checked = 0;
  for (const graph::KernelSpec& k : lowered_kernels(optimized)) {
    const auto* conv = std::get_if<graph::ConvKernelSpec>(&k);
    if (!conv || conv->name == "stem") continue;
    ASSERT_TRUE(conv->pool.has_value()) << conv->name << " was not fused with its pooling";
    for (const Case& c : cases) {
      if (conv->name != c.name) continue;
      ++checked;
      EXPECT_EQ(graph::pools_before_conv(*conv), c.first) << conv->name;
      // Pooled first, the convolution computes the pooled output and reads the pooled input.
      EXPECT_EQ(graph::conv_output_nhwc(*conv) == conv->output.shape, c.first) << conv->name;
      EXPECT_EQ(graph::conv_input_nhwc(*conv) == conv->input.shape, !c.first) << conv->name;
    }
  }
  EXPECT_EQ(checked, std::size(cases)) << graph::dump(optimized);
  expect_whole_graph_matches_reference(input, optimized);
}

// Squeeze-and-excitation scales (a Mul by a [N, C, 1, 1] tensor) go into the dense convolution
// that alone reads the product (Conv2d::input_scale), which scales its weights per image: a 1x1
// projection and a padded 3x3 (the zero padding stays zero), with a batch of 2 so that each
// image gets its own scale. Kept apart: a product that is also a graph output, one read by a
// grouped convolution, and one whose convolution has more weights per input channel than the
// image has pixels (scaling them would cost more than scaling the image). Each is checked by
// name, and the model matches the reference on every CPU target.
TEST(GeneratedKernels, SqueezeExcitationScaleFoldsIntoTheConvolution) {
  graph::GraphBuilder b;
  uint64_t seed = 700;
  auto conv = [&](const std::string& name, graph::ValueId in, int64_t ci, int64_t co, int k,
                  int groups, float gain = 1.0f) {
    seed += 2;  // the weights' seed and the biases'
    return graph::testing_util::random_conv(b, name, in, ci, co, k, groups, seed - 2, gain);
  };
  const graph::ValueId x =
      b.relu("stem_relu", conv("stem", b.input("input", {2, 8, 17, 15}), 8, 16, 3, 1));
  // The excitation: global average pooling, 1x1 down, ReLU, 1x1 up, Sigmoid: [2, 16, 1, 1].
  // Its convolutions' weights are large, so that the two images' scales differ well beyond the
  // tolerance although their pixel means are close (a kernel that scaled both images by the
  // first one's scale failed here).
  const graph::ValueId squeezed = b.op("gap", graph::GlobalPool{graph::PoolKind::avg}, {x});
  const graph::ValueId s = b.op(
      "excite", graph::Sigmoid{},
      {conv("fc2", b.relu("fc1_relu", conv("fc1", squeezed, 16, 4, 1, 1, 40.0f)), 4, 16, 1, 1, 8.0f)});
  auto scaled = [&](const std::string& name) {
    return b.op(name + "_scale", graph::Binary{graph::BinaryOp::mul}, {x, s});
  };
  struct Case {
    const char* name;
    int k, groups;
    int64_t co;
    bool output_too, fused;
  };
  const Case cases[] = {
      {"project", 1, 1, 24, false, true},
      {"padded_3x3", 3, 1, 24, false, true},  // 216 weights per input channel, 255 pixels
      {"shared", 1, 1, 24, true, false},
      {"grouped", 3, 4, 24, false, false},
      {"weights_dearer", 1, 1, 256, false, false},  // 256 weights per input channel
  };
  for (const Case& c : cases) {
    const graph::ValueId m = scaled(c.name);
    if (c.output_too) b.output(m);
    b.output(conv(c.name, m, 16, c.co, c.k, c.groups));
  }
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  const Halide::Target best(
      runtime::cpu_targets()[static_cast<size_t>(runtime::best_cpu_target())]);
  size_t checked = 0;
  for (const graph::KernelSpec& k : lowered_kernels(optimized)) {
    const auto* spec = std::get_if<graph::ConvKernelSpec>(&k);
    if (!spec) continue;
    for (const Case& c : cases) {
      if (spec->name != c.name) continue;
      ++checked;
      EXPECT_EQ(spec->input_scale.has_value(), c.fused) << spec->name << "\n" << graph::dump(optimized);
      if (c.fused) EXPECT_EQ(spec->input_scale->shape, (graph::Shape{2, 1, 1, 16})) << spec->name;
      // Winograd reads transformed weights: the scale multiplies its input instead (it had been
      // ignored there, and this case came out wrong once its image was large enough for it).
      if (std::string(c.name) == "padded_3x3")
        EXPECT_EQ(codegen::default_schedule(k, best).rfind("winograd", 0), 0u)
            << codegen::default_schedule(k, best);
    }
  }
  EXPECT_EQ(checked, std::size(cases)) << graph::dump(optimized);
  expect_whole_graph_matches_reference(input, optimized);
}

// ShuffleNetV2's unit: a channel Split (two Slices), a branch of convolutions on one half,
// Concat, and the channel shuffle (Reshape to [N, 2, C/2, H, W], Transpose(0, 2, 1, 3, 4),
// Reshape back), twice. The layout pass keeps it all NHWC: the shuffle becomes a transpose of
// the two innermost axes of the bytes between relabels (the axes of the pixels merged), the
// Slices remap their axes, and no
// layout transform is left but the input's. Matches the reference on every CPU target.
TEST(GeneratedKernels, ChannelShuffleStaysChannelsLast) {
  graph::GraphBuilder b;
  const int64_t c = 24, h = 9, w = 11;
  uint64_t seed = 500;
  const auto conv = [&](const std::string& name, graph::ValueId x, int64_t ci, int64_t co) {
    return pointwise_relu(b, name, x, ci, co, seed);
  };
  graph::ValueId x = conv("stem", b.input("input", {1, 8, h, w}), 8, c);
  for (int unit = 0; unit < 2; ++unit) {
    const std::string u = "unit" + std::to_string(unit);
    const graph::ValueId half0 =
        b.op(u + "_split0", graph::Slice{{0, 0, 0, 0}, {1, c / 2, h, w}, {1, 1, 1, 1}}, {x});
    const graph::ValueId half1 =
        b.op(u + "_split1", graph::Slice{{0, c / 2, 0, 0}, {1, c, h, w}, {1, 1, 1, 1}}, {x});
    const graph::ValueId branch = conv(u + "_branch", half1, c / 2, c / 2);
    const graph::ValueId cat = b.op(u + "_concat", graph::Concat{1}, {half0, branch});
    const graph::ValueId grouped = b.op(u + "_reshape", graph::Reshape{{1, 2, c / 2, h, w}}, {cat});
    const graph::ValueId swapped = b.op(u + "_transpose", graph::Transpose{{0, 2, 1, 3, 4}}, {grouped});
    x = b.op(u + "_shuffle", graph::Reshape{{1, c, h, w}}, {swapped});
  }
  b.output(conv("head", x, c, 16));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  size_t transforms = 0, shuffles = 0, nhwc_slices = 0;
  for (const graph::Node& n : optimized.nodes()) {
    // Transforms of the model's input and output aside.
    transforms += std::holds_alternative<graph::LayoutTransform>(n.op) &&
                  optimized.value(n.inputs[0]).name != "input" && !optimized.is_graph_output(n.outputs[0]);
    // [N * H * W, 2, C / 2] -> [N * H * W, C / 2, 2] (the pixels' axes move together).
    if (const auto* t = std::get_if<graph::Transpose>(&n.op))
      shuffles += t->perm == std::vector<int>{0, 2, 1};
    if (std::holds_alternative<graph::Slice>(n.op))
      nhwc_slices += optimized.value(n.outputs[0]).layout == Layout::nhwc;
  }
  EXPECT_EQ(transforms, 0u) << graph::dump(optimized);
  EXPECT_EQ(shuffles, 2u) << graph::dump(optimized);
  EXPECT_EQ(nhwc_slices, 4u) << graph::dump(optimized);
  expect_whole_graph_matches_reference(input, optimized);
}

// Convolutions of a few wide groups (graph::split_grouped_convs) become a dense convolution per
// group between a Slice and a Concat: radix-2 3x3 convolutions as ResNeSt has them (32 -> 64 and
// 32 -> 32 channels per group, the second with a BatchNorm and ReLU) and one of 4 groups. Kept
// whole: 24 channels per group, 8 groups, stride 2, a 1x1 window and an output narrower than 13.
// The Slices and the Concats copy nothing (the memory plan makes them views), each group is a
// dense kernel, and the model matches the reference on every CPU target.
TEST(GeneratedKernels, FewWideGroupsSplitIntoDenseConvolutions) {
  struct Case {
    std::string name;
    int64_t ci, co, k, hw;
    int groups, stride;
    bool split;
  };
  const std::vector<Case> cases = {{"radix2_32_to_64", 64, 128, 3, 15, 2, 1, true},
                                   {"radix2_32_bn", 64, 64, 3, 14, 2, 1, true},
                                   {"four_groups", 128, 128, 3, 13, 4, 1, true},
                                   {"narrow_groups", 48, 48, 3, 14, 2, 1, false},
                                   {"eight_groups", 256, 256, 3, 14, 8, 1, false},
                                   {"stride2", 64, 64, 3, 27, 2, 2, false},
                                   {"pointwise", 64, 64, 1, 14, 2, 1, false},
                                   {"small_output", 64, 64, 3, 12, 2, 1, false}};
  graph::GraphBuilder b;
  uint64_t seed = 700;
  for (const Case& c : cases) {
    graph::ValueId x = pointwise_relu(b, c.name + "_in", b.input(c.name + "_x", {1, 8, c.hw, c.hw}),
                                      8, c.ci, seed);
    const int64_t cig = c.ci / c.groups;
    const float r = 1.0f / std::sqrt(static_cast<float>(cig * c.k * c.k));
    graph::Conv2d attrs;
    attrs.groups = c.groups;
    attrs.stride_h = attrs.stride_w = c.stride;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = static_cast<int>(c.k / 2);
    const graph::ValueId w =
        b.constant(c.name + "_w", {c.co, cig, c.k, c.k},
                   graph::random_uniform(c.co * cig * c.k * c.k, -r, r, seed++), Layout::oihw);
    const graph::ValueId bias =
        b.constant(c.name + "_b", {c.co}, graph::random_uniform(c.co, -0.2f, 0.2f, seed++));
    graph::ValueId y = b.conv2d(c.name, x, w, bias, attrs);
    if (c.name == "radix2_32_bn") {
      auto vec = [&](const std::string& n, float lo, float hi) {
        return b.constant(c.name + n, {c.co}, graph::random_uniform(c.co, lo, hi, seed++));
      };
      y = b.batch_norm(c.name + "_bn", y, vec("_g", 0.5f, 1.5f), vec("_be", -0.2f, 0.2f),
                       vec("_m", -0.1f, 0.1f), vec("_v", 0.5f, 1.5f));
    }
    b.output(pointwise_relu(b, c.name + "_out", b.relu(c.name + "_relu", y), c.co, 16, seed));
  }
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  std::map<std::string, int> dense_groups;  // case -> its split convolutions
  for (const graph::Node& n : optimized.nodes())
    if (const auto* c = std::get_if<graph::Conv2d>(&n.op);
        c && n.name.find("/group") != std::string::npos) {
      EXPECT_EQ(c->groups, 1) << n.name;
      EXPECT_FALSE(c->activation.is_identity()) << n.name << ": the ReLU goes with every group";
      ++dense_groups[n.name.substr(0, n.name.find('/'))];
    }
  for (const Case& c : cases) EXPECT_EQ(dense_groups[c.name], c.split ? c.groups : 0) << c.name;
  // Every Slice and Concat of the split is a view: no kernel of its own.
  for (const graph::KernelSpec& k : lowered_kernels(optimized)) {
    const std::string& name = graph::kernel_name(k);
    EXPECT_TRUE(name.find("_input") == std::string::npos ||
                name.find("/group") == std::string::npos)
        << name;
    for (const Case& c : cases)
      if (c.split) EXPECT_NE(name, c.name) << "the Concat of " << c.name << " is a kernel";
  }
  expect_whole_graph_matches_reference(input, optimized);
}

// Sums over a radix axis (graph::split_radix_sums), as ResNeSt's split attention and SKNet's
// selective kernel write them: a convolution's [1, R*C, H, W] output viewed as [1, R, C, H, W],
// summed over axis 1 for the attention's input (then a mean over H and W, a 1x1 convolution and
// a 5-D Softmax over the radix axis), and weighted by the attention and summed again. Radix 2
// without keepdims, radix 4 with keepdims and a Reshape back, radix 3 weighted by a
// [1, R*C, 1, 1] attention split like the image, and three branches stacked (Unsqueeze and a
// Concat on the radix axis, as timm's SelectiveKernel writes torch.stack). Kept: a sum over axis 2
// of the same view, and a radix of 16. The split sums leave no Reduce and no 5-D value; the model
// matches the reference on every CPU target.
TEST(GeneratedKernels, RadixSumsSplitIntoChannelSlices) {
  graph::GraphBuilder b;
  uint64_t seed = 800;
  using graph::BinaryOp;
  const auto sum_over = [&](const std::string& name, graph::ValueId x, int axis, bool keepdims) {
    return b.op(name, graph::Reduce{{axis}, keepdims, graph::ReduceKind::sum}, {x});
  };
  struct Case {
    std::string name;
    int64_t radix, c, hw;
    bool keepdims, softmax;  // the attention: a 5-D Softmax, or a split [1, R*C, 1, 1]
    int axis;                // the sum's axis (1: split)
    bool stacked = false;    // torch.stack's form: the branches unsqueezed and concatenated
  };
  const std::vector<Case> cases = {{"radix2", 2, 32, 14, false, true, 1},
                                   {"radix4_keepdims", 4, 16, 9, true, true, 1},
                                   {"radix3_split_attention", 3, 16, 11, false, false, 1},
                                   {"stacked3", 3, 16, 10, false, true, 1, true},
                                   {"axis2_kept", 2, 16, 8, false, true, 2},
                                   {"radix16_kept", 16, 4, 8, false, true, 1}};
  for (const Case& c : cases) {
    const int64_t rc = c.radix * c.c;
    const graph::Shape view{1, c.radix, c.c, c.hw, c.hw};
    const graph::ValueId x = pointwise_relu(
        b, c.name + "_conv", b.input(c.name + "_x", {1, 8, c.hw, c.hw}), 8, rc, seed);
    graph::ValueId x5 = b.op(c.name + "_view", graph::Reshape{view}, {x});
    if (c.stacked) {
      std::vector<graph::ValueId> branches;
      for (int64_t r = 0; r < c.radix; ++r) {
        const std::string name = c.name + "_branch" + std::to_string(r);
        const graph::ValueId y = pointwise_relu(b, name, x, rc, c.c, seed);
        branches.push_back(b.op(name + "_unsqueeze", graph::Reshape{{1, 1, c.c, c.hw, c.hw}}, {y}));
      }
      x5 = b.op(c.name + "_stack", graph::Concat{1}, branches);
    }
    graph::ValueId gap = sum_over(c.name + "_sum", x5, c.axis, c.keepdims);
    const int64_t gap_c = c.axis == 1 ? c.c : c.radix;
    if (c.keepdims) gap = b.op(c.name + "_squeeze", graph::Reshape{{1, c.c, c.hw, c.hw}}, {gap});
    gap = b.op(c.name + "_mean", graph::Reduce{{2, 3}, true, graph::ReduceKind::mean}, {gap});
    const graph::ValueId att = pointwise_relu(b, c.name + "_fc", gap, gap_c, rc, seed);
    graph::ValueId att5 =
        b.op(c.name + "_att_view", graph::Reshape{{1, c.radix, c.c, 1, 1}}, {att});
    if (c.softmax) att5 = b.op(c.name + "_softmax", graph::Softmax{1}, {att5});
    const graph::ValueId weighted =
        b.op(c.name + "_weight", graph::Binary{BinaryOp::mul}, {x5, att5});
    graph::ValueId out = sum_over(c.name + "_out_sum", weighted, c.axis, c.keepdims);
    if (c.keepdims)
      out = b.op(c.name + "_out_squeeze", graph::Reshape{{1, c.c, c.hw, c.hw}}, {out});
    if (c.axis == 1) out = pointwise_relu(b, c.name + "_out", out, c.c, 8, seed);
    b.output(out);
  }
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  // Per case: Reduce nodes over a 5-D value, and 5-D images computed (the attention's 5-D
  // values, one pixel each, are not images; keepdims' Reshape to [1, 1, C, H, W] is a view).
  std::map<std::string, int> reduces, images;
  for (const graph::Node& n : optimized.nodes())
    for (const Case& c : cases) {
      if (n.name.rfind(c.name + "_", 0) != 0) continue;
      const graph::Value& in = optimized.value(n.inputs[0]);
      reduces[c.name] += std::holds_alternative<graph::Reduce>(n.op) && in.shape.size() == 5;
      for (graph::ValueId v : n.outputs) {
        const graph::Shape& s = optimized.value(v).shape;
        images[c.name] +=
            s.size() == 5 && s[3] * s[4] > 1 && !std::holds_alternative<graph::Reshape>(n.op);
      }
    }
  for (const Case& c : cases) {
    const bool split = c.axis == 1 && c.radix <= 8;
    EXPECT_EQ(reduces[c.name], split ? 0 : 2) << c.name << "\n" << graph::dump(optimized);
    if (split) EXPECT_EQ(images[c.name], 0) << c.name << "\n" << graph::dump(optimized);
  }
  expect_whole_graph_matches_reference(input, optimized, 1e-5, 1e-6);
}

// A detector's upsampling: nearest Resizes of the image axes (2x asymmetric floor, as
// torch.nn.Upsample exports, and 3x2 half_pixel) between convolutions, each concatenated with
// another convolution's output, stay NHWC (axes remapped, no layout transform), and so does a
// linear Resize of 16 channels (interpolating H and W; UpsamplingInterpolationRunsNhwc has the
// ones that stay NCHW). On every CPU target.
TEST(GeneratedKernels, NearestResizeStaysChannelsLast) {
  graph::GraphBuilder b;
  uint64_t seed = 600;
  const auto conv = [&](const std::string& name, graph::ValueId x, int64_t ci, int64_t co) {
    return pointwise_relu(b, name, x, ci, co, seed);
  };
  using graph::NearestRounding;
  using graph::ResizeCoordinates;
  using graph::ResizeMode;
  const graph::ValueId in = b.input("input", {1, 8, 6, 7});
  const graph::ValueId small = conv("small", in, 8, 16);
  const graph::ValueId up = b.op("up2", resize_op(ResizeMode::nearest, ResizeCoordinates::asymmetric,
                                                  NearestRounding::floor, {1, 16, 6, 7}, {1, 16, 12, 14}),
                                 {small});
  const graph::ValueId big = conv("big", b.input("input_big", {1, 8, 12, 14}), 8, 8);
  const graph::ValueId cat = b.op("cat", graph::Concat{1}, {up, big});
  const graph::ValueId up3 =
      b.op("up3x2", resize_op(ResizeMode::nearest, ResizeCoordinates::half_pixel,
                              NearestRounding::round_prefer_floor, {1, 24, 12, 14}, {1, 24, 36, 28}),
           {conv("mid", cat, 24, 24)});
  b.output(conv("head", up3, 24, 16));
  const graph::ValueId lin = b.op("linear", resize_op(ResizeMode::linear, ResizeCoordinates::half_pixel,
                                                      NearestRounding::round_prefer_floor, {1, 16, 6, 7},
                                                      {1, 16, 12, 14}),
                                  {small});
  b.output(conv("lin_head", lin, 16, 8));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  size_t inner_transforms = 0;
  for (const graph::Node& n : optimized.nodes()) {
    if (std::holds_alternative<graph::Resize>(n.op))
      EXPECT_EQ(optimized.value(n.inputs[0]).layout, Layout::nhwc) << n.name;
    inner_transforms += std::holds_alternative<graph::LayoutTransform>(n.op) &&
                        optimized.value(n.inputs[0]).name.rfind("input", 0) != 0 &&
                        !optimized.is_graph_output(n.outputs[0]);
  }
  EXPECT_EQ(inner_transforms, 0u) << graph::dump(optimized);
  expect_whole_graph_matches_reference(input, optimized);
}

}  // namespace
}  // namespace kiln
