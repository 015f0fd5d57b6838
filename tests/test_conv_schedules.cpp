// Convolution schedule parameters without generating a kernel: the default choice per layer
// and target, the text form and validation (schedules/conv_params.h). The tuner's search
// space: test_conv_candidates.cpp.
// The weight layouts the kernels read: test_conv_weights.cpp; the kernels themselves are tested
// against the reference in test_conv_kernels.cpp.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "Halide.h"
#include "conv_weights.h"
#include "graph/ir.h"
#include "schedules/conv_params.h"
#include "schedules/depthwise_schedule.h"
#include "schedules/pool_schedule.h"

namespace {

using namespace kiln;

// The default choice among the families (schedules/conv_params.h), on an AVX-512 target:
// Winograd for 3x3 stride-1 layers of 16+ input channels with outputs of 13x13 or more, F(4x4) from
// 28 pixels wide; the direct default elsewhere, and as the alternative there.
TEST(ConvKernelSchedules, DeepScheduleForSmallOutputsWithLongReductions) {
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41");
  const auto layer = [](int h, int w, int ci, int k, bool padded) {
    schedules::ConvShape s;
    s.out_height = h, s.out_width = w, s.out_channels = 64, s.reduction_channels = ci;
    s.kernel_h = s.kernel_w = k, s.padded = padded;
    return s;
  };
  const auto choice = [&](int h, int w, int ci, int k, bool padded) {
    return schedules::to_string(schedules::default_conv_params(layer(h, w, ci, k, padded), avx512));
  };
  const auto direct = [&](int h, int w, int ci, int k, bool padded) {
    return schedules::to_string(
        schedules::default_direct_conv_params(layer(h, w, ci, k, padded), avx512));
  };
  EXPECT_EQ(choice(56, 56, 64, 3, true), "winograd tile=4 block=2x14 rows=1 split=0 prefetch=0");
  EXPECT_EQ(choice(28, 28, 128, 3, true), "winograd tile=4 block=4x7 rows=1 split=0 prefetch=0");
  EXPECT_EQ(choice(14, 14, 256, 3, true), "winograd tile=2 block=4x7 rows=1 split=0 prefetch=0");
  // 64 output channels: whole blocks of 4 vectors (4x7), chunks of 144 steps (4 vectors'
  // weights in L1), 2 bands of rows for 1 channel block.
  EXPECT_EQ(choice(7, 7, 512, 3, true), "deep block=4x7 chunk=144 tasks=16 prefetch=0");
  EXPECT_EQ(choice(56, 56, 32, 3, true), "winograd tile=4 block=2x14 rows=1 split=0 prefetch=0");
  EXPECT_EQ(choice(56, 56, 8, 3, true), "wide block=2x14 rows=2 split=0 stage=copy");  // < 16 in
  EXPECT_EQ(choice(13, 13, 64, 3, true), "winograd tile=2 block=4x7 rows=1 split=0 prefetch=0");
  // < 13x13; 4 strips of 3 rows, which 2 and 4 threads share evenly (6 of 2: 2 + 2 + 1 + 1)
  EXPECT_EQ(choice(12, 12, 64, 3, true), "wide block=2x12 rows=3 split=0 stage=copy");
  schedules::ConvShape strided = layer(56, 56, 64, 3, true);
  strided.stride_w = strided.stride_h = 2;  // F(2x2) at stride 2; the direct default is wide
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(strided, avx512)),
            "winograd tile=2 block=2x14 rows=1 split=0 prefetch=0");
  EXPECT_EQ(schedules::default_direct_conv_params(strided, avx512).family,
            schedules::ConvFamily::wide);
  strided.stride_w = strided.stride_h = 3;
  EXPECT_EQ(schedules::default_conv_params(strided, avx512).family, schedules::ConvFamily::wide);
  schedules::ConvShape weights_input = layer(56, 56, 64, 3, true);
  weights_input.constant_weights = false;
  EXPECT_EQ(schedules::default_conv_params(weights_input, avx512).family,
            schedules::ConvFamily::wide);
  EXPECT_EQ(direct(56, 56, 64, 3, true), "wide block=2x14 rows=2 split=0 stage=copy");
  EXPECT_EQ(direct(28, 28, 128, 3, true), "wide block=2x14 rows=2 split=0 stage=copy");
  EXPECT_EQ(direct(14, 14, 256, 3, true), "deep block=2x14 chunk=288 tasks=16 prefetch=0");
  // 1024 input channels put every pixel's input in one L1 set (4 KB apart): 7-pixel tiles.
  EXPECT_EQ(choice(14, 14, 1024, 1, false), "wide block=2x7 rows=1 split=0 stage=in_place");
  EXPECT_EQ(choice(14, 14, 1024, 1, true), "wide block=2x7 rows=1 split=0 stage=copy");
  EXPECT_EQ(choice(14, 14, 512, 1, false), "wide block=2x14 rows=1 split=0 stage=in_place");
  // At most 64 output pixels: deep, unless the weights are at most 256 KiB (512 x 64 floats,
  // 128 KiB): deep's tile in the wide family, 2 rows per task, staged.
  EXPECT_EQ(choice(7, 7, 512, 1, false), "wide block=4x7 rows=2 split=0 stage=copy");
  schedules::ConvShape heavier = layer(7, 7, 512, 1, false);
  heavier.out_channels = 256;  // 512 KiB
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(heavier, avx512)),
            "deep block=4x7 chunk=144 tasks=16 prefetch=0");
  schedules::ConvShape wider = layer(7, 7, 512, 3, true);
  wider.out_channels = 512;  // whole blocks of 4 vectors, 8 of them: a task each, no bands
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(wider, avx512)),
            "deep block=4x7 chunk=144 tasks=8 prefetch=0");
  wider.out_channels = 960;  // 15 blocks, an odd count under 16: 16 tasks (2 bands a block)
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(wider, avx512)),
            "deep block=4x7 chunk=144 tasks=16 prefetch=0");
  wider.out_channels = 1088;  // 17 blocks: a task each
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(wider, avx512)),
            "deep block=4x7 chunk=144 tasks=8 prefetch=0");
  wider.out_channels = 336;  // 21 vectors: not whole blocks of 4, whole blocks of 3
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(wider, avx512)),
            "deep block=3x7 chunk=288 tasks=16 prefetch=0");
  wider.out_channels = 160;  // 12 for 10: 2x7
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(wider, avx512)),
            "deep block=2x7 chunk=288 tasks=16 prefetch=0");
  // 8..13 pixels wide: a row per tile (4x7 computed 14 columns of 9).
  EXPECT_EQ(choice(9, 9, 32, 3, true), "wide block=2x9 rows=2 split=1 stage=copy");
  EXPECT_EQ(choice(13, 13, 512, 1, false), "wide block=2x13 rows=1 split=0 stage=in_place");
  // Over 1.5 MiB of weights on at most 196 pixels: deep, each weight read once per call;
  // SqueezeNet's classifier takes a row per tile and 144-step chunks. 1 MiB stays wide.
  const auto big = [&](int w, int ci, int co) {
    schedules::ConvShape s = layer(w, w, ci, 1, false);
    s.out_channels = co;
    return schedules::to_string(schedules::default_conv_params(s, avx512));
  };
  EXPECT_EQ(big(13, 512, 1000), "deep block=2x13 chunk=144 tasks=16 prefetch=0");
  EXPECT_EQ(big(14, 1024, 512),
            "deep block=2x7 chunk=288 tasks=16 prefetch=0");  // 7: L1 sets, as above
  EXPECT_EQ(big(14, 1024, 256), "wide block=2x7 rows=1 split=0 stage=in_place");
  // 784 pixels; 4x4 tiles on a pointwise layer's rows (test_pointwise_rows.cpp)
  EXPECT_EQ(big(28, 1024, 512), "wide block=4x4 rows=1 split=0 stage=in_place");
  // Tiles fitted to the edges where the preferred one computes over 10% more than the layer
  // (fitted_block): Inception's 17x17x48 3x3/s2 (2x14: 28 columns, 64 channels) takes 3x9; 17
  // wide with 24 channels 1x17; 56 wide with 144 channels (2x14: 160) 3x8; layers the preferred
  // tile fits keep it; every choice is valid and fits the register file unspilled. (The direct
  // default: the 3x3 stride-2 layers take Winograd by default.)
  const auto fitted = [&](int w, int out_channels, int k, int stride, const Halide::Target& t) {
    schedules::ConvShape s = layer(w, w, 64, k, k > 1);
    s.out_channels = out_channels, s.stride_w = s.stride_h = stride;
    return schedules::to_string(schedules::default_direct_conv_params(s, t));
  };
  EXPECT_EQ(fitted(17, 48, 3, 2, avx512), "wide block=3x9 rows=3 split=0 stage=copy");  // 6 strips
  EXPECT_EQ(fitted(17, 24, 1, 1, avx512), "wide block=1x17 rows=1 split=0 stage=in_place");
  EXPECT_EQ(fitted(56, 144, 1, 1, avx512), "wide block=3x8 rows=1 split=0 stage=in_place");
  EXPECT_EQ(fitted(56, 128, 1, 1, avx512), "wide block=4x4 rows=1 split=0 stage=in_place");  // pointwise
  EXPECT_EQ(fitted(28, 96, 3, 2, avx512), "wide block=2x14 rows=2 split=0 stage=copy");
  // Weights zero-padded to whole blocks (ConvShape::whole_channel_blocks): 24 channels take two
  // vectors, the second half padding, so each broadcast input feeds two multiply-adds.
  // MobileNetV2's 56x56 144 -> 24 1x1, kiln tune --set, 1 thread: 1x14 324 us, 2x14 194.
  const auto padded = [&](int w, int out_channels, int k) {  // 3x3 at stride 2, as Inception's
    schedules::ConvShape s = layer(w, w, 144, k, k > 1);
    s.out_channels = out_channels, s.whole_channel_blocks = true;
    s.stride_w = s.stride_h = k > 1 ? 2 : 1;
    return schedules::to_string(schedules::default_direct_conv_params(s, avx512));
  };
  EXPECT_EQ(padded(56, 24, 1), "wide block=2x14 rows=1 split=0 stage=in_place");
  EXPECT_EQ(padded(17, 24, 3), "wide block=2x9 rows=3 split=0 stage=copy");
  EXPECT_EQ(padded(56, 40, 1), "wide block=3x8 rows=1 split=0 stage=in_place");
  const Halide::Target avx2_target("x86-64-linux-avx-avx2-f16c-fma-sse41");
  for (int w = 14; w <= 80; ++w)
    for (int co : {16, 24, 48, 80, 144})
      for (bool whole : {false, true}) {
        schedules::ConvShape s = layer(w, w, 64, 1, false);
        s.out_channels = co, s.whole_channel_blocks = whole && co % 16 != 0;
        for (const Halide::Target& t : {avx512, avx2_target}) {
          const schedules::ConvParams p = schedules::default_conv_params(s, t);
          const int regs = t.has_feature(Halide::Target::AVX512) ? 32 : 16;
          EXPECT_EQ(schedules::conv_params_error(p, s, t), "") << w << " " << co << " " << whole;
          EXPECT_LE(p.block.vectors * p.block.pixels + p.block.vectors + 1, regs)
              << w << " " << co << " " << whole;
        }
      }
  // 16 registers (AVX2): deep layers take 3x4 tiles where they compute no more columns than
  // 2x6 (7 and 14 wide), 1x7 at 7 wide with fewer than 3 vectors of channels, else 2x6; a 1x1
  // layer of at most 64 pixels and 2 MiB of weights on 3x4 tiles runs them in the wide family.
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  const auto deep_avx2 = [&](int w, int out_channels, int k) {
    schedules::ConvShape s = layer(w, w, 512, k, k > 1);
    s.out_channels = out_channels;
    return schedules::to_string(schedules::default_direct_conv_params(s, avx2));
  };
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(layer(7, 7, 512, 3, true), avx2)),
            "deep block=3x4 chunk=288 tasks=16 prefetch=0");
  EXPECT_EQ(deep_avx2(14, 64, 3), "deep block=3x4 chunk=288 tasks=16 prefetch=0");
  EXPECT_EQ(deep_avx2(7, 16, 1), "wide block=1x7 rows=2 split=0 stage=copy");  // 32 KiB
  EXPECT_EQ(deep_avx2(7, 256, 1), "wide block=3x4 rows=4 split=0 stage=in_place");   // 512 KiB
  EXPECT_EQ(deep_avx2(7, 1280, 1), "deep block=3x4 chunk=288 tasks=16 prefetch=0");  // 2.5 MiB
  EXPECT_EQ(deep_avx2(6, 512, 1), "deep block=2x6 chunk=288 tasks=16 prefetch=0");
}

