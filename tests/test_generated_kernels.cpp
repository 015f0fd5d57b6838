// Kernels generated per model by codegen/ on the CPU: each kind (the cases are in
// generated_cases.h) compiled for its spec's shapes on every CPU target, loaded the way `kiln run`
// loads them, run by kiln::Model and compared with the reference interpreter; accuracy, NaN
// semantics, and the kernel table's checks. The GPU schedules: test_generated_gpu.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "codegen/kernel_library.h"
#include "codegen/kernel_pipeline.h"
#include "generated_cases.h"
#include "generators/ops/elementwise.h"
#include "graph/builder.h"
#include "graph/passes/passes.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kiln/runtime.h"
#include "runtime/kernels.h"
#include "test_generator.h"

namespace kiln {
namespace {

using namespace testing_util;

std::string test_cache_dir() { return KILN_TEST_CACHE_DIR; }

class GeneratedChain : public testing::TestWithParam<ChainCase> {};

// Runs `g` (one kernel, generated) on every CPU target this machine runs, on two sets of random
// inputs in [lo, hi): the kernel must write every element (the second run's inputs differ from
// the first's, so stale values show) and match the reference run of `reference` (the unfused
// graph; `g` itself by default).
void expect_generated_matches_reference(const graph::Graph& g, float lo, float hi, double rtol,
                                        double atol, const graph::Graph* reference = nullptr) {
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!testing_util::runs_target(t)) continue;
    SCOPED_TRACE(runtime::cpu_targets()[t]);
    ModelOptions o;
    o.cpu_target = t;
    o.generate_kernels =
        codegen::kernel_generator({{runtime::cpu_targets()[t]}, test_cache_dir(), nullptr});
    Model m(g, o);
    ASSERT_EQ(m.kernels().size(), 1u);
    ASSERT_TRUE(graph::is_generated(m.kernels()[0]));
    for (uint64_t seed : {1u, 2u}) {
      std::vector<graph::Tensor> ins;
      for (graph::ValueId v : g.inputs) {
        const graph::Value& val = g.value(v);
        ins.push_back(
            {val.shape, val.layout,
             graph::random_uniform(graph::num_elements(val.shape), lo, hi, seed * 10 + v.index)});
      }
      ASSERT_TRUE(m.run(ins)) << "seed " << seed;
      const graph::Tensor want = graph::run_reference(reference ? *reference : g, ins)[0];
      const TensorView out = m.output(0);
      ASSERT_EQ(out.shape, want.shape);
      const std::vector<float> got(out.data, out.data + graph::num_elements(out.shape));
      EXPECT_LE(graph::worst_error_ratio(got, want.data, rtol, atol), 1.0) << "seed " << seed;
    }
  }
}

