// The tuner's search space for a convolution, without generating a kernel: the ranked
// candidates, the local search's neighbours and the cost model that orders both
// (schedules/conv_candidates.cpp). The defaults, the text form and validation:
// test_conv_schedules.cpp.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "Halide.h"
#include "schedules/conv_params.h"

namespace {

using namespace kiln;

// Every candidate the tuner would try is valid for the layer, the default comes first, and
// both tunable families are represented.
TEST(ConvKernelSchedules, CandidatesAreValidAndIncludeTheDefault) {
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41");
  schedules::ConvShape s;
  s.out_height = s.out_width = 14, s.out_channels = 256, s.reduction_channels = 256;
  s.kernel_h = s.kernel_w = 3, s.padded = true;
  const std::vector<schedules::ConvParams> c = schedules::conv_candidates(s, avx512, 2, 24);
  ASSERT_EQ(c.size(), 24u);
  EXPECT_EQ(c.front(), schedules::default_conv_params(s, avx512));
  int wide = 0, deep = 0;
  for (const schedules::ConvParams& p : c) {
    EXPECT_EQ(schedules::conv_params_error(p, s, avx512), "") << schedules::to_string(p);
    wide += p.family == schedules::ConvFamily::wide;
    deep += p.family == schedules::ConvFamily::deep;
  }
  EXPECT_GT(wide, 4);
  EXPECT_GT(deep, 4);
  // Channel counts that are not whole vectors also get the defaults at half the width: 3
  // vectors of 8 for 24 channels, which 16-lane tiles cover with 32.
  schedules::ConvShape narrow = s;
  narrow.out_height = narrow.out_width = 56, narrow.out_channels = 24;
  narrow.reduction_channels = 144, narrow.kernel_h = narrow.kernel_w = 1, narrow.padded = false;
  narrow.whole_channel_blocks = true;
  bool half = false;
  for (const schedules::ConvParams& p : schedules::conv_candidates(narrow, avx512, 2, 16)) {
    EXPECT_EQ(schedules::conv_params_error(p, narrow, avx512), "") << schedules::to_string(p);
    if (p.lanes == 8) {
      half = true;
      EXPECT_EQ(p.block.vectors, 3) << schedules::to_string(p);
    }
  }
  EXPECT_TRUE(half) << "no candidate at half the vector width";
}

// The half-width kernels' schedules (schedules::half_width_params): valid, at 8 lanes, with the
// tile that computes the fewest channels past the output's, for float32 layers of an odd
// multiple of 8 channels on AVX-512 whose 16-lane tile wastes a tenth of its multiply-adds or
// more; none for whole vectors, AVX2, bf16, the depthwise family, or a waste under a tenth.
TEST(ConvKernelSchedules, HalfWidthKernelsCoverOddMultiplesOfEightChannels) {
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41");
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  const auto layer = [](int channels, int window, int width, int inputs) {
    schedules::ConvShape s;
    s.out_height = s.out_width = width, s.out_channels = channels;
    s.reduction_channels = inputs, s.kernel_h = s.kernel_w = window, s.padded = window > 1;
    return s;
  };
  // channels, window, width, input channels -> vectors of 8 (0: no half-width kernel)
  const struct {
    int channels, window, width, inputs, vectors;
  } cases[] = {{24, 1, 56, 144, 3},  {40, 1, 28, 240, 5}, {72, 1, 28, 24, 3}, {24, 3, 28, 64, 3},
               {40, 3, 17, 96, 5},   {32, 1, 56, 144, 0}, {48, 3, 28, 64, 0}, {1000, 1, 13, 512, 0},
               {120, 1, 14, 480, 0}, {8, 3, 20, 16, 1}};
  for (const auto& c : cases) {
    const schedules::ConvShape s = layer(c.channels, c.window, c.width, c.inputs);
    const std::optional<schedules::ConvParams> p = schedules::half_width_params(s, avx512);
    SCOPED_TRACE(std::to_string(c.channels) + " channels, " + std::to_string(c.window) + "x" +
                 std::to_string(c.window) + " at " + std::to_string(c.width));
    EXPECT_FALSE(schedules::half_width_params(s, avx2).has_value());
    if (c.vectors == 0) {
      EXPECT_FALSE(p.has_value()) << schedules::to_string(*p);
      continue;
    }
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->lanes, 8);
    EXPECT_EQ(p->block.vectors, c.vectors) << schedules::to_string(*p);
    EXPECT_EQ(p->family, schedules::default_conv_params(s, avx512).family);
    EXPECT_EQ(schedules::conv_params_error(*p, s, avx512), "") << schedules::to_string(*p);
    schedules::ConvShape bf16 = s;
    bf16.bf16 = true;
    EXPECT_FALSE(schedules::half_width_params(bf16, avx512).has_value());
  }
  schedules::ConvShape dw = layer(24, 3, 56, 1);
  dw.depthwise = dw.grouped = true;
  EXPECT_FALSE(schedules::half_width_params(dw, avx512).has_value());
}