// The tile limits (conv_tile_limits.cpp). A costly epilogue (graph::costly_step) after a
// reduction of at most 128 multiply-adds per output keeps AVX-512 register tiles to 16
// accumulators (2x14 -> 2x8): a 3x3/s2 RGB stem and a 1x1 of 96 input channels; longer
// reductions, cheap epilogues and AVX2 keep their tiles. Inputs whose pixels are a multiple of
// 4 KB apart (1024 channels, or 512 at stride 2) share one L1 set: at most 8 pixels, the widest
// divisor of the row (7 of 14); 2 KB apart, two sets, 16.
TEST(ConvKernelSchedules, TilesWithinTheEpiloguesRegistersAndTheL1Ways) {
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41");
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  const auto tile = [](int ci, int k, int stride, bool costly, const Halide::Target& t) {
    schedules::ConvShape s;
    s.out_height = s.out_width = 112, s.out_channels = 32, s.reduction_channels = ci;
    s.kernel_h = s.kernel_w = k, s.padded = k > 1, s.stride_w = s.stride_h = stride;
    s.costly_epilogue = costly;
    const schedules::ConvParams p = schedules::default_conv_params(s, t);
    EXPECT_EQ(schedules::conv_params_error(p, s, t), "");
    return std::to_string(p.block.vectors) + "x" + std::to_string(p.block.pixels);
  };
  EXPECT_EQ(tile(3, 3, 2, false, avx512), "2x14");
  EXPECT_EQ(tile(3, 3, 2, true, avx512), "2x8");
  EXPECT_EQ(tile(96, 1, 1, true, avx512), "2x8");
  EXPECT_EQ(tile(64, 3, 2, true, avx512), "2x14");  // 576 multiply-adds per output
  EXPECT_EQ(tile(3, 3, 2, true, avx2), tile(3, 3, 2, false, avx2));
  using graph::ChainStepKind;
  for (const ChainStepKind k : {ChainStepKind::silu, ChainStepKind::sigmoid, ChainStepKind::gelu,
                                ChainStepKind::tanh, ChainStepKind::mish})
    EXPECT_TRUE(graph::costly_step({k, 0, 0})) << graph::to_string(k);
  for (const ChainStepKind k : {ChainStepKind::clamp, ChainStepKind::affine,
                                ChainStepKind::hard_swish, ChainStepKind::leaky_relu})
    EXPECT_FALSE(graph::costly_step({k, 0, 0})) << graph::to_string(k);
  EXPECT_FALSE(graph::costly_step({ChainStepKind::pow, 2, 0}));
  EXPECT_TRUE(graph::costly_step({ChainStepKind::pow, 0.5f, 0}));
  const auto pixels = [&](int ci, int stride, int width) {
    schedules::ConvShape s;
    s.out_height = s.out_width = width, s.out_channels = 512, s.reduction_channels = ci;
    s.stride_w = s.stride_h = stride;
    const schedules::ConvParams p = schedules::default_conv_params(s, avx512);
    EXPECT_EQ(schedules::conv_params_error(p, s, avx512), "");
    return p.block.pixels;
  };
  EXPECT_EQ(pixels(1024, 1, 14), 7);
  EXPECT_EQ(pixels(512, 2, 14), 7);
  EXPECT_EQ(pixels(512, 1, 14), 14);
  EXPECT_EQ(pixels(768, 1, 14), 14);  // 3 KB apart: every set, 14 lines in 64 sets
  EXPECT_EQ(pixels(1024, 1, 12), 6);  // the widest divisor of 12 up to 8
  EXPECT_EQ(pixels(1024, 1, 13), 8);  // none from 4 to 8: the limit itself (still valid)
  EXPECT_EQ(pixels(1024, 1, 7), 7);
}

