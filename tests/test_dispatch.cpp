// The dispatch wrappers of kernels compiled for every CPU target (what `kiln compile` links),
// forced onto one target on this CPU. KILN_TEST_FORCE_TARGET is an index into
// runtime::cpu_targets(); a custom halide_can_use_target_features admits only that target's
// features. The wrapper decides once per process (Halide caches its choice), so each target is
// a test process of its own (tests/CMakeLists.txt). A small network of several kernel kinds must
// match the reference interpreter, and the wrappers must have admitted the forced target and no
// better one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "Halide.h"
#include "HalideRuntime.h"
#include "graph/builder.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kiln/runtime.h"
#include "runtime/kernels.h"
#include "test_generator.h"

namespace {

using namespace kiln;

// The feature bits the wrapper passes for a target: Halide::Target::Feature indices, with the
// NoRuntime feature codegen adds to every kernel target (codegen/kernel_library.cpp).
std::vector<uint64_t> feature_words(const std::string& target) {
  const Halide::Target t = Halide::Target(target).with_feature(Halide::Target::NoRuntime);
  std::vector<uint64_t> words((Halide::Target::FeatureEnd + 63) / 64, 0);
  for (int f = 0; f < Halide::Target::FeatureEnd; ++f)
    if (t.has_feature(static_cast<Halide::Target::Feature>(f))) words[f / 64] |= uint64_t{1} << (f % 64);
  return words;
}

std::mutex g_mutex;
std::vector<uint64_t> g_allowed;                // the forced target's features
std::vector<std::vector<uint64_t>> g_asked;      // every query the wrappers made
std::vector<std::vector<uint64_t>> g_accepted;   // the queries answered yes

int forced_can_use(int count, const uint64_t* features) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<uint64_t> asked(features, features + count);
  bool subset = true;
  for (int i = 0; i < count; ++i)
    subset = subset && (features[i] & ~(i < static_cast<int>(g_allowed.size()) ? g_allowed[i] : 0)) == 0;
  const bool ok = subset && halide_default_can_use_target_features(count, features) != 0;
  g_asked.push_back(asked);
  if (ok) g_accepted.push_back(asked);
  return ok ? 1 : 0;
}

// Layout transform, a dense conv with ReLU, a depthwise conv, max pooling, global pooling,
// Gemm and Softmax: the kernels of a small classifier.
graph::Graph small_classifier() {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {2, 3, 19, 17});
  graph::Conv2d pad1;
  pad1.pad_top = pad1.pad_left = pad1.pad_bottom = pad1.pad_right = 1;
  const graph::ValueId c1 = b.relu(
      "c1_relu",
      b.conv2d("c1", x,
               b.constant("c1_w", {24, 3, 3, 3}, graph::random_uniform(24 * 27, -0.4f, 0.4f, 1),
                          graph::Layout::oihw),
               b.constant("c1_b", {24}, graph::random_uniform(24, -0.2f, 0.2f, 2)), pad1));
  graph::Conv2d dw = pad1;
  dw.groups = 24;
  const graph::ValueId c2 =
      b.conv2d("dw", c1,
               b.constant("dw_w", {24, 1, 3, 3}, graph::random_uniform(24 * 9, -0.4f, 0.4f, 3),
                          graph::Layout::oihw),
               b.constant("dw_b", {24}, graph::random_uniform(24, -0.2f, 0.2f, 4)), dw);
  graph::Pool2d pool;
  pool.kind = graph::PoolKind::max;
  pool.kernel_h = pool.kernel_w = 3;
  pool.stride_h = pool.stride_w = 2;
  const graph::ValueId p = b.op("pool", pool, {c2});
  const graph::ValueId g = b.op("gap", graph::GlobalPool{graph::PoolKind::avg}, {p});
  const graph::ValueId f = b.op("flat", graph::Reshape{{2, 24}}, {g});
  graph::Gemm fc;
  fc.trans_b = true;
  const graph::ValueId logits =
      b.op("fc", fc,
           {f, b.constant("fc_w", {10, 24}, graph::random_uniform(240, -0.5f, 0.5f, 5), graph::Layout::any),
            b.constant("fc_b", {10}, graph::random_uniform(10, -0.1f, 0.1f, 6), graph::Layout::any)});
  b.output(b.op("prob", graph::Softmax{1}, {logits}));
  return b.finish();
}