// The local search's neighbours: valid, distinct, never the schedule itself, each one knob (or
// the tile's two sizes and its vector width, or the family) away from it, for every family the
// dense layers take.
TEST(ConvKernelSchedules, NeighboursAreValidSingleSteps) {
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41");
  schedules::ConvShape s;
  s.out_height = s.out_width = 14, s.out_channels = 256, s.reduction_channels = 256;
  s.kernel_h = s.kernel_w = 3, s.padded = true;
  schedules::ConvShape dw = s;
  dw.reduction_channels = 1, dw.grouped = dw.depthwise = true;
  const auto differing_knobs = [](const schedules::ConvParams& a, const schedules::ConvParams& b) {
    return int(a.family != b.family) +
           int(a.block.vectors != b.block.vectors || a.block.pixels != b.block.pixels ||
               a.lanes != b.lanes) +
           int(a.rows != b.rows) + int(a.split_channels != b.split_channels) +
           int(a.stage_input != b.stage_input) + int(a.channels_inside != b.channels_inside) +
           int(a.chunk != b.chunk) + int(a.tasks != b.tasks) + int(a.tile != b.tile) +
           int(a.prefetch != b.prefetch);
  };
  for (const char* text :
       {"wide block=2x7 rows=2 split=0 stage=copy", "deep block=4x7 chunk=144 tasks=8 prefetch=0",
        "winograd tile=2 block=2x7 rows=1 split=0 prefetch=0"}) {
    schedules::ConvParams p = schedules::default_conv_params(s, avx512);
    ASSERT_EQ(schedules::parse_conv_params(text, &p), "") << text;
    ASSERT_EQ(schedules::conv_params_error(p, s, avx512), "") << text;
    const std::vector<schedules::ConvParams> n = schedules::conv_neighbors(p, s, avx512, 2);
    EXPECT_GT(n.size(), 5u) << text;
    std::set<std::string> distinct;
    for (const schedules::ConvParams& q : n) {
      const std::string t = schedules::to_string(q);
      EXPECT_FALSE(q == p) << t;
      EXPECT_EQ(schedules::conv_params_error(q, s, avx512), "") << t;
      EXPECT_TRUE(distinct.insert(t).second) << t;
      // A family switch or Winograd's other tile may reset the knobs the two do not share.
      if (q.family == p.family && q.tile == p.tile) {
        EXPECT_EQ(differing_knobs(p, q), 1) << text << " -> " << t;
      }
    }
  }
  // The depthwise family: its own knobs only, never another family.
  const schedules::ConvParams d = schedules::default_conv_params(dw, avx512);
  const std::vector<schedules::ConvParams> n = schedules::conv_neighbors(d, dw, avx512, 2);
  EXPECT_GT(n.size(), 3u);
  for (const schedules::ConvParams& q : n) {
    EXPECT_EQ(q.family, schedules::ConvFamily::depthwise) << schedules::to_string(q);
    EXPECT_EQ(schedules::conv_params_error(q, dw, avx512), "") << schedules::to_string(q);
    EXPECT_EQ(differing_knobs(d, q), 1) << schedules::to_string(q);
  }
}

// The cost model that ranks the candidates: a tile of fewer than 8 accumulators waits on the
// FMA latency (it ranked with 2x14 tiles before, and such tiles filled the candidate lists);
// weights beyond L2 favour schedules that pass over them fewer times.
TEST(ConvKernelSchedules, CostModelRanksLatencyBoundTilesAndWeightStreamsBelow) {
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41");
  schedules::ConvShape s;
  s.out_height = s.out_width = 14, s.out_channels = 256, s.reduction_channels = 1024;
  schedules::ConvParams p = schedules::default_conv_params(s, avx512);
  ASSERT_EQ(p.family, schedules::ConvFamily::wide);
  const double good = schedules::conv_cost_estimate(p, s, avx512, 2);
  for (schedules::RegisterBlock b : {schedules::RegisterBlock{1, 2}, {2, 1}, {3, 2}, {1, 4}}) {
    p.block = b;
    EXPECT_GT(schedules::conv_cost_estimate(p, s, avx512, 2), 1.25 * good)
        << schedules::to_string(p);
  }
  for (const schedules::ConvParams& c : schedules::conv_candidates(s, avx512, 2, 16))
    EXPECT_GE(c.block.vectors * c.block.pixels, 8) << schedules::to_string(c);
  // SqueezeNet's classifier (2 MB of weights, 13 rows): a wide schedule of one row per task
  // passes over the weights 13 times, one of 13 rows per task once.
  s.out_height = s.out_width = 13, s.out_channels = 1000, s.reduction_channels = 512;
  p = schedules::default_wide_params(s, avx512);
  p.rows = 1;
  const double per_row = schedules::conv_cost_estimate(p, s, avx512, 2);
  p.rows = 13, p.split_channels = true;
  EXPECT_LT(schedules::conv_cost_estimate(p, s, avx512, 2), 0.9 * per_row);
}

}  // namespace