// The deep default prefetches the next chunk of weights (schedules/weight_prefetch.h) only on
// AVX-512 targets, in a model whose weights do not stay in cache, on layers with more than 2 MiB
// of float32 weights whose tasks apply each weight to at most 128 pixels; bf16 never (and
// refuses it).
TEST(ConvKernelSchedules, DeepPrefetchesColdWeightsOnlyWhereATaskReusesThemLittle) {
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41");
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  const auto layer = [](int hw, int ci, int co, int k, bool cold) {
    schedules::ConvShape s;
    s.out_height = s.out_width = hw, s.out_channels = co, s.reduction_channels = ci;
    s.kernel_h = s.kernel_w = k, s.padded = k > 1, s.cold_weights = cold;
    return s;
  };
  const auto prefetches = [](const schedules::ConvShape& s, const Halide::Target& t) {
    const schedules::ConvParams p = schedules::default_direct_conv_params(s, t);
    EXPECT_EQ(p.family, schedules::ConvFamily::deep);
    return p.prefetch;
  };
  // ResNet-50's stage 4 (9 and 4 MiB, 49 pixels a task) and its 3x3/s2 to 14x14 (2.25 MiB).
  EXPECT_TRUE(prefetches(layer(7, 512, 512, 3, true), avx512));
  EXPECT_TRUE(prefetches(layer(7, 2048, 512, 1, true), avx512));
  EXPECT_FALSE(prefetches(layer(7, 512, 512, 3, true), avx2));  // AVX2's smaller tiles
  EXPECT_FALSE(prefetches(layer(7, 2048, 512, 1, true), avx2));
  schedules::ConvShape strided = layer(14, 256, 256, 3, true);
  strided.stride_w = strided.stride_h = 2;
  EXPECT_TRUE(prefetches(strided, avx512));
  EXPECT_FALSE(prefetches(layer(7, 512, 512, 3, false), avx512));   // the weights stay cached
  EXPECT_FALSE(prefetches(layer(14, 1024, 512, 1, true), avx512));  // 196 pixels a task
  EXPECT_FALSE(prefetches(layer(7, 960, 320, 1, true), avx512));    // 1.2 MiB
  schedules::ConvShape bf16 = layer(7, 512, 512, 3, true);
  bf16.bf16 = true;
  EXPECT_FALSE(prefetches(bf16, avx512));
  schedules::ConvParams p = schedules::default_direct_conv_params(bf16, avx512);
  p.prefetch = true;
  EXPECT_NE(schedules::conv_params_error(p, bf16, avx512), "");
}