TEST(Dispatch, ForcedTargetRunsAndIsTheOnePicked) {
  const char* forced = std::getenv("KILN_TEST_FORCE_TARGET");
  ASSERT_NE(forced, nullptr) << "run through ctest, which sets KILN_TEST_FORCE_TARGET";
  const int t = std::atoi(forced);
  const std::vector<std::string>& targets = runtime::cpu_targets();
  ASSERT_GE(t, 0);
  ASSERT_LT(t, static_cast<int>(targets.size()));
  if (!runtime::cpu_target_supported(t)) GTEST_SKIP() << "this CPU lacks features of " << targets[t];
  g_allowed = feature_words(targets[t]);
  halide_set_custom_can_use_target_features(forced_can_use);

  const graph::Graph input = small_classifier();
  const graph::Graph optimized = graph::run_passes(input);
  ModelOptions o;
  o.generate_kernels = testing_util::test_generator(/*dispatch=*/true);
  // The 24-channel convolution's half-width kernel (an AVX-512 one, called where 512-bit
  // multiply-adds split) is Kiln's choice, not the wrapper's: off here, as AMX is below.
  o.half_width = HalfWidth::never;
  Model m(optimized, o);
  testing_util::expect_model_matches_reference(m, input, 9, 1e-4, 1e-5);

  // A bf16 convolution: its AVX512_BF16 variant (a target above the forced one) is never
  // admitted, so on the forced AVX-512 target the wrapper runs the products converted to float32
  // multiply-adds, with the same results (never the instruction the CPU was said to lack). The
  // reference emulates the bf16 rounding. The AMX kernel is Kiln's choice, not the wrapper's:
  // off here.
  {
    graph::GraphBuilder b;
    const graph::ValueId bx = b.input("bx", {2, 16, 11, 9});
    graph::Conv2d pad1;
    pad1.pad_top = pad1.pad_left = pad1.pad_bottom = pad1.pad_right = 1;
    b.output(b.relu("bconv_relu",
                    b.conv2d("bconv", bx,
                             b.constant("bconv_w", {32, 16, 3, 3},
                                        graph::random_uniform(32 * 16 * 9, -0.3f, 0.3f, 7), graph::Layout::oihw),
                             b.constant("bconv_b", {32}, graph::random_uniform(32, -0.2f, 0.2f, 8)), pad1)));
    graph::PipelineOptions bf16;
    bf16.precision = graph::Precision::bf16;
    const graph::Graph g = graph::run_passes(b.finish(), bf16);
    ModelOptions bo = o;
    bo.amx = false;
    SCOPED_TRACE("bf16");
    Model bm(g, bo);
    testing_util::expect_model_matches_reference(bm, g, 10, 1e-4, 1e-5);
  }

  const std::lock_guard<std::mutex> lock(g_mutex);
  ASSERT_FALSE(g_asked.empty()) << "no kernel asked which target to use: no dispatch wrapper ran";
  const bool base = t + 1 == static_cast<int>(targets.size());  // the wrappers' fallback
  if (base) {
    EXPECT_TRUE(g_accepted.empty()) << g_accepted.size() << " queries were admitted";
  } else {
    // A wrapper asks about every target it holds (the lower ones' features are a subset of the
    // forced one's, and admitted too, as a real CPU would) and takes the first admitted, best
    // first: the forced target's own query must be among the admitted ones.
    bool forced_admitted = false;
    for (const std::vector<uint64_t>& a : g_accepted) forced_admitted |= a == g_allowed;
    EXPECT_TRUE(forced_admitted) << targets[t] << " was never admitted";
  }
}

}  // namespace
