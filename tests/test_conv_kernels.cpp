// The generated convolution kernels against the reference interpreter: random inputs, a
// NaN-poisoned output, every shape below x every CPU schedule x every CPU target this CPU can
// run. Each kernel is generated for its spec (codegen::kernel_generator) and called through its
// entry point with buffers bound here, the way the runtime binds them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <sstream>

#include "conv_kernel_harness.h"
#include "schedules/conv_params.h"
#include "test_generator.h"

namespace {

using namespace kiln;
using namespace kiln::conv_kernel_test;

const ConvCase kCases[] = {
    // The reference example's exact layer.
    {"example_64x56x56_3x3_s2", 1, 64, 56, 56, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    {"rgb_input_7x7_s2", 1, 3, 32, 30, 24, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1},
    {"co_40_not_multiple_of_16", 1, 16, 15, 17, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"spatial_7x7", 1, 64, 7, 7, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"pointwise_1x1_s1", 1, 32, 14, 14, 48, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
    {"pointwise_1x1_s2", 1, 24, 13, 13, 32, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1},
    {"pad0_3x3", 1, 8, 10, 12, 20, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1},
    {"dilation_2", 1, 16, 20, 20, 32, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
    {"batch_2", 2, 16, 12, 12, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"co_3_below_one_vector", 1, 5, 9, 9, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"asymmetric_3x2_mixed_stride", 1, 8, 9, 11, 16, 3, 2, 2, 1, 0, 1, 2, 0, 1, 2},
    {"wide_row_co_128", 1, 32, 9, 60, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"width_1", 1, 16, 6, 1, 32, 3, 1, 1, 1, 1, 0, 1, 0, 1, 1},
    // The CPU schedule reduces over input channels in chunks (32 for 3x3, 288 for 1x1): a
    // partial last chunk after full ones.
    {"ci_40_two_chunks_3x3", 1, 40, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"ci_300_two_chunks_1x1", 1, 300, 7, 7, 128, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
    // A dense RGB input whose rows are not whole vectors: the staged copy's edge vectors split
    // off (partitioned) on both sides, a partial vector in the middle of the row.
    {"rgb_input_3x3_s2_odd_width", 1, 3, 21, 37, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
};

const Problem& problem_for(size_t case_index, int epilogue) {
  static std::map<std::pair<size_t, int>, Problem> cache;
  auto key = std::make_pair(case_index, epilogue);
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(key, make_problem(kCases[case_index], kEpilogues[epilogue], 1000 + case_index)).first;
  return it->second;
}

// Each schedule family (schedules/conv_params.h) over the layer's default knobs; the wide one
// also reading its input in place.
enum class Sched { wide, deep, naive, wide_in_place };
constexpr Sched kSchedules[] = {Sched::wide, Sched::deep, Sched::naive, Sched::wide_in_place};
std::string name(Sched s) {
  switch (s) {
    case Sched::wide: return "wide";
    case Sched::deep: return "deep";
    case Sched::naive: return "naive";
    case Sched::wide_in_place: return "wide_in_place";
  }
  return "?";
}
std::string schedule_text(Sched s) {
  return s == Sched::wide_in_place ? "wide stage=in_place" : name(s);
}

// The shapes a schedule takes: stage=in_place only unpadded 1x1 windows.
bool applies(Sched s, const ConvCase& c) {
  return s != Sched::wide_in_place || (c.kh == 1 && c.kw == 1 && c.pad_top == 0 &&
                                       c.pad_left == 0 && c.pad_bottom == 0 && c.pad_right == 0);
}

struct KernelParam {
  size_t case_index;
  Sched schedule;
  int target;  // an index into runtime::cpu_targets()
};

std::string describe(const KernelParam& p);
void PrintTo(const KernelParam& p, std::ostream* os) { *os << describe(p); }

std::string param_name(const testing::TestParamInfo<KernelParam>& info) { return describe(info.param); }

std::string describe(const KernelParam& param) {
  const testing::TestParamInfo<KernelParam> info(param, 0);
  std::ostringstream s;
  s << kCases[info.param.case_index].name << "_" << name(info.param.schedule) << "_";
  std::string t = runtime::cpu_targets()[info.param.target];
  for (char& ch : t)
    if (ch == '-') ch = '_';
  s << t;
  return s.str();
}

std::vector<KernelParam> all_params() {
  std::vector<KernelParam> out;
  for (size_t i = 0; i < std::size(kCases); ++i)
    for (auto s : kSchedules)
      if (applies(s, kCases[i]))
        for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t)
          out.push_back({i, s, t});
  return out;
}

class ConvKernelTest : public testing::TestWithParam<KernelParam> {};

// Each shape with one epilogue (rotating through none / relu / relu6).
TEST_P(ConvKernelTest, MatchesReference) {
  const KernelParam& p = GetParam();
  if (!testing_util::runs_target(p.target))
    GTEST_SKIP() << testing_util::target_skip_reason(p.target);
  const int epilogue = static_cast<int>(p.case_index % 3);
  const Problem& prob = problem_for(p.case_index, epilogue);
  expect_close(run_kernel(prob, schedule_text(p.schedule), p.target), prob.expected);
}

INSTANTIATE_TEST_SUITE_P(AllShapes, ConvKernelTest, testing::ValuesIn(all_params()), param_name);

// Every epilogue on two shapes (one on the fast path, one on the scalar fallback), both tuned
// schedules, behind the dispatch wrapper of every CPU target (the best alone under ASan).
TEST(ConvKernelEpilogues, AllEpilogues) {
  for (size_t case_index : {size_t{2}, size_t{9}}) {
    for (int e = 0; e < 3; ++e) {
      const Problem& prob = problem_for(case_index, e);
      size_t clipped = 0;
      for (float v : prob.expected.data) clipped += (v == 0.0f || v == 6.0f);
      if (e > 0) EXPECT_GT(clipped, 0u) << "the epilogue is not exercised";
      for (auto s : {Sched::wide, Sched::deep}) {
        SCOPED_TRACE(std::string(kCases[case_index].name) + " epilogue " + std::to_string(e) +
                     " schedule " + name(s));
        expect_close(run_kernel(prob, schedule_text(s), testing_util::dispatch_or_best_target()), prob.expected);
      }
    }
  }
}

// The residual (ResNet's fused Add): every epilogue, fast path and scalar fallback, every
// schedule, behind the dispatch wrapper (the best target alone under ASan).
TEST(ConvKernelResidual, AllEpilogues) {
  for (size_t case_index : {size_t{0}, size_t{2}, size_t{3}, size_t{4}, size_t{9}}) {
    for (int e = 0; e < 3; ++e) {
      const Problem prob = make_problem(kCases[case_index], kEpilogues[e], 500 + case_index, true);
      for (auto s : kSchedules) {
        if (!applies(s, kCases[case_index])) continue;
        SCOPED_TRACE(std::string(kCases[case_index].name) + " epilogue " + std::to_string(e) +
                     " schedule " + name(s));
        expect_close(run_kernel(prob, schedule_text(s), testing_util::dispatch_or_best_target()), prob.expected);
      }
    }
  }
}

// Vectors of half the target's width (lanes=, on targets of 8 lanes or more) in the wide and
// deep families: channel counts of 40 (5 vectors of 8 on AVX-512, where 16-lane tiles cover 48),
// 48 and 64, 1x1 and 3x3 windows, stride 2, a batch of 2 and a residual; the default tile at
// the narrower width, and a 3-vector one.
TEST(ConvKernelSchedules, HalfWidthVectors) {
  for (size_t case_index : {size_t{0}, size_t{2}, size_t{4}, size_t{8}}) {
    const Problem prob =
        make_problem(kCases[case_index], kEpilogues[case_index % 3], 600 + case_index, true);
    for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
      const int lanes = Halide::Target(runtime::cpu_targets()[t]).natural_vector_size<float>() / 2;
      if (!testing_util::runs_target(t) || lanes < 4) continue;
      const std::string half = " lanes=" + std::to_string(lanes);
      for (const std::string& schedule : {"wide" + half, "deep" + half, "wide block=3x4" + half,
                                          "deep block=3x4 chunk=16" + half}) {
        SCOPED_TRACE(std::string(kCases[case_index].name) + " " + schedule + " on " +
                     runtime::cpu_targets()[t]);
        expect_close(run_kernel(prob, schedule, t), prob.expected);
      }
    }
  }
}

// The generator's half-width kernels (GeneratedKernel::half_fn), which CPUs that split 512-bit
// multiply-adds run by default, on every AVX-512 target this CPU runs, against the reference:
// 40 channels by 3x3 (Winograd by default), 24 by 1x1 with a residual (wide), 24 by 3x3 stride 2
// at batch 2, 8 by 3x3 (under one 16-lane vector). A kernel of whole vectors gets none, and
// neither does one asked for `never`.
TEST(ConvKernelSchedules, HalfWidthKernelsMatchReference) {
  const ConvCase cases[] = {
      {"half_3x3_40", 1, 32, 15, 17, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {"half_1x1_24_residual", 1, 96, 20, 20, 24, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
      {"half_3x3_s2_24_batch_2", 2, 16, 18, 18, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {"half_3x3_8_below_a_vector", 1, 16, 20, 20, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {"whole_vectors_32", 1, 16, 12, 12, 32, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1}};
  int ran = 0;
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!testing_util::runs_target(t) ||
        Halide::Target(runtime::cpu_targets()[t]).natural_vector_size<float>() != 16)
      continue;
    for (size_t i = 0; i < std::size(cases); ++i) {
      const ConvCase& c = cases[i];
      SCOPED_TRACE(std::string(c.name) + " on " + runtime::cpu_targets()[t]);
      const Problem prob = make_problem(c, kEpilogues[i % 3], 700 + i, i == 1);
      std::shared_ptr<const GeneratedKernels> keep;
      const GeneratedKernel& k = generate_kernel(conv_spec(prob, ""), t, &keep, HalfWidth::always);
      if (c.co % 16 == 0) {
        EXPECT_EQ(k.half_fn, nullptr);
        continue;
      }
      ASSERT_NE(k.half_fn, nullptr);
      ASSERT_NE(k.half_target, nullptr);
      EXPECT_EQ(std::string(k.half_target), runtime::cpu_targets()[t]);
      EXPECT_EQ(generate_kernel(conv_spec(prob, ""), t, &keep, HalfWidth::never).half_fn, nullptr);
      expect_close(run_kernel(prob, "", t, true), prob.expected);
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << "this CPU runs no AVX-512 target of this build";
}

// A Model calls a convolution's half-width kernel as ModelOptions::half_width says: always,
// never, or (the default) where the probe finds 512-bit multiply-adds split; its output matches
// the reference each way.
TEST(ConvKernelSchedules, ModelCallsHalfWidthKernelsAsItsOptionsSay) {
  int target = -1;
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()) && target < 0; ++t)
    if (Halide::Target(runtime::cpu_targets()[t]).natural_vector_size<float>() == 16) target = t;
  if (target < 0) GTEST_SKIP() << "this build has no AVX-512 target";
  if (!testing_util::runs_target(target)) GTEST_SKIP() << testing_util::target_skip_reason(target);
  const Problem prob = make_problem({"t", 1, 48, 14, 14, 24, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
                                    kEpilogues[1], 750, true);
  for (const HalfWidth h : {HalfWidth::always, HalfWidth::never, HalfWidth::where_faster}) {
    ModelOptions o;
    o.cpu_target = target;
    o.half_width = h;
    o.generate_kernels = codegen::kernel_generator({{}, KILN_TEST_CACHE_DIR, nullptr});
    Model m(prob.g, o);
    ASSERT_EQ(m.kernels().size(), 1u);
    const bool want =
        h == HalfWidth::always || (h == HalfWidth::where_faster && runtime::splits_512bit_fma());
    EXPECT_EQ(m.half_width(0), want) << static_cast<int>(h);
    ASSERT_TRUE(m.run({prob.input.data.data()}).is_ok());
    const TensorView out = m.output(0);
    expect_close(std::vector<float>(out.data, out.data + graph::num_elements(out.shape)),
                 prob.expected);
  }
}

// The kernel table `kiln compile` links declares a half-width kernel's entry point and names
// it, with its target, in the kernel's entry, for a library holding an AVX-512 target; without
// one, neither.
TEST(ConvKernelSchedules, TableSourceNamesHalfWidthKernels) {
  const Problem prob = make_problem({"t", 1, 32, 15, 17, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, {}, 1);
  const graph::KernelSpec spec = conv_spec(prob, "");
  const std::string avx512 = "x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake";
  const std::string src = codegen::kernel_table_source({spec}, "net", {avx512, "x86-64-linux"});
  EXPECT_NE(src.find("int net_k0_half_argv(void**);"), std::string::npos) << src;
  EXPECT_NE(src.find("net_k0_half_argv, \"" + avx512 + "\"}"), std::string::npos) << src;
  const std::string plain = codegen::kernel_table_source(
      {spec}, "net", {"x86-64-linux-sse41-avx-f16c-fma-avx2", "x86-64-linux"});
  EXPECT_EQ(plain.find("half"), std::string::npos) << plain;
  EXPECT_NE(plain.find("nullptr, nullptr}"), std::string::npos) << plain;
}

// The probe behind HalfWidth::where_faster: 0 without AVX-512, else the time of a 512-bit
// multiply-add over a 256-bit one's (about 1 or 2 on the CPUs measured), the same every call.
TEST(ConvKernelTargets, WideMultiplyAddProbe) {
  const double ratio = runtime::fma_512_to_256_time();
  EXPECT_EQ(runtime::fma_512_to_256_time(), ratio);
  std::printf("512-bit / 256-bit multiply-add time: %.3f (%s)\n", ratio,
              runtime::splits_512bit_fma() ? "split: half-width kernels by default" : "not split");
  if (!runtime::target_supported("x86-64-linux-avx512_skylake")) {
    EXPECT_EQ(ratio, 0.0);
    EXPECT_FALSE(runtime::splits_512bit_fma());
    return;
  }
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 4.0);
  EXPECT_EQ(runtime::splits_512bit_fma(), ratio > 1.5);
}

// A schedule that does not apply, or an unknown one, is an error at generation, never a kernel
// that reads outside the input.
TEST(ConvKernelSchedules, ScheduleThatDoesNotApplyIsAnError) {
  const size_t three_by_three = 3;  // spatial_7x7: 3x3, padding 1
  ASSERT_EQ(kCases[three_by_three].kh, 3);
  const Problem& prob = problem_for(three_by_three, 0);
  std::shared_ptr<const GeneratedKernels> keep;
  try {
    generate(conv_spec(prob, "wide stage=in_place"), runtime::best_cpu_target(), &keep);
    ADD_FAILURE() << "a 3x3 window was generated reading its input in place";
  } catch (const graph::Error& e) {
    EXPECT_NE(std::string(e.what()).find("1x1 windows"), std::string::npos) << e.what();
  }
  try {
    generate(conv_spec(prob, "fastest"), runtime::best_cpu_target(), &keep);
    ADD_FAILURE() << "an unknown schedule was accepted";
  } catch (const graph::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fastest'"), std::string::npos) << e.what();
  }
}

TEST(ConvKernelTargets, BaselineAlwaysRunsAndBestIsFirstSupported) {
  const int n = static_cast<int>(runtime::cpu_targets().size());
  ASSERT_GE(n, 3);
  EXPECT_TRUE(runtime::cpu_target_supported(n - 1)) << "the last target must be the baseline";
  const int best = runtime::best_cpu_target();
  ASSERT_GE(best, 0);
  for (int i = 0; i < best; ++i) EXPECT_FALSE(runtime::cpu_target_supported(i));
}

// A kernel is generated for its shapes: a buffer of another shape is refused by the kernel
// with an error, never read out of bounds.
TEST(ConvKernelErrors, MismatchedChannelsIsAnErrorNotACrash) {
  const ConvCase c = kCases[2];
  const Problem& prob = problem_for(2, 0);
  std::shared_ptr<const GeneratedKernels> keep;
  const GeneratedKernelFn fn = generate(conv_spec(prob, ""), runtime::best_cpu_target(), &keep);
  const graph::Value& w = prob.g.value(prob.g.nodes()[0].inputs[1]);
  const graph::Value& bias = prob.g.value(prob.g.nodes()[0].inputs[2]);
  // An input with one channel fewer than the weights expect.
  std::vector<float> in(c.n * c.h * c.w * (c.ci - 1), 1.0f);
  std::vector<float> out(prob.expected.data.size());
  HalideBuffer in_b = wrap(in.data(), {c.n, c.h, c.w, c.ci - 1});
  HalideBuffer w_b = wrap(w.data->data(), w.shape);
  HalideBuffer b_b = wrap(bias.data->data(), bias.shape);
  HalideBuffer out_b = wrap(out.data(), prob.expected.shape);
  void* args[] = {in_b.raw_buffer(), w_b.raw_buffer(), b_b.raw_buffer(), out_b.raw_buffer()};
  runtime::begin_halide_call();
  EXPECT_NE(fn(args), 0);
  EXPECT_NE(runtime::last_halide_error().find("arg0"), std::string::npos)
      << runtime::last_halide_error();
}

}  // namespace

namespace {

// Depthwise kernels (groups == channels) against the reference: odd channel counts (below one
// vector, between vectors), strides, asymmetric pads, dilation, tiny images, batch 2.
struct DwCase {
  const char* name;
  int64_t n, c, h, w, k;
  int stride, pad_top, pad_left, pad_bottom, pad_right, dil;
};
const DwCase kDwCases[] = {
    {"mobilenet_144_56x56_s1", 1, 144, 56, 56, 3, 1, 1, 1, 1, 1, 1},
    {"mobilenet_96_112x112_s2", 1, 96, 23, 30, 3, 2, 0, 0, 1, 1, 1},
    {"channels_40", 1, 40, 9, 11, 3, 1, 1, 1, 1, 1, 1},
    {"channels_5_below_a_vector", 1, 5, 7, 6, 3, 1, 1, 1, 1, 1, 1},
    {"k5_dilation_2_asymmetric", 2, 33, 12, 10, 5, 1, 3, 1, 2, 4, 2},
    {"width_2", 1, 64, 4, 2, 3, 2, 1, 1, 1, 1, 1},
    // 3x3 with dilation: the unrolled-taps branch without the stride-1/2 input sharing.
    {"k3_dilation_2_width_17", 1, 24, 13, 17, 3, 1, 2, 2, 2, 2, 2},
};

// The specs of one-node graphs, lowered as the runtime lowers them.
std::vector<graph::KernelSpec> specs_of(const std::vector<graph::Graph>& graphs) {
  ModelOptions lower;
  lower.lower_only = true;
  std::vector<graph::KernelSpec> specs;
  for (const graph::Graph& g : graphs) specs.push_back(Model(g, lower).kernels().at(0));
  return specs;
}

// Each case with one epilogue (rotating), generated together for each CPU target.
TEST(DepthwiseKernels, MatchReferenceOnEveryTarget) {
  std::vector<graph::Graph> graphs;
  std::vector<graph::Tensor> ins, wants;
  for (size_t i = 0; i < std::size(kDwCases); ++i) {
    const DwCase& d = kDwCases[i];
    graph::GraphBuilder b;
    const graph::ValueId x = b.input("x", {d.n, d.h, d.w, d.c}, Layout::nhwc);
    const graph::ValueId w = b.constant("w", {d.k, d.k, 1, d.c},
                                        graph::random_uniform(d.k * d.k * d.c, -0.5f, 0.5f, 61), Layout::hwio);
    const graph::ValueId bias = b.constant("b", {d.c}, graph::random_uniform(d.c, -0.6f, 0.4f, 62));
    graph::Conv2d attrs{d.stride, d.stride, d.pad_top, d.pad_left, d.pad_bottom, d.pad_right, d.dil, d.dil,
                        kEpilogues[i % 3]};
    attrs.groups = static_cast<int>(d.c);
    b.output(b.op("dw", attrs, {x, w, bias}));
    graphs.push_back(b.finish());
    ins.push_back({{d.n, d.h, d.w, d.c}, Layout::nhwc,
                   graph::random_uniform(d.n * d.h * d.w * d.c, -8.0f, 8.0f, 63 + i)});
    wants.push_back(graph::run_reference(graphs.back(), {ins.back()})[0]);
  }
  const std::vector<graph::KernelSpec> specs = specs_of(graphs);
  for (const graph::KernelSpec& k : specs) ASSERT_TRUE(std::get<graph::ConvKernelSpec>(k).depthwise);
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!testing_util::runs_target(t)) continue;
    std::shared_ptr<const GeneratedKernels> keep;
    codegen::CodegenOptions o;
    o.cache_dir = KILN_TEST_CACHE_DIR;
    keep = codegen::kernel_generator(o)(specs, {Backend::cpu, runtime::cpu_targets()[t]});
    for (size_t i = 0; i < specs.size(); ++i) {
      SCOPED_TRACE(std::string(kDwCases[i].name) + " target " + runtime::cpu_targets()[t]);
      const graph::Graph& g = graphs[i];
      const graph::Value& wv = g.value(g.nodes()[0].inputs[1]);
      const graph::Value& bv = g.value(g.nodes()[0].inputs[2]);
      std::vector<float> out(wants[i].data.size(), NAN);
      HalideBuffer in_b = wrap(ins[i].data.data(), ins[i].shape), w_b = wrap(wv.data->data(), wv.shape),
                   b_b = wrap(bv.data->data(), bv.shape), out_b = wrap(out.data(), wants[i].shape);
      void* args[] = {in_b.raw_buffer(), w_b.raw_buffer(), b_b.raw_buffer(), out_b.raw_buffer()};
      runtime::begin_halide_call();
      ASSERT_EQ(keep->kernels[i].fn(args), 0) << runtime::last_halide_error();
      expect_close(out, wants[i]);
    }
  }
}

}  // namespace

// The NCHW -> NHWC entry transform on every target: three channels with rows of at least one
// vector (the interleaving branch, with a shifted last tile), short rows, and many channels.
TEST(LayoutKernel, NchwToNhwcOnEveryTarget) {
  struct Case {
    int n, c, h, w;
  };
  const Case cases[] = {Case{1, 3, 17, 37}, Case{2, 3, 9, 16}, Case{1, 3, 5, 7}, Case{1, 64, 9, 10},
                        Case{1, 5, 3, 20}};
  std::vector<graph::KernelSpec> specs;
  for (const Case& k : cases) {
    const graph::Shape nchw = {k.n, k.c, k.h, k.w}, nhwc = {k.n, k.h, k.w, k.c};
    specs.push_back(graph::LayoutKernelSpec{"to_nhwc",
                                            {graph::ValueId{0}, "x", nchw, Layout::nchw},
                                            {graph::ValueId{1}, "y", nhwc, Layout::nhwc}});
  }
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!testing_util::runs_target(t)) continue;
    codegen::CodegenOptions o;
    o.cache_dir = KILN_TEST_CACHE_DIR;
    const auto kernels =
        codegen::kernel_generator(o)(specs, {Backend::cpu, runtime::cpu_targets()[t]});
    for (size_t i = 0; i < specs.size(); ++i) {
      const Case k = cases[i];
      SCOPED_TRACE("c " + std::to_string(k.c) + " w " + std::to_string(k.w) + " target " +
                   runtime::cpu_targets()[t]);
      const std::vector<float> in =
          graph::random_uniform(int64_t{k.n} * k.c * k.h * k.w, -1.0f, 1.0f, 77 + i);
      std::vector<float> out(in.size(), NAN);
      HalideBuffer in_b(const_cast<float*>(in.data()), {k.w, k.h, k.c, k.n});
      HalideBuffer out_b(out.data(), {k.c, k.w, k.h, k.n});
      void* args[] = {in_b.raw_buffer(), out_b.raw_buffer()};
      runtime::begin_halide_call();
      ASSERT_EQ(kernels->kernels[i].fn(args), 0) << runtime::last_halide_error();
      for (int n = 0; n < k.n; ++n)
        for (int c = 0; c < k.c; ++c)
          for (int y = 0; y < k.h; ++y)
            for (int x = 0; x < k.w; ++x)
              ASSERT_EQ(out[((size_t(n) * k.h + y) * k.w + x) * k.c + c],
                        in[((size_t(n) * k.c + c) * k.h + y) * k.w + x]);
    }
  }
}