// Text form: canonical order, partial overrides over a base, and clear refusals.
TEST(ConvKernelSchedules, ParamsTextRoundTripsAndRefusesNonsense) {
  schedules::ConvParams p;
  ASSERT_EQ(schedules::parse_conv_params("deep chunk=144 block=1x7 tasks=32", &p), "");
  EXPECT_EQ(schedules::to_string(p), "deep block=1x7 chunk=144 tasks=32 prefetch=0");
  schedules::ConvParams q;
  ASSERT_EQ(schedules::parse_conv_params(schedules::to_string(p), &q), "");
  EXPECT_EQ(q, p);
  ASSERT_EQ(schedules::parse_conv_params("tasks=8", &q), "");  // the other knobs stay
  EXPECT_EQ(schedules::to_string(q), "deep block=1x7 chunk=144 tasks=8 prefetch=0");
  ASSERT_EQ(schedules::parse_conv_params("prefetch=1", &q), "");
  EXPECT_EQ(schedules::to_string(q), "deep block=1x7 chunk=144 tasks=8 prefetch=1");
  // The vector width: printed only where set; a family without the knob drops it.
  ASSERT_EQ(schedules::parse_conv_params("wide block=3x8 lanes=8", &q), "");
  EXPECT_EQ(schedules::to_string(q), "wide block=3x8 rows=2 split=0 stage=copy lanes=8");
  ASSERT_EQ(schedules::parse_conv_params("deep", &q), "");
  EXPECT_EQ(q.lanes, 8);
  ASSERT_EQ(schedules::parse_conv_params("depthwise", &q), "");
  EXPECT_EQ(q.lanes, 0);
  ASSERT_EQ(schedules::parse_conv_params(schedules::to_string(p), &q), "");
  const schedules::ConvParams before = q;
  for (const char* bad :
       {"fastest", "deep rows=2", "deep block=2", "deep block=2x0", "wide split=2", "deep chunk=-1",
        "wide stage=maybe", "", "deep wide chunk=8", "deep prefetch=2", "wide prefetch=1",
        "wide lanes=-8", "wide lanes=x", "depthwise lanes=8", "grouped lanes=8"}) {
    SCOPED_TRACE(bad);
    EXPECT_NE(schedules::parse_conv_params(bad, &q), "");
    EXPECT_EQ(q, before) << "a refused text changed the parameters";
  }
}

