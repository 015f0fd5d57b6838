// The deep schedule's prefetch of its next chunk of weights (schedules/weight_prefetch.h): the
// kernels with it against the reference on every CPU target, the generated code (prefetches in
// the reduction, the accumulator on the stack, nothing where not asked), and which models' kernels
// count as having cold weights.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "codegen/kernel_pipeline.h"
#include "conv_kernel_harness.h"
#include "schedules/conv_params.h"
#include "test_generator.h"

namespace {

using namespace kiln;
using namespace kiln::conv_kernel_test;

// Chunks of 16 and 64 steps over 40 and 300 input channels: full chunks, a partial last one, a
// single chunk per tap; a 3x3 window on the padding (the deep schedule leaves out the kernel
// rows on it, so a task makes fewer passes per tap at the edges), a stride, a channel count off
// the vector (the last block zero-padded), batch 2.
const ConvCase kCases[] = {
    {"ci300_co128_7x7_1x1", 1, 300, 7, 7, 128, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
    {"ci40_co64_7x7_3x3_pad1", 1, 40, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"ci64_co40_15x15_3x3_s2", 1, 64, 15, 15, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    {"batch2_ci48_co32_6x6_3x3", 2, 48, 6, 6, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
};

TEST(WeightPrefetch, DeepKernelsWithItMatchTheReferenceOnEveryTarget) {
  for (size_t i = 0; i < std::size(kCases); ++i) {
    const Problem prob = make_problem(kCases[i], kEpilogues[i % 3], 900 + i, /*residual=*/i == 1);
    for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
      if (!testing_util::runs_target(t)) continue;
      for (const char* schedule : {"deep chunk=16 prefetch=1", "deep chunk=64 prefetch=1",
                                   "deep chunk=16 tasks=1 prefetch=1"}) {
        SCOPED_TRACE(std::string(kCases[i].name) + " " + schedule + " on " +
                     runtime::cpu_targets()[static_cast<size_t>(t)]);
        expect_close(run_kernel(prob, schedule, t), prob.expected);
      }
    }
  }
}

const char* const kAvx512 = "x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake";

// The kernel's assembly for `schedule` on `target` (generated, not run: any machine), compiled
// as Kiln compiles its kernels (no runtime in the module).
std::string assembly(const Problem& prob, const std::string& schedule,
                     const std::string& target_name = kAvx512) {
  const graph::KernelSpec spec = conv_spec(prob, schedule);
  const Halide::Target target = Halide::Target(target_name).with_feature(Halide::Target::NoRuntime);
  codegen::KernelPipeline k = codegen::build_kernel_pipeline(spec, target);
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("kiln_weight_prefetch_" + std::to_string(::getpid()) + ".s");
  k.pipeline.compile_to_assembly(file.string(), k.arguments(), "kernel", target);
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(file);
  return text.str();
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// One task over a 14x14 output of 32 channels: its accumulator (25 KiB) is over Halide's 16 KiB
// for the stack, so without the prefetch it is allocated on the heap; with it, on the stack (a
// call the compiler cannot see into would otherwise make it store the sums after every
// multiply-add). The 1x1 window reads its input in place: no other allocation.
TEST(WeightPrefetch, PrefetchesInTheReductionWithTheSumsOnTheStack) {
  const Problem prob =
      make_problem({"ci256_co32_14x14_1x1", 1, 256, 14, 14, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
                   kEpilogues[1], 950);
  const std::string with = assembly(prob, "deep block=2x7 chunk=64 tasks=1 prefetch=1");
  const std::string without = assembly(prob, "deep block=2x7 chunk=64 tasks=1 prefetch=0");
  EXPECT_GT(count(with, "prefetcht0"), 0);
  EXPECT_EQ(count(with, "prefetchnta"), 0);
  EXPECT_EQ(count(without, "prefetch"), 0);
  EXPECT_EQ(count(with, "halide_malloc"), 0);
  EXPECT_GT(count(without, "halide_malloc"), 0);
  // The 16-register targets' tiles of 2 vectors by 7 (their accumulator fits the stack anyway).
  for (const char* target : {"x86-64-linux-sse41-avx-f16c-fma-avx2", "x86-64-linux-sse41"}) {
    SCOPED_TRACE(target);
    EXPECT_GT(
        count(assembly(prob, "deep block=2x7 chunk=64 tasks=1 prefetch=1", target), "prefetcht0"),
        0);
  }
  // The prefetch changes where the sums live, not what is computed.
  expect_close(run_kernel(prob, "deep block=2x7 chunk=64 tasks=1 prefetch=1",
                          testing_util::dispatch_or_best_target()),
               prob.expected);
}

// An accumulator over kMaxPrefetchAcc stays where Halide puts it, and gets no prefetches.
TEST(WeightPrefetch, NothingWhereTheAccumulatorIsTooLargeForTheStack) {
  const Problem prob = make_problem(
      {"ci64_co64_28x28_1x1", 1, 64, 28, 28, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1}, kEpilogues[0], 951);
  const std::string text = assembly(prob, "deep block=4x7 chunk=16 tasks=1 prefetch=1");
  EXPECT_EQ(count(text, "prefetch"), 0);
  EXPECT_GT(count(text, "halide_malloc"), 0);
}

// Winograd with a task per block of channels (split=1), each position's weights the next
// chunk of the one before: F(2x2) and F(4x4), channels off the vector, padding 0 and 1.
TEST(WeightPrefetch, WinogradKernelsWithItMatchTheReferenceOnEveryTarget) {
  const ConvCase cases[] = {
      {"ci48_co40_9x11_pad1", 1, 48, 9, 11, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {"ci32_co64_10x10_pad0", 1, 32, 10, 10, 64, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1},
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Problem prob = make_problem(cases[i], kEpilogues[1 + i], 960 + i);
    for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
      if (!testing_util::runs_target(t)) continue;
      for (const char* schedule :
           {"winograd tile=2 split=1 prefetch=1", "winograd tile=4 split=1 prefetch=1"}) {
        SCOPED_TRACE(std::string(cases[i].name) + " " + schedule + " on " +
                     runtime::cpu_targets()[static_cast<size_t>(t)]);
        expect_close(run_kernel(prob, schedule, t), prob.expected, 1e-4);
      }
    }
  }
  const Problem prob = make_problem(cases[1], kEpilogues[0], 970);
  EXPECT_GT(count(assembly(prob, "winograd tile=2 split=1 prefetch=1"), "prefetcht0"), 0);
  EXPECT_EQ(count(assembly(prob, "winograd tile=2 split=1 prefetch=0"), "prefetch"), 0);
}

// A model's convolutions have cold weights when its constants take more than
// graph::kColdWeightBytes, each counted once.
TEST(WeightPrefetch, ColdWeightsAreThoseOfModelsOverTheCacheBudget) {
  const auto lowered = [](int64_t ci, int64_t co) {
    graph::GraphBuilder b;
    const graph::ValueId x = b.input("x", {1, 2, 2, ci}, Layout::nhwc);
    const graph::ValueId w = b.constant(
        "w", {1, 1, ci, co}, graph::random_uniform(ci * co, -0.01f, 0.01f, 1), Layout::hwio);
    const graph::ValueId bias = b.constant("b", {co}, graph::random_uniform(co, -1, 1, 2));
    b.output(b.op("conv", graph::Conv2d{1, 1, 0, 0, 0, 0, 1, 1, {}}, {x, w, bias}));
    ModelOptions lower;
    lower.lower_only = true;
    return std::get<graph::ConvKernelSpec>(Model(b.finish(), lower).kernels().at(0));
  };
  // 4096 x 4096 floats: exactly 64 MiB, and the bias over it.
  EXPECT_TRUE(lowered(4096, 4096).cold_weights);
  EXPECT_FALSE(lowered(4096, 4095).cold_weights);  // 64 MiB - 16 KiB + the bias
}

}  // namespace