TEST_P(GeneratedChain, MatchesReferenceOnEveryCpuTarget) {
  expect_generated_matches_reference(chain_graph(GetParam(), 11), -6.0f, 6.0f, 1e-5,
                                     chain_case_atol(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Chains, GeneratedChain, testing::ValuesIn(chain_cases()),
                         [](const testing::TestParamInfo<ChainCase>& i) { return i.param.name; });

class GeneratedBinary : public testing::TestWithParam<BinaryCase> {};

// Divisors away from zero; the other operands of both signs through the constants.
TEST_P(GeneratedBinary, MatchesReferenceOnEveryCpuTarget) {
  expect_generated_matches_reference(binary_graph(GetParam()), 0.5f, 3.0f, 1e-6, 1e-7);
}

INSTANTIATE_TEST_SUITE_P(Binaries, GeneratedBinary, testing::ValuesIn(binary_cases()),
                         [](const testing::TestParamInfo<BinaryCase>& i) { return i.param.name; });

class GeneratedConv : public testing::TestWithParam<ConvCase> {};

TEST_P(GeneratedConv, FusedAndMatchesReferenceOnEveryCpuTarget) {
  const ConvCase& c = GetParam();
  const graph::Graph g = conv_graph(c);
  const graph::Graph fused = graph::fuse_elementwise_chains(graph::fuse_epilogues(g));
  ASSERT_EQ(fused.num_nodes(), 1u) << graph::dump(fused);
  const bool has_post = c.tail != Tail::none && c.tail != Tail::relu;
  ASSERT_EQ(std::get<graph::Conv2d>(fused.node(graph::NodeId{0}).op).post.empty(), !has_post)
      << graph::dump(fused);
  // The PRelu pattern and Mish are one step each (graph::fuse_elementwise_chains).
  const auto& post = std::get<graph::Conv2d>(fused.node(graph::NodeId{0}).op).post;
  using K = graph::ChainStepKind;
  if (c.tail == Tail::prelu_mish)
    EXPECT_TRUE(post.size() == 2 && post[0].kind == K::prelu && post[1].kind == K::mish)
        << graph::dump(fused);
  if (c.tail == Tail::prelu_one)
    EXPECT_TRUE(post.size() == 1 && post[0].kind == K::leaky_relu && post[0].a == 0.3f)
        << graph::dump(fused);
  if (c.tail == Tail::relu6_swish)
    EXPECT_TRUE(post.size() == 1 && post[0].kind == K::hard_swish) << graph::dump(fused);
  expect_generated_matches_reference(fused, -2.0f, 2.0f, 1e-4, 1e-5, &g);
}

INSTANTIATE_TEST_SUITE_P(Convs, GeneratedConv, testing::ValuesIn(conv_cases()),
                         [](const testing::TestParamInfo<ConvCase>& i) { return i.param.name; });

class GeneratedExpand : public testing::TestWithParam<ExpandCase> {};

// The passes fuse the block into one kernel (Conv2d::expand), which matches the unfused graph's
// reference on every CPU target.
TEST_P(GeneratedExpand, FusedAndMatchesReferenceOnEveryCpuTarget) {
  const graph::Graph g = expand_graph(GetParam());
  const graph::Graph fused = expand_fused_graph(g);
  ASSERT_EQ(fused.num_nodes(), 1u) << graph::dump(fused);
  const auto& c = std::get<graph::Conv2d>(fused.node(graph::NodeId{0}).op);
  ASSERT_TRUE(c.expand.has_value()) << graph::dump(fused);
  EXPECT_EQ(c.expand->is_relu6(), GetParam().activation == ExpandActivation::relu6);
  // SiLU and HardSwish are the expansion's post steps, computed in the kernel.
  EXPECT_EQ(c.expand_post.size(), GetParam().activation == ExpandActivation::silu ||
                                          GetParam().activation == ExpandActivation::hard_swish
                                      ? 1u : 0u)
      << graph::dump(fused);
  expect_generated_matches_reference(fused, -2.0f, 2.0f, 1e-4, 1e-5, &g);
}

INSTANTIATE_TEST_SUITE_P(Expansions, GeneratedExpand, testing::ValuesIn(expand_cases()),
                         [](const testing::TestParamInfo<ExpandCase>& i) { return i.param.name; });

class GeneratedPool : public testing::TestWithParam<PoolCase> {};

TEST_P(GeneratedPool, MatchesReferenceOnEveryCpuTarget) {
  expect_generated_matches_reference(pool_graph(GetParam()), -3.0f, 3.0f, 1e-5, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Pools, GeneratedPool, testing::ValuesIn(pool_cases()),
                         [](const testing::TestParamInfo<PoolCase>& i) { return i.param.name; });

class GeneratedMatMul : public testing::TestWithParam<MatMulCase> {};

TEST_P(GeneratedMatMul, MatchesReferenceOnEveryCpuTarget) {
  expect_generated_matches_reference(matmul_graph(GetParam()), -1.0f, 1.0f, 1e-4, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(MatMuls, GeneratedMatMul, testing::ValuesIn(matmul_cases()),
                         [](const testing::TestParamInfo<MatMulCase>& i) { return i.param.name; });

class GeneratedOp : public testing::TestWithParam<OpCase> {};

TEST_P(GeneratedOp, MatchesReferenceOnEveryCpuTarget) {
  const OpCase& c = GetParam();
  expect_generated_matches_reference(op_graph(c), c.lo, c.hi, c.rtol, c.atol);
}

INSTANTIATE_TEST_SUITE_P(Ops, GeneratedOp, testing::ValuesIn(op_cases()),
                         [](const testing::TestParamInfo<OpCase>& i) { return i.param.name; });

// One chain step over x on CPU target t, generated as its own kernel: its outputs.
std::vector<float> run_step(const graph::ChainStep& step, const std::vector<float>& x, int t) {
  const int64_t n = static_cast<int64_t>(x.size());
  graph::GraphBuilder b;
  b.output(b.op("f", graph::ElementwiseChain{{step}}, {b.input("x", {1, n}, Layout::any)}));
  ModelOptions o;
  o.cpu_target = t;
  o.generate_kernels = codegen::kernel_generator({{runtime::cpu_targets()[t]}, test_cache_dir(), nullptr});
  Model m(graph::run_passes(b.finish()), o);
  EXPECT_TRUE(m.run({graph::Tensor{{1, n}, Layout::any, x}}));
  return std::vector<float>(m.output(0).data, m.output(0).data + n);
}

// Sigmoid and SiLU (Kiln's own exponential, generators/ops/elementwise.cpp) on every CPU target
// against double precision over [-100, 100], past where the exponential is clamped (|v| > 87),
// and the special values: the error stays under 1e-6 relative (5e-6 on targets without FMA,
// where k ln2 is rounded; Halide's exp measured 4.1e-6 there) plus 2e-36 absolute (what the
// clamp leaves below v = -87, where both are under 1.7e-38 * |v|, and SiLU's -0 below -88.37,
// where it is under 3.7e-37); sigmoid(+-inf) is 1 and about 0, SiLU(inf) is inf and SiLU(-inf)
// NaN (-inf * 0, as in ONNX); NaN stays NaN. Mish (v tanh(softplus v), from the same
// exponential) is held to the same bounds against v tanh(log1p(e^v)) in double.
TEST(GeneratedKernels, SigmoidAndSiluAccuracyAcrossTheirRange) {
  const int64_t n = 200001;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = -100.0f + 200.0f * static_cast<float>(i) / (n - 1);
  x[0] = -INFINITY, x[1] = INFINITY, x[2] = NAN, x[3] = 1e-30f, x[4] = -87.0f, x[5] = 87.5f;
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t)
    for (const auto kind : {ChainStepKind::sigmoid, ChainStepKind::silu, ChainStepKind::mish}) {
      if (!testing_util::runs_target(t)) continue;
      SCOPED_TRACE(std::string(graph::to_string(kind)) + " on " + runtime::cpu_targets()[t]);
      const std::vector<float> y = run_step({kind, 0, 0}, x, t);
      const double rtol = runtime::cpu_targets()[t].find("fma") != std::string::npos ? 1e-6 : 5e-6;
      double worst = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double v = x[i];
        const double sig = 1.0 / (1.0 + std::exp(-v));
        if (std::isnan(v)) {
          EXPECT_TRUE(std::isnan(y[i])) << "NaN in, " << y[i] << " out";
        } else if (std::isinf(v)) {
          if (kind == ChainStepKind::sigmoid) {
            EXPECT_NEAR(y[i], v > 0 ? 1.0 : 0.0, 2e-38) << "x = " << v;
          } else if (v > 0) {
            EXPECT_EQ(y[i], INFINITY);
          } else {
            EXPECT_TRUE(std::isnan(y[i])) << graph::to_string(kind) << "(-inf) = " << y[i];
          }
        } else {
          ASSERT_TRUE(std::isfinite(y[i])) << "x = " << v;
          const double want = kind == ChainStepKind::sigmoid ? sig
                              : kind == ChainStepKind::silu
                                  ? v * sig
                                  : v * std::tanh(std::log1p(std::exp(v)));
          const double err = std::abs(y[i] - want);
          worst = std::max(worst, err / (rtol * std::abs(want) + 2e-36));
        }
      }
      EXPECT_LE(worst, 1.0);
    }
}

// Sign, Shrink, IsNaN and IsInf (ONNX's definitions, in the reference interpreter) on every CPU
// target, on random values with the special ones among them: NaN of either sign, both
// infinities, both zeros, the Shrink thresholds themselves and their neighbours. Each output
// equals the reference's bit for bit but for NaN, which must be where the reference has it (sign
// keeps a NaN; shrink makes it 0; the tests give 0 or 1).
TEST(GeneratedKernels, SignShrinkIsNanIsInfOnSpecialValues) {
  const float lambd = 0.5f;
  std::vector<float> x = graph::random_uniform(301, -2.0f, 2.0f, 77);
  const float special[] = {NAN,
                           -NAN,
                           INFINITY,
                           -INFINITY,
                           0.0f,
                           -0.0f,
                           lambd,
                           -lambd,
                           std::nextafter(lambd, 1.0f),
                           std::nextafter(-lambd, -1.0f),
                           1e-30f,
                           -1e-30f,
                           3.0e38f,
                           -3.0e38f};
  for (size_t i = 0; i < std::size(special); ++i) x[7 + 13 * i] = special[i];
  const std::vector<graph::ChainStep> steps = {
      {ChainStepKind::sign, 0, 0},      {ChainStepKind::shrink, lambd, 0.25f},
      {ChainStepKind::shrink, 1.5f, 0}, {ChainStepKind::is_nan, 0, 0},
      {ChainStepKind::is_inf, 1, 1},    {ChainStepKind::is_inf, 1, 0},
      {ChainStepKind::is_inf, 0, 1},    {ChainStepKind::is_inf, 0, 0}};
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t)
    for (const graph::ChainStep& step : steps) {
      if (!testing_util::runs_target(t)) continue;
      SCOPED_TRACE(std::string(graph::to_string(step.kind)) + " a=" + std::to_string(step.a) +
                   " b=" + std::to_string(step.b) + " on " + runtime::cpu_targets()[t]);
      graph::GraphBuilder b;
      b.output(b.op("f", graph::ElementwiseChain{{step}},
                    {b.input("x", {1, static_cast<int64_t>(x.size())}, Layout::any)}));
      const std::vector<graph::Tensor> want = graph::run_reference(
          b.finish(), {graph::Tensor{{1, static_cast<int64_t>(x.size())}, Layout::any, x}});
      const std::vector<float> y = run_step(step, x, t);
      size_t ones = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const float w = want[0].data[i];
        ones += w == 1.0f;
        if (std::isnan(w)) {
          EXPECT_TRUE(std::isnan(y[i])) << "x = " << x[i] << ": " << y[i];
        } else {
          EXPECT_EQ(y[i], w) << "x = " << x[i];
          EXPECT_EQ(std::signbit(y[i]), std::signbit(w)) << "x = " << x[i] << ": " << y[i];
        }
      }
      if (step.kind == ChainStepKind::is_nan) EXPECT_EQ(ones, 2u);  // the two NaNs
      if (step.kind == ChainStepKind::is_inf) EXPECT_EQ(ones, (step.a != 0) + (step.b != 0));
    }
}

// A chain's expression grows linearly with its steps: each step's operand is bound once (a Let),
// however many times the step uses it. The printed expression (which writes a shared operand out
// at every use) of 8 alternating ReLU and Sigmoid steps was 6^3 times that of 2 before; Halide's
// lowering walked it the same way (12 steps: 8 GB, a minute). The long_chain case checks the
// values.
TEST(GeneratedKernels, LongChainsCompileInLinearSize) {
  const auto printed_size = [](int steps) {
    std::vector<graph::ChainStep> chain;
    for (int i = 0; i < steps; ++i)
      chain.push_back(i % 2 ? graph::ChainStep{ChainStepKind::sigmoid, 0, 0}
                            : graph::ChainStep{ChainStepKind::clamp, 0.0f, INFINITY});
    Halide::ImageParam x(Halide::Float(32), 1, "x");
    Halide::Var c("c");
    std::ostringstream os;
    os << generators::ops::apply_chain(chain, x(c), {}, c);
    return static_cast<double>(os.str().size());
  };
  const double two = printed_size(2), eight = printed_size(8);
  EXPECT_LT(eight / two, 8.0) << "2 steps: " << two << " characters, 8 steps: " << eight;
}

// Erf and GELU (Kiln's own rational erf, generators/ops/elementwise.cpp) on every CPU target
// against double precision over [-8, 8] on a fine grid, plus the special values: the absolute
// error of erf stays under 6e-7 and GELU's under 2e-6, erf(+-inf) = +-1, GELU(inf) = inf, and
// NaN stays NaN. GELU's tanh form (v sigmoid(2z), SiLU's exponential) is held to SiLU's
// relative bound (1e-6 with FMA, 5e-6 without) plus 1.5e-7 |2z| (2z is computed in float, and
// e^x makes an error in x a relative error |x| times as large: up to 1.1e-5 where 2z reaches
// SiLU's clamp at -89) plus 2e-36 absolute; its reference is
// 0.5 v (1 + tanh z) as v / (1 + e^-2z) in double, since 1 + tanh z cancels to nothing in
// double below z = -19.
TEST(GeneratedKernels, ErfAndGeluAccuracyAcrossTheirRange) {
  const int64_t n = 160001;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = -8.0f + 16.0f * static_cast<float>(i) / (n - 1);
  x[0] = -INFINITY, x[1] = INFINITY, x[2] = NAN, x[3] = 1e-30f, x[4] = -3.9f, x[5] = 3.9000001f;
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t)
    for (const auto kind : {ChainStepKind::erf, ChainStepKind::gelu, ChainStepKind::gelu_tanh}) {
      if (!testing_util::runs_target(t)) continue;
      SCOPED_TRACE(std::string(graph::to_string(kind)) + " on " + runtime::cpu_targets()[t]);
      const std::vector<float> y = run_step({kind, 0, 0}, x, t);
      const double tanh_rtol =
          runtime::cpu_targets()[t].find("fma") != std::string::npos ? 1e-6 : 5e-6;
      double worst = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double v = x[i];
        const double z = std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v);
        const double want = kind == ChainStepKind::erf ? std::erf(v)
                            : kind == ChainStepKind::gelu
                                ? 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))
                                : v / (1.0 + std::exp(-2.0 * z));
        if (std::isnan(v)) {
          EXPECT_TRUE(std::isnan(y[i])) << "NaN in, " << y[i] << " out";
        } else if (std::isinf(v)) {
          if (kind == ChainStepKind::erf)
            EXPECT_NEAR(y[i], v > 0 ? 1.0 : -1.0, 6e-8) << "x = " << v;
          if (kind != ChainStepKind::erf) {  // -inf: -inf * 0, NaN as in ONNX
            if (v > 0)
              EXPECT_EQ(y[i], INFINITY);
            else
              EXPECT_TRUE(std::isnan(y[i])) << graph::to_string(kind) << "(-inf) = " << y[i];
          }
        } else {
          const double err = std::abs(y[i] - want);
          const double bound =
              kind == ChainStepKind::erf ? 6e-7
              : kind == ChainStepKind::gelu
                  ? 2e-6
                  : (tanh_rtol + 1.5e-7 * std::abs(2 * z)) * std::abs(want) + 2e-36;
          worst = std::max(worst, err / bound);
        }
      }
      EXPECT_LE(worst, 1.0);
    }
}

