// Pointwise convolutions read as fewer, longer rows (graph::PlanOptions::flat_pointwise): which
// kernels get the reshaped tensors, that a Model running them (the runtime passing reshaped
// views of the same bytes) still matches the reference on every CPU target, the 4-vector tiles
// the AVX-512 default takes on such rows, and the 64-byte-aligned weight copies the kernels
// read.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "Halide.h"
#include "graph/builder.h"
#include "graph/memory_plan.h"
#include "graph/passes/pipeline.h"
#include "runtime/conv_weights.h"
#include "schedules/conv_params.h"
#include "test_generator.h"

namespace kiln {
namespace {

using namespace testing_util;

graph::ValueId conv(graph::GraphBuilder& b, const std::string& name, graph::ValueId x, int64_t ci,
                    int64_t co, int k, int stride, int pad, uint64_t seed) {
  graph::Conv2d attrs;
  attrs.stride_h = attrs.stride_w = stride;
  attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = pad;
  const float r = 1.0f / std::sqrt(static_cast<float>(ci * k * k));
  return b.conv2d(
      name, x,
      b.constant(name + "_w", {co, ci, k, k}, graph::random_uniform(co * ci * k * k, -r, r, seed),
                 graph::Layout::oihw),
      b.constant(name + "_b", {co}, graph::random_uniform(co, -0.2f, 0.2f, seed + 1)), attrs);
}

// A bottleneck block on a 14x14 image (3x3, then 1x1 expansion and 1x1 projection with the
// block's input added), and one reading a graph input (the runtime points its view at each
// run's input), beside 1x1 convolutions that must keep their rows: one with padding, one of
// stride 2, one on a 7x7 image and one writing its slice of a Concat in place; and a 28x28
// image's, whose long rows do not end where the image's do.
graph::Graph pointwise_cases() {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {1, 64, 14, 14});
  const graph::ValueId a = b.relu("a_relu", conv(b, "a", x, 64, 64, 3, 1, 1, 1));
  const graph::ValueId e = b.relu("expand_relu", conv(b, "expand", a, 64, 256, 1, 1, 0, 10));
  const graph::ValueId p = conv(b, "project", e, 256, 64, 1, 1, 0, 20);
  b.output(b.relu("block_relu", b.op("block_add", graph::Binary{graph::BinaryOp::add}, {p, a})));
  b.output(conv(b, "padded", a, 64, 64, 1, 1, 1, 30));
  const graph::ValueId s = b.relu("strided_relu", conv(b, "strided", a, 64, 64, 1, 2, 0, 40));
  b.output(conv(b, "small", s, 64, 64, 1, 1, 0, 50));
  const graph::ValueId left = b.relu("left_relu", conv(b, "left", a, 64, 32, 1, 1, 0, 60));
  const graph::ValueId right = b.relu("right_relu", conv(b, "right", a, 64, 32, 3, 1, 1, 70));
  b.output(conv(b, "after_cat", b.op("cat", graph::Concat{1}, {left, right}), 64, 16, 3, 1, 1, 80));
  // Two 28x28 images with one channel block: 8 rows of 98 pixels each, most starting mid image
  // row, the residual read alike.
  const graph::ValueId z = b.input("z", {2, 48, 28, 28});
  const graph::ValueId zr =
      b.relu("mid_row_in", conv(b, "mid_row_in_conv", z, 48, 32, 1, 1, 0, 80));
  b.output(b.op("mid_row_add", graph::Binary{graph::BinaryOp::add},
                {conv(b, "mid_row", zr, 32, 32, 1, 1, 0, 82), zr}));
  const graph::ValueId y = b.input("y", {1, 14, 14, 48}, graph::Layout::nhwc);
  b.output(b.conv2d(
      "on_input", y,
      b.constant("on_input_w", {1, 1, 48, 64}, graph::random_uniform(48 * 64, -0.15f, 0.15f, 90),
                 graph::Layout::hwio),
      b.constant("on_input_b", {64}, graph::random_uniform(64, -0.2f, 0.2f, 91)), graph::Conv2d{}));
  return b.finish();
}

TEST(PointwiseRows, OnlyDensePointwiseConvolutionsAreReshaped) {
  EXPECT_EQ(graph::flat_pointwise_rows(14, 14, 256), 2);  // 2 rows of 98
  EXPECT_EQ(graph::flat_pointwise_rows(28, 28, 128), 7);  // 7 of 112 (by 2 channel blocks)
  EXPECT_EQ(graph::flat_pointwise_rows(28, 28, 32), 8);   // 8 of 98, not 7 tasks of 112
  EXPECT_EQ(graph::flat_pointwise_rows(28, 28, 192), 7);  // 21 tasks: enough to share
  EXPECT_EQ(graph::flat_pointwise_rows(20, 20, 64), 4);   // 4 of 100
  EXPECT_EQ(graph::flat_pointwise_rows(27, 27, 64), 9);   // 729 = 3^6: no even count
  EXPECT_EQ(graph::flat_pointwise_rows(56, 56, 64), 28);  // 28 of 112
  EXPECT_EQ(graph::flat_pointwise_rows(13, 13, 64), 13);  // 13 is prime: rows as they are
  EXPECT_EQ(graph::flat_pointwise_rows(1, 300, 64), 1);
  EXPECT_EQ(graph::flat_pointwise_rows(10, 200, 64), 10);  // rows longer than kMaxFlatRow already

  const graph::Graph g = graph::run_passes(pointwise_cases());
  std::map<std::string, graph::Shape> inputs, outputs;
  for (const graph::KernelSpec& k : graph::planned_kernels(g, graph::plan_arena(g)))
    if (const auto* c = std::get_if<graph::ConvKernelSpec>(&k)) {
      inputs[c->name] = c->input.shape;
      outputs[c->name] = c->output.shape;
      if (c->name == "project") {
        ASSERT_TRUE(c->residual.has_value());
        EXPECT_EQ(c->residual->shape, (graph::Shape{1, 2, 98, 64}));
        // `kiln inspect` says which image the merged rows are.
        EXPECT_NE(graph::describe(k).find("rows:   merged: the image is [1, 14, 14, 64]"),
                  std::string::npos)
            << graph::describe(k);
      }
      if (c->name == "a") EXPECT_EQ(graph::describe(k).find("rows:"), std::string::npos);
    }
  EXPECT_EQ(inputs.at("expand"), (graph::Shape{1, 2, 98, 64}));
  EXPECT_EQ(outputs.at("expand"), (graph::Shape{1, 2, 98, 256}));
  EXPECT_EQ(inputs.at("project"), (graph::Shape{1, 2, 98, 256}));
  EXPECT_EQ(outputs.at("project"), (graph::Shape{1, 2, 98, 64}));
  EXPECT_EQ(outputs.at("a"), (graph::Shape{1, 14, 14, 64}));       // 3x3
  EXPECT_EQ(outputs.at("padded"), (graph::Shape{1, 16, 16, 64}));  // padding
  EXPECT_EQ(outputs.at("strided"), (graph::Shape{1, 7, 7, 64}));   // stride 2
  EXPECT_EQ(outputs.at("small"), (graph::Shape{1, 7, 7, 64}));     // 49 pixels
  EXPECT_EQ(outputs.at("left"), (graph::Shape{1, 14, 14, 32}));    // a slice of the Concat
  EXPECT_EQ(inputs.at("on_input"), (graph::Shape{1, 2, 98, 48}));  // a graph input
  EXPECT_EQ(inputs.at("mid_row_in_conv"), (graph::Shape{2, 8, 98, 48}));
  EXPECT_EQ(inputs.at("mid_row"), (graph::Shape{2, 8, 98, 32}));
  EXPECT_EQ(outputs.at("mid_row"), (graph::Shape{2, 8, 98, 32}));

  // Backends whose buffers cannot alias (GPUs) get no views: every kernel keeps its rows.
  for (const graph::KernelSpec& k :
       graph::planned_kernels(g, graph::plan_arena(g, graph::plan_options_for(false))))
    if (const auto* c = std::get_if<graph::ConvKernelSpec>(&k))
      EXPECT_NE(c->output.shape[1], 2) << c->name;
}

TEST(PointwiseRows, ModelsWithReshapedKernelsMatchTheReference) {
  const graph::Graph input = pointwise_cases();
  expect_whole_graph_matches_reference(input, graph::run_passes(input));
}

// AVX-512: 4 vectors by the pixel count of 6, 5 or 4 that computes the fewest columns twice,
// where that is under 4% of the row, on pointwise layers with whole blocks of 64 channels; the
// widest such tile where a block's weights are over 32 KiB (more than 128 input channels).
TEST(PointwiseRows, FourVectorTilesOnLongRows) {
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41");
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  const auto layer = [](int h, int w, int ci, int co) {
    schedules::ConvShape s;
    s.out_height = h, s.out_width = w, s.out_channels = co, s.reduction_channels = ci;
    return s;
  };
  const auto choice = [&](const schedules::ConvShape& s, const Halide::Target& t) {
    return schedules::to_string(schedules::default_conv_params(s, t));
  };
  EXPECT_EQ(choice(layer(2, 98, 1024, 256), avx512),
            "wide block=4x5 rows=1 split=1 stage=in_place");
  EXPECT_EQ(choice(layer(7, 112, 128, 512), avx512),
            "wide block=4x4 rows=1 split=1 stage=in_place");
  EXPECT_EQ(choice(layer(7, 112, 512, 128), avx512),
            "wide block=4x6 rows=1 split=1 stage=in_place");
  EXPECT_EQ(choice(layer(28, 112, 256, 64), avx512),
            "wide block=4x6 rows=1 split=0 stage=in_place");
  EXPECT_EQ(choice(layer(28, 112, 64, 256), avx512),
            "wide block=4x4 rows=1 split=0 stage=in_place");
  EXPECT_EQ(choice(layer(8, 120, 64, 256), avx512), "wide block=4x6 rows=1 split=1 stage=in_place");
  // Over 1.5 MiB of weights on 196 pixels: deep, which takes only tiles that divide the row (it
  // would stage its input for others): 4x4 on 112-pixel rows; on 98-pixel ones 2x7 (2x14's
  // 14 pixels, 4 KB apart, would share one L1 set: conv_tile_limits.cpp).
  EXPECT_EQ(choice(layer(1, 112, 1024, 512), avx512),
            "deep block=4x4 chunk=144 tasks=8 prefetch=0");
  EXPECT_EQ(choice(layer(2, 98, 1024, 512), avx512),
            "deep block=2x7 chunk=288 tasks=16 prefetch=0");
  // A stride-2 pointwise layer's 28-pixel output rows (not merged: its input rows are not).
  schedules::ConvShape strided = layer(28, 28, 256, 512);
  strided.stride_w = strided.stride_h = 2;
  EXPECT_EQ(choice(strided, avx512), "wide block=4x4 rows=1 split=0 stage=in_place");
  // Kept: rows where every such tile computes 4% more (14 wide), channels not in blocks of 64,
  // padding, spatial windows, 16-register targets.
  EXPECT_EQ(choice(layer(14, 14, 512, 256), avx512),
            "wide block=2x14 rows=1 split=0 stage=in_place");
  EXPECT_EQ(choice(layer(2, 98, 256, 96), avx512).substr(0, 17), "wide block=2x14 r");
  schedules::ConvShape padded = layer(2, 98, 256, 256);
  padded.padded = true;
  EXPECT_EQ(choice(padded, avx512).substr(0, 17), "wide block=2x14 r");
  schedules::ConvShape spatial = layer(28, 112, 64, 256);
  spatial.kernel_w = spatial.kernel_h = 3, spatial.padded = true;
  EXPECT_EQ(
      schedules::to_string(schedules::default_direct_conv_params(spatial, avx512)).substr(0, 17),
      "wide block=2x14 r");
  EXPECT_EQ(choice(layer(2, 98, 1024, 256), avx2).substr(0, 16), "wide block=2x6 r");
  for (int w = 16; w <= 130; ++w)
    for (int co : {64, 128, 256, 320}) {
      const schedules::ConvShape s = layer(2, w, 256, co);
      const schedules::ConvParams p = schedules::default_conv_params(s, avx512);
      EXPECT_EQ(schedules::conv_params_error(p, s, avx512), "") << w << " " << co;
      EXPECT_LE(p.block.vectors * p.block.pixels + p.block.vectors + 1, 32) << w << " " << co;
    }
}

// Every weight copy the runtime binds starts on a cache line (a vector load of a block of 16
// weights never straddles two), whatever its size.
TEST(PointwiseRows, WeightCopiesAreCacheLineAligned) {
  for (const int64_t ci : {1, 3, 17, 1024}) {
    std::vector<float> hwio(static_cast<size_t>(ci * 40), 1.0f);
    const auto blocked = runtime::block_conv_weights(hwio.data(), 1, 1, ci, 40);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(blocked.data()) % 64, 0u) << ci;
  }
  std::vector<float> hwio(static_cast<size_t>(9 * 24 * 32), 0.5f);
  EXPECT_EQ(
      reinterpret_cast<uintptr_t>(runtime::winograd_conv_weights(hwio.data(), 24, 32, 4).data()) %
          64,
      0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(
                runtime::pack_bf16_conv_weights(hwio.data(), 3, 3, 24, 32).data()) %
                64,
            0u);
  for (size_t n : {1, 5, 1000, 262144}) {
    const runtime::AlignedVector<float> v(n, 2.0f);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u) << n;
  }
}

}  // namespace
}  // namespace kiln
