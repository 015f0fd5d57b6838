// Winograd convolution kernels (family winograd) against the reference interpreter on every CPU
// target, their knobs and refusals, the runtime binding their transformed weights, and an
// autoscheduler given the direct algorithm instead. The other families: test_conv_kernels.cpp.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "conv_kernel_harness.h"
#include "schedules/conv_params.h"
#include "test_generator.h"

namespace {

using namespace kiln;
using namespace kiln::conv_kernel_test;

// Winograd (family winograd) against the reference: padding 0 and 1, outputs that are not
// multiples of either tile (tiles overhang the right and bottom edges), channel counts that are
// not multiples of a vector, batch 2, ReLU and ReLU6 epilogues and a residual; both tiles, each
// register block the layer's default, with and without a task per block of channels
// (split=1: the last block shifted onto the one before where the channels are not whole
// blocks), on every CPU target; the weights transformed by
// runtime::winograd_conv_weights as the runtime binds them.
const ConvCase kWinogradCases[] = {
    {"ci13_co20_9x8_pad0", 1, 13, 11, 10, 20, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1},
    {"batch2_ci16_co24_9x13_pad1", 2, 16, 9, 13, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"ci64_co96_7x7_pad1", 1, 64, 7, 7, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"ci8_co16_6x5_asymmetric_pad", 1, 8, 6, 5, 16, 3, 3, 1, 1, 1, 0, 0, 1, 1, 1},
};

TEST(ConvKernelWinograd, MatchesReferenceOnEveryTarget) {
  for (size_t i = 0; i < std::size(kWinogradCases); ++i) {
    const ConvCase& c = kWinogradCases[i];
    const Problem prob = make_problem(c, kEpilogues[1 + i % 2], 700 + i, /*residual=*/i == 1);
    for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
      if (!testing_util::runs_target(t)) continue;
      for (const char* tile : {"2", "4"})
        for (const char* split : {"", " split=1"}) {
        SCOPED_TRACE(std::string(c.name) + " tile " + tile + split + " on " + runtime::cpu_targets()[t]);
        std::shared_ptr<const GeneratedKernels> keep;
        const std::string schedule = std::string("winograd tile=") + tile + split;
        EXPECT_EQ(generate_kernel(conv_spec(prob, schedule), t, &keep).winograd_tile,
                  std::stoi(tile));
        // F(4x4)'s transforms (entries up to 8, weights scaled by 1/24) round more: within
        // the model tolerance's atol (1e-4) on these outputs of up to ~10, 2-4e-5 measured.
        expect_close(run_kernel(prob, schedule, t), prob.expected, tile[0] == '4' ? 1e-4 : 1e-5);
        }
    }
  }
}