// Validation against the layer and the target: tiles that do not fit the output or the
// register file, and in-place inputs of spatial windows.
TEST(ConvKernelSchedules, ParamsThatDoNotFitAreRefused) {
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41");
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  schedules::ConvShape s;
  s.out_height = s.out_width = 7, s.out_channels = 64, s.reduction_channels = 64;
  s.kernel_h = s.kernel_w = 3, s.padded = true;
  const auto error = [&](const std::string& text, const Halide::Target& t) {
    schedules::ConvParams p = schedules::default_conv_params(s, t);
    const std::string e = schedules::parse_conv_params(text, &p);
    return e.empty() ? schedules::conv_params_error(p, s, t) : e;
  };
  EXPECT_EQ(error("wide block=2x7", avx512), "");
  EXPECT_NE(error("wide block=2x14", avx512), "");   // wider than the output
  EXPECT_NE(error("wide block=5x7", avx512), "");    // 80 channels of 64
  EXPECT_NE(error("wide block=3x7", avx2), "");      // 21 accumulators of 14
  EXPECT_NE(error("wide stage=in_place", avx512), "");
  EXPECT_NE(error("grouped", avx512), "");
  EXPECT_EQ(error("deep block=2x7", avx2), "");
  // The vector width: the target's or half of it (not on 4-lane SSE targets), and the tile's
  // channels and accumulators counted in vectors of that width.
  const Halide::Target sse("x86-64-linux-sse41");
  EXPECT_EQ(error("wide block=4x7 lanes=8", avx512), "");
  EXPECT_EQ(error("wide block=2x7 lanes=16", avx512), "");
  EXPECT_NE(error("deep block=4x7 lanes=4", avx2), "");  // 28 accumulators of 14
  EXPECT_EQ(error("deep block=4x3 lanes=4", avx2), "");
  EXPECT_EQ(error("deep block=2x7 lanes=4", avx2), "");
  EXPECT_EQ(error("wide block=2x7 lanes=8", avx2), "");
  EXPECT_NE(error("wide block=2x7 lanes=4", avx512), "");  // a quarter
  EXPECT_NE(error("wide block=2x7 lanes=32", avx512), "");
  EXPECT_NE(error("wide block=2x7 lanes=2", sse), "");
  EXPECT_NE(error("wide block=5x6 lanes=16", avx512), "");  // 80 channels of 64
  EXPECT_EQ(error("wide block=5x6 lanes=8", avx512), "");   // 40 of 64, 30 accumulators
  EXPECT_NE(error("deep block=5x4 lanes=4", avx2), "");
  // Groups narrower than a vector take the grouped family only, with one vector per tile.
  schedules::ConvShape narrow = s;
  narrow.grouped = narrow.narrow_groups = true, narrow.reduction_channels = 4;
  const auto narrow_error = [&](const std::string& text, const Halide::Target& t) {
    schedules::ConvParams p = schedules::default_conv_params(narrow, t);
    EXPECT_EQ(p.family, schedules::ConvFamily::grouped);
    const std::string e = schedules::parse_conv_params(text, &p);
    return e.empty() ? schedules::conv_params_error(p, narrow, t) : e;
  };
  EXPECT_EQ(narrow_error("grouped block=1x6", avx2), "");
  EXPECT_NE(narrow_error("grouped block=2x4", avx2), "");   // two vectors
  EXPECT_NE(narrow_error("grouped block=1x20", avx2), "");  // 20 accumulators of 14
  EXPECT_NE(narrow_error("wide block=1x4", avx2), "");
  // The default tile: 8 pixels on AVX2; on AVX-512 the widest of 8 to 14 that computes the
  // fewest columns past the row's end. Every default is valid at every width.
  const auto default_pixels = [&](int width, const Halide::Target& t) {
    schedules::ConvShape w = narrow;
    w.out_width = width;
    const schedules::ConvParams p = schedules::default_conv_params(w, t);
    EXPECT_EQ(schedules::conv_params_error(p, w, t), "")
        << width << ": " << schedules::to_string(p);
    return p.block.pixels;
  };
  EXPECT_EQ(default_pixels(28, avx2), 8);
  EXPECT_EQ(default_pixels(28, avx512), 14);
  EXPECT_EQ(default_pixels(56, avx512), 14);
  EXPECT_EQ(default_pixels(17, avx512), 9);
  EXPECT_EQ(default_pixels(15, avx512), 8);  // 16 columns; 9 to 14 compute more
  EXPECT_EQ(default_pixels(7, avx512), 7);
  for (int width = 1; width <= 80; ++width) {
    EXPECT_LE(default_pixels(width, avx512), std::min(width, 14)) << width;
    EXPECT_EQ(default_pixels(width, avx2), std::min(width, 8)) << width;
  }
  const std::vector<schedules::ConvParams> c = schedules::conv_candidates(narrow, avx2, 2, 16);
  ASSERT_GT(c.size(), 3u);
  EXPECT_EQ(c.front(), schedules::default_conv_params(narrow, avx2));
  for (const schedules::ConvParams& p : c) {
    EXPECT_EQ(p.family, schedules::ConvFamily::grouped) << schedules::to_string(p);
    EXPECT_EQ(schedules::conv_params_error(p, narrow, avx2), "") << schedules::to_string(p);
    EXPECT_LE(p.block.pixels, narrow.out_width) << schedules::to_string(p);
  }
}