// Sin, Cos and Tan (Kiln's own argument reduction and polynomials, generators/ops/elementwise.cpp)
// on every CPU target against double precision: a fine grid over [-10, 10], points near the
// multiples of pi/4 up to |v| = 1e5, and the special values (NaN and +-inf give NaN, +-0 keeps
// its sign in sin and tan). The error of sin and cos is absolute, that of tan relative to the
// slope 1 + tan^2 (an error e in the argument moves tan by e (1 + tan^2)); each bound is
// 1.5e-7 plus the argument reduction's 2.4e-11 |v| (the rounding of k P2).
TEST(GeneratedKernels, SinCosTanAccuracyAcrossTheirRange) {
  std::vector<float> x;
  for (int i = 0; i <= 200000; ++i) x.push_back(-10.0f + 20.0f * static_cast<float>(i) / 200000);
  for (double m = 1; m < 1e5; m *= 1.07)
    for (double q = -2; q <= 2; ++q)
      for (double d : {-1e-3, 0.0, 1e-3, 0.3})
        x.push_back(static_cast<float>((std::round(m / (M_PI / 4)) + q) * (M_PI / 4) + d)),
            x.push_back(-x.back());
  x.insert(x.end(), {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-30f, -1e-30f});
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t)
    for (const auto kind : {ChainStepKind::sin, ChainStepKind::cos, ChainStepKind::tan}) {
      if (!testing_util::runs_target(t)) continue;
      SCOPED_TRACE(std::string(graph::to_string(kind)) + " on " + runtime::cpu_targets()[t]);
      const std::vector<float> y = run_step({kind, 0, 0}, x, t);
      double worst = 0, worst_at = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double v = x[i];
        if (!std::isfinite(v)) {
          EXPECT_TRUE(std::isnan(y[i])) << graph::to_string(kind) << "(" << v << ") = " << y[i];
          continue;
        }
        if (v == 0.0 && kind != ChainStepKind::cos) {
          EXPECT_EQ(std::signbit(y[i]), std::signbit(x[i])) << "the sign of zero";
        }
        const double want = kind == ChainStepKind::sin   ? std::sin(v)
                            : kind == ChainStepKind::cos ? std::cos(v)
                                                         : std::tan(v);
        const double slope = kind == ChainStepKind::tan ? 1.0 + want * want : 1.0;
        const double bound = (1.5e-7 + 2.4e-11 * std::abs(v)) * slope;
        const double ratio = std::abs(y[i] - want) / bound;
        if (ratio > worst) worst = ratio, worst_at = v;
      }
      EXPECT_LE(worst, 1.0) << "worst at " << worst_at;
      std::printf("%s on %s: worst error %.3f of the bound, at %.9g\n", graph::to_string(kind),
                  runtime::cpu_targets()[t].c_str(), worst, worst_at);
    }
}