// Stride 2 (F(2x2) only, runtime::winograd_matrices): padding 1 on odd and even input sizes
// (the last tile overhangs the output), TensorFlow's SAME padding (none before, 1 after), no
// padding (Inception's reduction blocks), batch 2, channels that are not whole vectors, ReLU,
// ReLU6 and a residual; with and without a task per block of channels, on every CPU target.
const ConvCase kStride2Cases[] = {
    {"s2_ci16_co24_15x13_pad1", 1, 16, 15, 13, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    {"s2_batch2_ci13_co32_12x14_same", 2, 13, 12, 14, 32, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1},
    {"s2_ci24_co20_11x11_pad0", 1, 24, 11, 11, 20, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1},
    {"s2_ci32_co48_28x28_pad1", 1, 32, 28, 28, 48, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
};

TEST(ConvKernelWinograd, StrideTwoMatchesReferenceOnEveryTarget) {
  for (size_t i = 0; i < std::size(kStride2Cases); ++i) {
    const ConvCase& c = kStride2Cases[i];
    const Problem prob = make_problem(c, kEpilogues[i % 3], 760 + i, /*residual=*/i == 1);
    for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
      if (!testing_util::runs_target(t)) continue;
      for (const char* schedule : {"winograd tile=2", "winograd tile=2 split=1"}) {
        SCOPED_TRACE(std::string(c.name) + " " + schedule + " on " + runtime::cpu_targets()[t]);
        std::shared_ptr<const GeneratedKernels> keep;
        EXPECT_EQ(generate_kernel(conv_spec(prob, schedule), t, &keep).winograd_tile, 2);
        // The stride-2 matrices are 0 and +-1: the direct convolution's rounding, reordered.
        expect_close(run_kernel(prob, schedule, t), prob.expected, 1e-5);
      }
    }
  }
  // Other blocks and tasks, and half-width vectors, on the best target: blocks of 3 of a task's
  // tiles over 2 tile rows (7x7 tiles: the last task has one row), 24 channels as 3 vectors of
  // half the target's width.
  const int best = runtime::best_cpu_target();
  const int half = Halide::Target(runtime::cpu_targets()[best]).natural_vector_size<float>() / 2;
  const Problem prob = make_problem(kStride2Cases[3], kEpilogues[1], 770);
  for (const char* schedule :
       {"winograd tile=2 block=1x3 rows=2", "winograd tile=2 block=2x5 rows=7 split=1"}) {
    SCOPED_TRACE(schedule);
    expect_close(run_kernel(prob, schedule, best), prob.expected, 1e-5);
  }
  const Problem narrow = make_problem(kStride2Cases[0], kEpilogues[2], 771);
  const std::string lanes =
      "winograd tile=2 block=" + std::to_string(24 / half) + "x2 lanes=" + std::to_string(half);
  SCOPED_TRACE(lanes);
  if (half >= 4 && 24 % half == 0)
    expect_close(run_kernel(narrow, lanes, best), narrow.expected, 1e-5);
}

// Which stride-2 layers take Winograd by default: outputs of at least 13x13 with 16 or more
// input channels (as at stride 1); a 5x5 output keeps the direct schedule.
TEST(ConvKernelWinograd, StrideTwoDefaultChoice) {
  std::shared_ptr<const GeneratedKernels> keep;
  const int best = runtime::best_cpu_target();
  const Problem big = make_problem(kStride2Cases[3], kEpilogues[1], 780);  // 14x14 output
  EXPECT_EQ(generate_kernel(conv_spec(big, ""), best, &keep).winograd_tile, 2);
  expect_close(run_kernel(big, "", best), big.expected, 1e-5);
  const Problem small = make_problem(kStride2Cases[2], kEpilogues[1], 781);  // 5x5 output
  EXPECT_EQ(generate_kernel(conv_spec(small, ""), best, &keep).winograd_tile, 0);
}

// Each set of matrices computes its convolution exactly (in double): a tile side's outputs
// y_j = sum_k g_k d_(stride j + k) are A^T [(G g) . (B^T d)], for random g and d.
TEST(WinogradMatrices, ComputeTheStridedConvolution) {
  for (const auto [tile, stride] : {std::pair{2, 1}, std::pair{4, 1}, std::pair{2, 2}}) {
    ASSERT_TRUE(runtime::winograd_supported(tile, stride));
    const runtime::WinogradMatrices& m = runtime::winograd_matrices(tile, stride);
    EXPECT_EQ(m.tile, tile);
    EXPECT_EQ(m.stride, stride);
    EXPECT_EQ(m.alpha, (tile - 1) * stride + 3);  // the input pixels a tile side reads
    const std::vector<float> g = graph::random_uniform(3, -1, 1, 790 + tile + stride);
    const std::vector<float> d = graph::random_uniform(m.alpha, -1, 1, 795 + tile + stride);
    for (int j = 0; j < tile; ++j) {
      double got = 0;
      for (int a = 0; a < m.alpha; ++a) {
        double u = 0, v = 0;
        for (int k = 0; k < 3; ++k) u += m.g[a][k] * g[k];
        for (int k = 0; k < m.alpha; ++k) v += m.bt[a][k] * d[k];
        got += m.at[j][a] * u * v;
      }
      double want = 0;
      for (int k = 0; k < 3; ++k) want += double(g[k]) * d[stride * j + k];
      EXPECT_NEAR(got, want, 1e-12) << "tile " << tile << " stride " << stride << " output " << j;
    }
  }
  EXPECT_FALSE(runtime::winograd_supported(4, 2));
  EXPECT_FALSE(runtime::winograd_supported(2, 3));
}

// One weight tensor read by a stride-1 and a stride-2 convolution, both Winograd: the runtime
// makes a transformed copy for each stride (the matrices differ), and both match the reference.
TEST(ConvKernelWinograd, ModelTransformsSharedWeightsPerStride) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {1, 14, 14, 16}, Layout::nhwc);
  const graph::ValueId w = b.constant(
      "w", {3, 3, 16, 16}, graph::random_uniform(3 * 3 * 16 * 16, -0.1f, 0.1f, 800), Layout::hwio);
  const graph::ValueId bias = b.constant("b", {16}, graph::random_uniform(16, -0.5f, 0.5f, 801));
  b.output(b.op("conv", graph::Conv2d{1, 1, 1, 1, 1, 1, 1, 1, {}}, {x, w, bias}));
  b.output(b.op("conv", graph::Conv2d{2, 2, 1, 1, 1, 1, 1, 1, {}}, {x, w, bias}));
  const graph::Graph g = b.finish();
  const graph::Tensor input{
      {1, 14, 14, 16}, Layout::nhwc, graph::random_uniform(14 * 14 * 16, -1.0f, 1.0f, 802)};
  const std::vector<graph::Tensor> expected = graph::run_reference(g, {input});
  codegen::CodegenOptions o;
  o.cache_dir = KILN_TEST_CACHE_DIR;
  o.schedules = [](const graph::KernelSpec&, const std::string&) {
    return std::string("winograd tile=2");
  };
  ModelOptions mo;
  mo.generate_kernels = codegen::kernel_generator(o);
  Model m(g, mo);
  ASSERT_EQ(m.kernels().size(), 2u);
  const auto& first = std::get<graph::ConvKernelSpec>(m.kernels()[0]);
  const auto& second = std::get<graph::ConvKernelSpec>(m.kernels()[1]);
  EXPECT_EQ(first.weights.value, second.weights.value);  // what this test is about
  EXPECT_EQ(first.stride_w + second.stride_w, 3);
  EXPECT_EQ(m.winograd_tile(0), 2);
  EXPECT_EQ(m.winograd_tile(1), 2);
  ASSERT_TRUE(m.run({input}));
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    const TensorView out = m.output(i);
    ASSERT_EQ(out.shape, expected[i].shape);
    expect_close(std::vector<float>(out.data, out.data + expected[i].data.size()), expected[i],
                 1e-5);
  }
}