// One output pixel (an SE block's 1x1s after a global pooling): one task of the wide family,
// up to 4 channel vectors per tile; unless the weights are large enough to share out.
TEST(ConvKernelSchedules, OnePixelOutputsRunInOneTask) {
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41");
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  schedules::ConvShape s;
  const auto chosen = [](const schedules::ConvShape& shape, const Halide::Target& t) {
    const schedules::ConvParams p = schedules::default_conv_params(shape, t);
    EXPECT_EQ(schedules::conv_params_error(p, shape, t), "") << schedules::to_string(p);
    return schedules::to_string(p);
  };
  s.out_height = s.out_width = 1, s.out_channels = 64, s.reduction_channels = 240;
  EXPECT_EQ(chosen(s, avx512), "wide block=4x1 rows=1 split=0 stage=in_place");
  EXPECT_EQ(chosen(s, avx2), "wide block=4x1 rows=1 split=0 stage=in_place");
  s.out_channels = 8;  // fewer channels than a vector
  EXPECT_EQ(chosen(s, avx512), "wide block=0x1 rows=1 split=0 stage=in_place");
  s.out_channels = 1000, s.reduction_channels = 2048;  // 8 MB of weights: channel-block tasks
  EXPECT_EQ(chosen(s, avx512).rfind("deep ", 0), 0u);
}