// The inverse trigonometric functions and the hyperbolic ones and their inverses (Kiln's own,
// generators/ops/elementwise.cpp) on every CPU target against double precision: grids over each
// function's domain and past it, points near the edges of the domains and of the pieces the
// functions are computed in (|x| = 1/2, tan(pi/8), tan(3pi/8), 1, 4096), magnitudes from 1e-30
// to 3e38, and the special values. A value whose double result is not a float (an overflow)
// must be an infinity of the same sign, a NaN a NaN; a zero keeps its sign in the odd functions.
// The relative error stays under 1e-6 (measured: 4.5e-7 at most, sinh near 1), plus 1e-37
// absolute.
TEST(GeneratedKernels, InverseTrigAndHyperbolicAccuracyAcrossTheirDomains) {
  std::vector<float> x;
  for (int i = 0; i <= 40000; ++i) x.push_back(-2.0f + 4.0f * static_cast<float>(i) / 40000);
  for (int i = 0; i <= 20000; ++i) x.push_back(-100.0f + 200.0f * static_cast<float>(i) / 20000);
  for (double m = 1e-30; m < 3e38; m *= 1.05)
    x.push_back(static_cast<float>(m)), x.push_back(-x.back());
  for (float edge : {0.5f, 0.41421356f, 2.4142136f, 1.0f, 4096.0f, 89.4f, 88.7f, 3.4e38f})
    for (int k = -4; k <= 4; ++k) {
      const float v = edge + static_cast<float>(k) * edge * 6e-8f;
      x.push_back(v), x.push_back(-v);
    }
  x.insert(x.end(), {NAN, INFINITY, -INFINITY, 0.0f, -0.0f});
  using K = ChainStepKind;
  const std::vector<std::pair<K, double (*)(double)>> functions = {
      {K::asin, [](double v) { return std::asin(v); }},
      {K::acos, [](double v) { return std::acos(v); }},
      {K::atan, [](double v) { return std::atan(v); }},
      {K::sinh, [](double v) { return std::sinh(v); }},
      {K::cosh, [](double v) { return std::cosh(v); }},
      {K::asinh, [](double v) { return std::asinh(v); }},
      {K::acosh, [](double v) { return std::acosh(v); }},
      {K::atanh, [](double v) { return std::atanh(v); }}};
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t)
    for (const auto& [kind, f] : functions) {
      if (!testing_util::runs_target(t)) continue;
      SCOPED_TRACE(std::string(graph::to_string(kind)) + " on " + runtime::cpu_targets()[t]);
      const double rtol = 1e-6;
      const bool odd = kind != K::acos && kind != K::cosh && kind != K::acosh;
      const std::vector<float> y = run_step({kind, 0, 0}, x, t);
      double worst = 0, worst_at = 0;
      int wrong = 0;
      for (size_t i = 0; i < x.size() && wrong < 10; ++i) {
        const double want = f(x[i]);
        const std::string at =
            std::string(graph::to_string(kind)) + "(" + std::to_string(x[i]) + ")";
        if (std::isnan(want)) {
          if (!std::isnan(y[i])) ++wrong, ADD_FAILURE() << at << " = " << y[i] << ", not NaN";
          continue;
        }
        if (std::abs(want) > std::numeric_limits<float>::max()) {
          if (y[i] != static_cast<float>(want))
            ++wrong, ADD_FAILURE() << at << " = " << y[i] << ", not " << want;
          continue;
        }
        if (odd && x[i] == 0.0f && std::signbit(y[i]) != std::signbit(x[i]))
          ++wrong, ADD_FAILURE() << at << " = " << y[i] << ": the sign of zero";
        const double ratio = std::abs(y[i] - want) / (rtol * std::abs(want) + 1e-37);
        if (!(ratio <= worst)) worst = ratio, worst_at = x[i];
      }
      EXPECT_LE(worst, 1.0) << "worst at " << worst_at;
      std::printf("%s on %s: worst error %.3f of the bound, at %.9g\n", graph::to_string(kind),
                  runtime::cpu_targets()[t].c_str(), worst, worst_at);
    }
}