// Non-default register blocks and tasks on the best target: blocks of 5 tiles running across
// the rows of 7 tiles in tasks of 2 tile rows (the last task has one), and blocks of 3 of a
// row's 4 tiles (the last block overlaps the one before); each also with a task per block of
// channels (split=1), whole-image tasks for F(4x4).
TEST(ConvKernelWinograd, RegisterBlocksAndTasks) {
  const Problem prob = make_problem(kWinogradCases[1], kEpilogues[0], 720);
  for (const char* schedule : {"winograd tile=2 block=1x5 rows=2", "winograd tile=4 block=1x3 rows=1",
                               "winograd tile=2 block=1x5 rows=2 split=1", "winograd tile=4 block=1x3 rows=3 split=1"}) {
    SCOPED_TRACE(schedule);
    expect_close(run_kernel(prob, schedule, runtime::best_cpu_target()), prob.expected, 1e-4);
  }
}

// Vectors of half the target's width (lanes=, on targets of 8 lanes or more): 24 output
// channels as 3 vectors of 8 on AVX-512 (a 16-lane block of 2 would cover 32), 20 as 2 of 8
// (the last block shifted onto the one before) or 5 of 4 on AVX2, both tiles, and a task per
// block of channels.
TEST(ConvKernelWinograd, HalfWidthVectors) {
  for (size_t i : {size_t{0}, size_t{1}}) {
    const Problem prob = make_problem(kWinogradCases[i], kEpilogues[2], 730 + i);
    for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
      const int lanes = Halide::Target(runtime::cpu_targets()[t]).natural_vector_size<float>() / 2;
      if (!testing_util::runs_target(t) || lanes < 4) continue;
      const std::string half = " lanes=" + std::to_string(lanes);
      const std::string vectors = std::to_string(kWinogradCases[i].co / lanes);
      for (const std::string& schedule : {"winograd tile=2 block=" + vectors + "x2" + half,
                                          "winograd tile=4 block=1x2 split=1" + half}) {
        SCOPED_TRACE(schedule + " on " + runtime::cpu_targets()[t]);
        expect_close(run_kernel(prob, schedule, t), prob.expected, 1e-4);
      }
    }
  }
}

