// tools/peaks.cpp's roofline: which peak a kernel is rated against, and the bytes it counts.
#include <gtest/gtest.h>

#include <variant>

#include "graph/example.h"
#include "graph/kernel_spec.h"
#include "graph/passes/pipeline.h"
#include "kiln/runtime.h"
#include "peaks.h"

namespace {

// A bf16 convolution that runs dot products is rated against the dot-product peak, anything
// else against the FMA one, and a bf16 convolution's weights count 2 bytes each.
TEST(Roofline, RatesBf16ConvolutionsAgainstTheDotProductPeak) {
  kiln::cli::Peaks p;
  p.fma_gflops = 100, p.dot_gflops = 200, p.bandwidth_gbs = 10;
  const kiln::cli::KernelWork bf16{"conv", 2e9, 1e6, true};  // 100 GFLOP/s in 20 ms
  kiln::cli::Roofline r = kiln::cli::roofline(p, bf16, 0.02, true);
  EXPECT_TRUE(r.compute_bound && r.dot);
  EXPECT_NEAR(r.fraction, 0.5, 1e-9);
  r = kiln::cli::roofline(p, bf16, 0.02, false);  // converted to float32 FMAs
  EXPECT_FALSE(r.dot);
  EXPECT_NEAR(r.fraction, 1.0, 1e-9);
  kiln::cli::KernelWork f32 = bf16;
  f32.bf16 = false;
  EXPECT_FALSE(kiln::cli::roofline(p, f32, 0.02, true).dot);
  p.dot_gflops = 0;  // a CPU without AVX512_BF16
  r = kiln::cli::roofline(p, bf16, 0.02, true);
  EXPECT_FALSE(r.dot);
  EXPECT_NEAR(r.fraction, 1.0, 1e-9);

  const kiln::graph::Graph input = kiln::graph::reference_example({1, 8, 20, 20, 32});
  kiln::graph::PipelineOptions o;
  o.precision = kiln::graph::Precision::bf16;
  kiln::ModelOptions lower;
  lower.lower_only = true;
  const kiln::Model f32_model(kiln::graph::run_passes(input), lower);
  const kiln::Model bf16_model(kiln::graph::run_passes(input, o), lower);
  auto conv_work = [](const kiln::Model& m) {
    for (const kiln::graph::KernelSpec& k : m.kernels())
      if (std::holds_alternative<kiln::graph::ConvKernelSpec>(k)) return kiln::cli::kernel_work(k);
    return kiln::cli::KernelWork{};
  };
  const kiln::cli::KernelWork wf = conv_work(f32_model), wb = conv_work(bf16_model);
  EXPECT_FALSE(wf.bf16);
  EXPECT_TRUE(wb.bf16);
  EXPECT_EQ(wb.flops, wf.flops);
  EXPECT_EQ(wf.bytes - wb.bytes, 2.0 * 3 * 3 * 8 * 32);  // HWIO 3x3x8x32, 2 bytes saved each
}

}  // namespace