// A table compiled for other shapes is refused, and so is a model with nothing to generate its
// kernels.
TEST(GeneratedKernels, MismatchedOrMissingKernelsAreErrors) {
  const graph::Graph small = chain_graph({"a", {1, 2, 2, 8}, Layout::nhwc, kBnRelu}, 5);
  const graph::Graph big = chain_graph({"b", {1, 4, 4, 8}, Layout::nhwc, kBnRelu}, 5);
  EXPECT_THROW(Model{small}, graph::Error);
  ModelOptions o;
  const KernelGenerator real = codegen::kernel_generator({{}, test_cache_dir(), nullptr});
  o.generate_kernels = [&](const std::vector<graph::KernelSpec>&, const KernelRequest& r) {
    ModelOptions lower;
    lower.lower_only = true;
    return real(Model(big, lower).kernels(), r);
  };
  try {
    Model m(small, o);
    FAIL() << "a kernel compiled for another shape was accepted";
  } catch (const graph::Error& e) {
    EXPECT_NE(std::string(e.what()).find("compiled for another model or shape"), std::string::npos)
        << e.what();
  }
}

// The kernel table `kiln compile` links names every kernel's entry point and its signature;
// specs with equal signatures share one compiled kernel.
TEST(GeneratedKernels, TableSourceNamesEveryKernelOnce) {
  ModelOptions lower;
  lower.lower_only = true;
  const graph::KernelSpec a =
      Model(chain_graph({"t", {1, 2, 2, 8}, Layout::nhwc, kBnRelu}, 5), lower).kernels()[0];
  const graph::KernelSpec b =
      Model(chain_graph({"u", {1, 4, 4, 8}, Layout::nhwc, kBnRelu}, 5), lower).kernels()[0];
  const std::vector<graph::KernelSpec> specs = {a, b, a};
  const codegen::DistinctKernels d = codegen::distinct_kernels(specs);
  ASSERT_EQ(d.kernels.size(), 2u);
  EXPECT_EQ(d.kernel_of, (std::vector<size_t>{0, 1, 0}));
  const std::string src = codegen::kernel_table_source(specs, "net", {});
  EXPECT_NE(src.find("int net_k0_argv(void**);"), std::string::npos) << src;
  EXPECT_NE(src.find("int net_k1_argv(void**);"), std::string::npos) << src;
  EXPECT_EQ(src.find("net_k2_argv"), std::string::npos) << src;
  EXPECT_NE(src.find("net_kernel_table(std::size_t* count)"), std::string::npos) << src;
  EXPECT_NE(src.find("*count = 3;"), std::string::npos) << src;
}

}  // namespace
}  // namespace kiln