// A Halide autoscheduler on a layer whose default is Winograd gets the direct algorithm and the
// weights as given (what the runtime binds for it: codegen::winograd_weight_tile is 0).
TEST(ConvKernelWinograd, AutoschedulerGetsTheDirectAlgorithm) {
  const ConvCase c{"ci16_co32_14x14_pad1", 1, 16, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  const Problem prob = make_problem(c, kEpilogues[1], 740);
  std::shared_ptr<const GeneratedKernels> keep;
  EXPECT_EQ(generate_kernel(conv_spec(prob, ""), runtime::best_cpu_target(), &keep).winograd_tile, 2);
  EXPECT_EQ(generate_kernel(conv_spec(prob, "auto:Mullapudi2016"), runtime::best_cpu_target(), &keep)
                .winograd_tile,
            0);
  expect_close(run_kernel(prob, "auto:Mullapudi2016", runtime::best_cpu_target()), prob.expected);
}

// The runtime transforms the weights once when it binds them: a model whose kernel a schedule
// lookup sends to Winograd runs twice and matches the reference both times.
TEST(ConvKernelWinograd, ModelBindsTransformedWeights) {
  const Problem prob = make_problem(kWinogradCases[2], kEpilogues[1], 730, /*residual=*/true);
  codegen::CodegenOptions o;
  o.cache_dir = KILN_TEST_CACHE_DIR;
  o.schedules = [](const graph::KernelSpec&, const std::string&) {
    return std::string("winograd tile=4");
  };
  ModelOptions mo;
  mo.generate_kernels = codegen::kernel_generator(o);
  Model m(prob.g, mo);
  EXPECT_EQ(m.winograd_tile(0), 4);  // what `kiln bench --per-layer` shows
  for (int call = 0; call < 2; ++call) {
    ASSERT_TRUE(m.run({prob.input}));
    const TensorView out = m.output(0);
    expect_close(std::vector<float>(out.data, out.data + prob.expected.data.size()), prob.expected);
  }
}

// Winograd's knobs: text form, and the layers and targets it refuses, each with its reason.
TEST(ConvKernelSchedules, WinogradKnobsAndRefusals) {
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  schedules::ConvParams p;
  ASSERT_EQ(schedules::parse_conv_params("winograd rows=2 tile=2 block=1x5", &p), "");
  EXPECT_EQ(schedules::to_string(p), "winograd tile=2 block=1x5 rows=2 split=0 prefetch=0");
  schedules::ConvParams split = p;
  ASSERT_EQ(schedules::parse_conv_params("split=1", &split), "");
  EXPECT_EQ(schedules::to_string(split), "winograd tile=2 block=1x5 rows=2 split=1 prefetch=0");
  for (const char* bad : {"winograd tile=3", "winograd tile=", "winograd chunk=8"}) {
    schedules::ConvParams q = p;
    EXPECT_NE(schedules::parse_conv_params(bad, &q), "") << bad;
  }
  schedules::ConvShape s;
  s.out_height = s.out_width = 14, s.out_channels = 64, s.reduction_channels = 64;
  s.kernel_h = s.kernel_w = 3, s.padded = true;
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx2)),
            "winograd tile=2 block=3x4 rows=1 split=0 prefetch=0");  // F(2x2) below 28 pixels wide;
                                                                     // 7 tiles: 4 + 3
  s.out_channels = 16;  // too few channels for 3 vectors
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx2)),
            "winograd tile=2 block=2x4 rows=1 split=0 prefetch=0");
  // More output channels than tiles and 2 MiB or more of transformed weights (16 x 256 x 256
  // floats, 4 MiB): a task per block of channels over the whole image, and over 2 MiB, the
  // next position's weights prefetched (schedules/weight_prefetch.h).
  s.out_channels = s.reduction_channels = 256;
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41");
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx2)),
            "winograd tile=2 block=3x4 rows=7 split=1 prefetch=1");
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx512)),
            "winograd tile=2 block=4x7 rows=7 split=1 prefetch=1");
  s.out_channels = 128;  // 2 MiB: 2 blocks of 4 vectors
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx512)),
            "winograd tile=2 block=4x7 rows=7 split=1 prefetch=0");
  s.reduction_channels = 128;  // 1 MiB: a task per tile row, all 28 accumulators
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx512)),
            "winograd tile=2 block=4x7 rows=1 split=0 prefetch=0");
  s.out_width = s.out_height = 56;  // F(4x4): 14 tiles a row, 2x14
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx512)),
            "winograd tile=4 block=2x14 rows=1 split=0 prefetch=0");
  // F(4x4) on 28x28 (49 tiles), 128 -> 128: 36 x 128 x 128 floats, 2.25 MiB, and more channels
  // than tiles: split over the whole image as well (ResNet's stage 2).
  s.out_width = s.out_height = 28;
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx512)),
            "winograd tile=4 block=4x7 rows=7 split=1 prefetch=1");
  s.reduction_channels = 64;  // 1.1 MiB: a task per tile row, nothing prefetched
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx512)),
            "winograd tile=4 block=4x7 rows=1 split=0 prefetch=0");
  s.reduction_channels = 128;
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx2)),
            "winograd tile=4 block=3x4 rows=7 split=1 prefetch=1");
  s.out_channels = 48, s.reduction_channels = 512;  // 3.4 MiB, but fewer channels than tiles
  EXPECT_EQ(schedules::default_winograd_params(s, avx512).tile, 4);
  EXPECT_EQ(schedules::default_winograd_params(s, avx512).split_channels, false);
  s.out_width = s.out_height = 14;
  s.out_channels = s.reduction_channels = 64;
  const schedules::ConvParams w = schedules::default_winograd_params(s, avx2, 4);
  EXPECT_EQ(schedules::to_string(w), "winograd tile=4 block=2x4 rows=1 split=0 prefetch=0");
  EXPECT_EQ(schedules::conv_params_error(w, s, avx2), "");
  const auto refused = [&](schedules::ConvShape layer, const Halide::Target& t,
                           const std::string& why, schedules::ConvParams q) {
    const std::string e = schedules::conv_params_error(q, layer, t);
    EXPECT_NE(e.find(why), std::string::npos) << "'" << e << "' lacks '" << why << "'";
  };
  schedules::ConvShape layer = s;
  layer.kernel_w = layer.kernel_h = 1;
  refused(layer, avx2, "3x3 windows only", w);
  layer = s, layer.stride_w = 2;
  refused(layer, avx2, "the same along both axes", w);
  layer.stride_h = 2;
  refused(layer, avx2, "stride 2 takes tile=2", w);  // w is F(4x4)
  layer.stride_w = layer.stride_h = 3;
  refused(layer, avx2, "stride 1 or 2", w);
  layer = s, layer.dilation_h = 2;
  refused(layer, avx2, "dilation 1 only", w);
  layer = s, layer.grouped = true;
  refused(layer, avx2, "ungrouped", w);
  layer = s, layer.out_channels = 4;
  refused(layer, avx2, "at least one vector of output channels", w);
  refused(s, Halide::Target("x86-64-linux-cuda"), "no GPU schedule", w);
  schedules::ConvParams wide_block = w;
  wide_block.block = {1, 5};  // 14 pixels are 4 tiles of 4
  refused(s, avx2, "does not fit the output", wide_block);
  layer = s, layer.reduction_channels = schedules::kWinograd4MaxChannels + 1;
  refused(layer, avx2, "loses too much precision", w);
  EXPECT_EQ(schedules::default_winograd_params(layer, avx2).tile, 2);
  // Stride 2: F(2x2) on any output; its 5x5 positions count in the transformed weights (25 x 256
  // x 256 floats, 6.25 MiB: split, prefetched), as on ResNet-50's layer3.0 conv2.
  layer = s, layer.stride_w = layer.stride_h = 2, layer.out_width = layer.out_height = 28;
  EXPECT_EQ(schedules::default_winograd_params(layer, avx512).tile, 2);
  layer.out_width = layer.out_height = 14, layer.out_channels = layer.reduction_channels = 256;
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(layer, avx512)),
            "winograd tile=2 block=4x7 rows=7 split=1 prefetch=1");
  layer.out_channels = layer.reduction_channels = 80;  // 0.6 MiB
  EXPECT_EQ(schedules::default_winograd_params(layer, avx512).split_channels, false);
}

}  // namespace