// A pooling fused after a wide convolution runs in bands of pooled rows, each computing the
// convolution rows its windows cover: the band height whose tasks 2 and 4 threads share evenly,
// counting the rows two bands both compute.
TEST(ConvKernelSchedules, PooledBandsShareEvenly) {
  const graph::Pool2d max3s2{graph::PoolKind::max, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, false, false};
  const auto row = [](int64_t width) { return width * 64 * 4; };  // 64 channels of float
  // Inception's 36 pooled rows: 4 bands of 9 (19 convolution rows each), not 8 of 5 (11 each,
  // 88 rows for 73: one thread's 4 bands 44 rows, 20% over its share).
  EXPECT_EQ(schedules::pool_band_rows({64, 36, 36, 1}, max3s2, row(73)), 9);
  // ResNet-18's 56 rows: 4 bands of 14 share best, but 29 rows of 112 pixels are over 512 KiB,
  // so 8 of 7; with rows half as long, 4 of 14.
  EXPECT_EQ(schedules::pool_band_rows({64, 56, 56, 1}, max3s2, row(112)), 7);
  EXPECT_EQ(schedules::pool_band_rows({64, 56, 56, 1}, max3s2, row(56)), 14);
  // A batch of 3 (rows half as long): 12 tasks of 14 rows, 6 or 3 a thread.
  EXPECT_EQ(schedules::pool_band_rows({64, 56, 56, 3}, max3s2, row(56)), 14);
  // A 2x2/s2 pooling shares no rows: the band nearest 8 per image that splits evenly.
  const graph::Pool2d max2s2{graph::PoolKind::max, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, false, false};
  EXPECT_EQ(schedules::pool_band_rows({64, 56, 56, 1}, max2s2, row(112)), 7);
  EXPECT_EQ(schedules::pool_band_rows({64, 1, 1, 1}, max2s2, row(2)), 1);
}

// The depthwise family: the default per kernel and input, the text form, refusals and the
// tuner's candidates (every one valid, the default first).
TEST(ConvKernelSchedules, DepthwiseParams) {
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  schedules::ConvShape s;
  s.out_height = 28, s.out_width = 28, s.out_channels = 192, s.reduction_channels = 1;
  s.kernel_h = s.kernel_w = 3, s.padded = true, s.grouped = s.depthwise = true;
  // 7 pixels: the 28-wide row in 4 whole tiles (8 computed 32 columns). 4 bands of 7 rows, not
  // about 8 of 4 (7 tasks: one of 2 threads would run 4 of them, the other 3).
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(s, avx2)),
            "depthwise block=1x7 rows=7 inner=channels stage=in_place");
  schedules::ConvShape computed = s;
  computed.computed_input = true;  // a prologue: staged once, not recomputed per tap
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(computed, avx2)),
            "depthwise block=1x7 rows=7 inner=pixels stage=copy");
  // 14 rows: in place, 14 one-row bands (7 of 2 rows split 4:3 between 2 threads); staged, a
  // band re-reads its halo rows, so at least 2 rows, and 4 bands of 4 share no better.
  schedules::ConvShape fourteen = s;
  fourteen.out_height = fourteen.out_width = 14;
  EXPECT_EQ(schedules::default_conv_params(fourteen, avx2).rows, 1);
  fourteen.computed_input = true;
  EXPECT_EQ(schedules::default_conv_params(fourteen, avx2).rows, 2);
  // 56 and 112 rows: 8 bands, as before; a batch of 3 at 28 rows: 3 x 4 bands of 7.
  schedules::ConvShape tall = s;
  tall.out_height = 56;
  EXPECT_EQ(schedules::default_conv_params(tall, avx2).rows, 7);
  tall.out_height = 112;
  EXPECT_EQ(schedules::default_conv_params(tall, avx2).rows, 14);
  schedules::ConvShape batch = s;
  batch.batch = 3;
  EXPECT_EQ(schedules::default_conv_params(batch, avx2).rows, 7);
  schedules::ConvShape seven = s;
  seven.kernel_h = seven.kernel_w = 7, seven.out_width = seven.out_height = 7;
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(seven, avx2)),
            "depthwise block=1x7 rows=2 inner=channels stage=in_place");
  schedules::ConvShape nine = seven;  // wider than the unrolled row of taps: staged
  nine.kernel_h = nine.kernel_w = 9;
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(nine, avx2)),
            "depthwise block=1x7 rows=2 inner=pixels stage=copy");
  schedules::ConvParams p = schedules::default_conv_params(s, avx2);
  ASSERT_EQ(schedules::parse_conv_params("block=1x6 rows=3 inner=pixels stage=copy", &p), "");
  EXPECT_EQ(schedules::to_string(p), "depthwise block=1x6 rows=3 inner=pixels stage=copy");
  EXPECT_NE(schedules::parse_conv_params("inner=rows", &p), "");
  EXPECT_NE(schedules::parse_conv_params("depthwise chunk=144", &p), "");  // a deep knob
  const auto error = [&](const std::string& text, const schedules::ConvShape& shape) {
    schedules::ConvParams q = schedules::default_conv_params(shape, avx2);
    const std::string e = schedules::parse_conv_params(text, &q);
    return e.empty() ? schedules::conv_params_error(q, shape, avx2) : e;
  };
  EXPECT_EQ(error("depthwise block=1x14 rows=28", s), "");
  EXPECT_EQ(error("naive", s), "");
  EXPECT_NE(error("wide block=2x6", s), "");        // dense families refuse depthwise layers
  EXPECT_NE(error("depthwise block=2x8", s), "");   // one vector per tile
  EXPECT_NE(error("depthwise block=1x16", s), "");  // 16 accumulators of 14
  EXPECT_NE(error("depthwise block=1x8", seven), "");   // wider than the 7-pixel row
  for (const auto& [width, pixels] : {std::pair{112, 8}, {56, 8}, {14, 7}, {17, 6}, {5, 5}, {3, 1}}) {
    schedules::ConvShape w = s;
    w.out_width = width;
    EXPECT_EQ(schedules::default_conv_params(w, avx2).block.pixels, pixels) << width;
  }
  EXPECT_NE(error("depthwise rows=8", seven), "");      // taller than the output
  schedules::ConvShape dense = s;
  dense.depthwise = dense.grouped = false, dense.reduction_channels = 192;
  EXPECT_NE(error("depthwise", dense), "");
  const std::vector<schedules::ConvParams> c = schedules::conv_candidates(s, avx2, 2, 16);
  ASSERT_GT(c.size(), 8u);
  EXPECT_EQ(c.front(), schedules::default_conv_params(s, avx2));
  std::set<std::string> distinct;
  for (const schedules::ConvParams& q : c) {
    EXPECT_EQ(q.family, schedules::ConvFamily::depthwise) << schedules::to_string(q);
    EXPECT_EQ(schedules::conv_params_error(q, s, avx2), "") << schedules::to_string(q);
    distinct.insert(schedules::to_string(q));
  }
  EXPECT_EQ(distinct.size(), c.size());
}

// The tasks of a depthwise convolution with an expansion: blocks of 2 channel vectors by bands
// of rows, an even number of tasks where a band count of 4+ rows allows.
TEST(ConvKernelSchedules, ExpansionTasksSplitEvenly) {
  const Halide::Target avx512("x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake");
  // MobileNetV2's 112x112 expansion into 96 channels, stride 2: 3 blocks x 4 bands of 14 rows.
  schedules::ExpansionTasks t = schedules::expansion_tasks(96, 56, 1, avx512);
  EXPECT_EQ(t.channels, 32);
  EXPECT_EQ(t.rows, 14);
  t = schedules::expansion_tasks(144, 28, 1, avx512);  // 5 blocks x 2 bands: even already
  EXPECT_EQ(t.rows, 14);
  t = schedules::expansion_tasks(96, 9, 1, avx512);  // 3 blocks x 2 bands of 5 rows
  EXPECT_EQ(t.rows, 5);
  // Its tile: on AVX-512 at stride 1 a whole row of 9 to 14 pixels; else the depthwise
  // default's 4 to 8 pixels.
  schedules::ConvShape e;
  e.out_height = e.out_width = 14, e.out_channels = 384, e.reduction_channels = 1;
  e.kernel_h = e.kernel_w = 3, e.padded = true, e.grouped = e.depthwise = e.expanded = true;
  EXPECT_EQ(schedules::to_string(schedules::default_conv_params(e, avx512)),
            "depthwise block=1x14 rows=14 inner=channels stage=in_place");
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  EXPECT_EQ(schedules::default_conv_params(e, avx2).block.pixels, 7);
  schedules::ConvShape strided = e;
  strided.stride_w = strided.stride_h = 2;
  EXPECT_EQ(schedules::default_conv_params(strided, avx512).block.pixels, 7);
  schedules::ConvShape wide = e;
  wide.out_width = wide.out_height = 28;
  EXPECT_EQ(schedules::default_conv_params(wide, avx512).block.pixels, 7);
  for (int channels : {8, 16, 24, 96, 144, 192, 384, 576, 960})
    for (int height : {1, 3, 7, 9, 14, 28, 56, 112})
      for (int batch : {1, 2, 3}) {
        t = schedules::expansion_tasks(channels, height, batch, avx512);
        ASSERT_GE(t.rows, 1);
        ASSERT_LE(t.rows, height);
        const int blocks = (channels + t.channels - 1) / t.channels;
        const int bands = (height + t.rows - 1) / t.rows;
        // At least 8 tasks, or bands of 4 rows (the least) already; an even count where
        // another band count of 4+ rows gives one.
        const int tasks = bands * blocks * batch;
        EXPECT_TRUE(tasks >= 8 || t.rows <= 4 || bands == std::max(1, height / 4))
            << channels << " channels, " << height << " rows, batch " << batch;
        bool even_possible = false;
        for (int b = bands; b <= std::max(1, height / 4); ++b) {
          const int rows = (height + b - 1) / b;
          even_possible |= (height + rows - 1) / rows * blocks * batch % 2 == 0;
        }
        if (even_possible)
          EXPECT_EQ(tasks % 2, 0) << channels << " channels, " << height << " rows, batch "
                                  << batch;
      }
}

}  // namespace
