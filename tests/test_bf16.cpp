// bf16 precision (graph::PipelineOptions::precision): which convolutions the use_bf16 pass
// marks, the reference interpreter's emulation, the packed weight layout, and the generated
// kernels (the AVX512_BF16 variant, the AMX kernel, and the same arithmetic converted on targets
// without the instruction) against that reference on every CPU target this machine runs.
#include <gtest/gtest.h>

#include <cpuid.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "Halide.h"
#include "HalideRuntime.h"
#include "codegen/kernel_library.h"
#include "graph/bf16.h"
#include "graph/builder.h"
#include "graph/kernel_spec.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "graph/verify.h"
#include "kiln/runtime.h"
#include "runtime/conv_weights.h"
#include "runtime/halide_errors.h"
#include "runtime/kernels.h"
#include "schedules/conv_params.h"
#include "test_generator.h"

namespace kiln {
namespace {

using graph::Layout;
using graph::ValueId;

graph::Graph bf16_passes(const graph::Graph& g, bool amx = false) {
  graph::PipelineOptions o;
  o.precision = graph::Precision::bf16;
  o.bf16_amx = amx;
  return graph::run_passes(g, o);
}

// The optimized graph with every convolution that can run in bf16 marked so (the pass keeps
// narrow Winograd layers float32, a speed choice): the kernel tests cover bf16 kernels of
// every shape.
graph::Graph bf16_everywhere(const graph::Graph& g) {
  graph::Graph out = graph::run_passes(g);
  std::vector<graph::Node> nodes = out.nodes();
  for (graph::Node& n : nodes)
    if (auto* c = std::get_if<graph::Conv2d>(&n.op); c && graph::bf16_conv_refusal(out, n).empty())
      c->bf16 = true;
  out.rebuild(std::move(nodes));
  return out;
}

const graph::Node& node_starting(const graph::Graph& g, const std::string& prefix) {
  for (const graph::Node& n : g.nodes())
    if (n.name.rfind(prefix, 0) == 0) return n;
  throw std::runtime_error("no node named " + prefix + "...");
}

ValueId conv(graph::GraphBuilder& b, const std::string& name, ValueId x, int64_t ci, int64_t co,
             int k, int stride, int groups, uint64_t seed) {
  graph::Conv2d a;
  a.stride_h = a.stride_w = stride;
  a.pad_top = a.pad_left = a.pad_bottom = a.pad_right = k / 2;
  a.groups = groups;
  const int64_t n = co * ci / groups * k * k;
  return b.conv2d(name, x,
                  b.constant(name + "_w", {co, ci / groups, k, k},
                             graph::random_uniform(static_cast<size_t>(n), -0.3f, 0.3f, seed), Layout::oihw),
                  b.constant(name + "_b", {co}, graph::random_uniform(static_cast<size_t>(co), -0.2f, 0.2f, seed + 1)),
                  a);
}

// A stem of 3 input channels, a dense 3x3, a depthwise 3x3 and a grouped 1x1: only the dense
// one runs in bf16; the others say why not.
// Narrow 3x3 stride-1 layers whose float32 kernel is Winograd stay float32 (the bf16 kernels
// measured slower there), with a note saying why: 64 output channels on AMX, 128 with dot
// products; wider ones, and ones Winograd does not take, run bf16.
TEST(Bf16Pass, KeepsNarrowWinogradLayersFloat32) {
  graph::GraphBuilder b;
  const ValueId x = b.input("x", {1, 16, 20, 20});
  ValueId t = b.relu("stem_relu", conv(b, "stem", x, 16, 16, 1, 1, 1, 20));  // reads the NCHW input
  t = b.relu("narrow_relu", conv(b, "narrow", t, 16, 64, 3, 1, 1, 21));
  t = b.relu("wide_relu", conv(b, "wide", t, 64, 128, 3, 1, 1, 22));
  t = b.relu("wider_relu", conv(b, "wider", t, 128, 256, 3, 1, 1, 24));
  b.output(b.relu("strided_relu", conv(b, "strided", t, 256, 64, 3, 2, 1, 23)));
  const graph::Graph input = b.finish();
  for (const bool amx : {false, true}) {
    SCOPED_TRACE(amx ? "AMX" : "dot products");
    const graph::Graph g = bf16_passes(input, amx);
    for (const char* name : {"narrow", "wide"}) {
      const graph::Node& n = node_starting(g, name);
      const bool f32 = name == std::string("narrow") || !amx;
      EXPECT_EQ(std::get<graph::Conv2d>(n.op).bf16, !f32) << name;
      EXPECT_EQ(graph::bf16_conv_refusal(g, n), "");  // it could: a choice, not a refusal
      bool noted = false;
      for (const std::string& c : n.computes) noted |= c.find("Winograd") != std::string::npos;
      EXPECT_EQ(noted, f32) << name;
    }
    EXPECT_TRUE(std::get<graph::Conv2d>(node_starting(g, "wider").op).bf16);
    EXPECT_TRUE(std::get<graph::Conv2d>(node_starting(g, "strided").op).bf16);
  }
}

// Small outputs take bf16 as well (windows and 1x1 alike): what is slow there is the AMX
// kernel, which they do not get (schedules::amx_by_default); the AVX512_BF16 dot products run
// them faster than float32.
TEST(Bf16Pass, MarksSmallOutputWindowsToo) {
  graph::GraphBuilder b;
  const ValueId x = b.input("x", {1, 64, 16, 16});
  ValueId t = b.relu("stem_relu", conv(b, "stem", x, 64, 64, 1, 1, 1, 40));  // reads the NCHW input
  t = b.relu("down_relu", conv(b, "down", t, 64, 128, 3, 2, 1, 41));         // 8x8: 64 pixels
  t = b.relu("window_relu", conv(b, "window", t, 128, 128, 3, 1, 1, 42));   // 8x8
  b.output(b.relu("pointwise_relu", conv(b, "pointwise", t, 128, 256, 1, 1, 1, 43)));
  const graph::Graph g = bf16_passes(b.finish());
  for (const char* name : {"down", "window", "pointwise"})
    EXPECT_TRUE(std::get<graph::Conv2d>(node_starting(g, name).op).bf16) << name;
}

TEST(Bf16Kernels, NoAmxKernelForWindowsOnSmallOutputs) {
  schedules::ConvShape s;
  s.bf16 = true;
  s.out_channels = s.reduction_channels = 512;
  s.kernel_w = s.kernel_h = 3;
  s.out_width = s.out_height = 7;
  EXPECT_FALSE(schedules::amx_by_default(s));
  s.out_width = s.out_height = 8;  // 64 pixels
  EXPECT_FALSE(schedules::amx_by_default(s));
  s.out_width = 9;
  EXPECT_TRUE(schedules::amx_by_default(s));
  s.out_width = 7;
  s.kernel_w = s.kernel_h = 1;
  EXPECT_TRUE(schedules::amx_by_default(s));
}

TEST(Bf16Pass, MarksDenseConvolutionsOnly) {
  graph::GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 12, 12});
  ValueId t = b.relu("stem_relu", conv(b, "stem", x, 3, 16, 3, 1, 1, 1));
  t = b.relu("dense_relu", conv(b, "dense", t, 16, 32, 3, 1, 1, 3));
  t = conv(b, "depthwise", t, 32, 32, 3, 1, 32, 5);
  b.output(conv(b, "grouped", t, 32, 32, 1, 1, 2, 7));
  const graph::Graph input = b.finish();
  const graph::Graph g = bf16_passes(input);
  for (const graph::Node& n : g.nodes()) {
    const auto* c = std::get_if<graph::Conv2d>(&n.op);
    if (!c) continue;
    const std::string why = graph::bf16_conv_refusal(g, n);
    const bool dense = n.name.rfind("dense", 0) == 0 || n.name.rfind("stem", 0) == 0;
    EXPECT_EQ(c->bf16, dense) << n.name << ": " << why;
    EXPECT_EQ(why.empty(), c->bf16) << n.name;
  }
  // f32 (the default) marks nothing.
  const graph::Graph f32 = graph::run_passes(input);
  for (const graph::Node& n : f32.nodes())
    if (const auto* c = std::get_if<graph::Conv2d>(&n.op)) EXPECT_FALSE(c->bf16) << n.name;
  // A flag where the kernels cannot honour it is a verifier error, not a wrong kernel.
  graph::Graph bad = g;
  std::vector<graph::Node> nodes = bad.nodes();
  for (graph::Node& n : nodes)
    if (auto* c = std::get_if<graph::Conv2d>(&n.op); c && n.name.rfind("depthwise", 0) == 0) c->bf16 = true;
  bad.rebuild(std::move(nodes));
  const std::vector<std::string> problems = graph::verify_problems(bad);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("marked bf16 but cannot be"), std::string::npos) << problems[0];
}

TEST(Bf16Reference, IsTheFloatConvolutionOfTheRoundedOperands) {
  EXPECT_EQ(graph::round_to_bf16(1.0f), 1.0f);
  EXPECT_EQ(graph::round_to_bf16(1.0f + 1.0f / 256), 1.0f);             // a tie: to even
  EXPECT_EQ(graph::round_to_bf16(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);  // a tie: to even
  EXPECT_EQ(graph::round_to_bf16(1.0f + 1.5f / 256), 1.0f + 2.0f / 256);
  EXPECT_TRUE(std::isnan(graph::round_to_bf16(std::nanf(""))));

  graph::GraphBuilder b;
  const ValueId x = b.input("x", {1, 16, 9, 9});
  b.output(b.relu("relu", conv(b, "dense", x, 16, 24, 3, 1, 1, 11)));
  const graph::Graph g = bf16_passes(b.finish());
  const graph::Value& in = g.value(g.inputs[0]);
  const graph::Tensor xt{in.shape, in.layout, graph::random_uniform(graph::num_elements(in.shape), -1, 1, 12)};
  const std::vector<float> emulated = graph::run_reference(g, {xt})[0].data;
  // The same graph in f32, its operands rounded beforehand.
  graph::Graph rounded = g;
  std::vector<graph::Node> nodes = rounded.nodes();
  for (graph::Node& n : nodes)
    if (auto* c = std::get_if<graph::Conv2d>(&n.op)) {
      c->bf16 = false;
      graph::Value& w = rounded.value(n.inputs[1]);
      std::vector<float> data = *w.data;
      for (float& v : data) v = graph::round_to_bf16(v);
      w.data = std::make_shared<const std::vector<float>>(std::move(data));
    }
  rounded.rebuild(std::move(nodes));
  graph::Tensor xr = xt;
  for (float& v : xr.data) v = graph::round_to_bf16(v);
  EXPECT_EQ(emulated, graph::run_reference(rounded, {xr})[0].data);
  EXPECT_NE(emulated, graph::run_reference(rounded, {xt})[0].data) << "the input was not rounded";
}

// Step k of the packed reduction is channel k % Ci' of tap k / Ci', Ci' the channels rounded up
// to even; an odd count's extra channel, and everything past K and Co, is zero. Both layouts
// hold the same values.
TEST(Bf16Weights, PackedAsPairsOfStepsByOutputChannel) {
  const int64_t kh = 3, kw = 3, co = 20;  // Co 20 -> 32 columns
  for (const int64_t ci : {4, 3}) {
    SCOPED_TRACE(std::to_string(ci) + " input channels");
    const int64_t paired = 4;  // K = 36 -> 64 steps either way
    const std::vector<float> hwio = graph::random_uniform(static_cast<size_t>(kh * kw * ci * co), -1, 1, 21);
    ASSERT_EQ(runtime::bf16_conv_channels(ci), paired);
    ASSERT_EQ(runtime::bf16_conv_reduction(kh, kw, ci), 64);
    ASSERT_EQ(runtime::bf16_conv_columns(co), 32);
    const auto packed = runtime::pack_bf16_conv_weights(hwio.data(), kh, kw, ci, co);
    const auto rows = runtime::pack_bf16_conv_weights(hwio.data(), kh, kw, ci, co, runtime::Bf16Layout::rows);
    ASSERT_EQ(packed.size(), 64u * 32u);
    ASSERT_EQ(rows.size(), 64u * 32u);
    for (int64_t k = 0; k < 64; ++k)
      for (int64_t o = 0; o < 32; ++o) {
        const int64_t c = k % paired, tap = k / paired;
        // blocked: [Co' / 16][K' / 2][16][2]; rows (the AMX kernels'): [K' / 2][Co'][2]
        const uint16_t got = packed[static_cast<size_t>(((o / 16 * 32 + k / 2) * 16 + o % 16) * 2 + k % 2)];
        ASSERT_EQ(rows[static_cast<size_t>(((k / 2) * 32 + o) * 2 + k % 2)], got) << "step " << k;
        const uint16_t want =
            tap < kh * kw && c < ci && o < co
                ? graph::to_bf16_bits(hwio[static_cast<size_t>((tap * ci + c) * co + o)])
                : uint16_t{0};
        ASSERT_EQ(got, want) << "step " << k << ", channel " << o;
      }
  }
}

struct Bf16Case {
  const char* name;
  int64_t batch, ci, co, size;
  int kernel, stride;
  bool residual, pool;
};

// 1x1 and 3x3, strides 1 and 2, a reduction that is not a multiple of 32 steps, output channels
// that are not a multiple of 16, a small image (the AMX schedule's windows gathered once and
// tasks split by channels), a residual, a fused pooling, a batch of 2, a single tile of 16
// output channels (the AMX tiles' storage padded to 32), odd input channel counts (an RGB
// stem's 7x7/2 with its pooling, and a 3x3 on 5 channels; both read the NCHW input in place).
const Bf16Case kCases[] = {
    {"pointwise_40", 1, 64, 40, 14, 1, 1, false, false},
    {"3x3_residual", 1, 32, 32, 20, 3, 1, true, false},
    {"3x3_s2_k144", 1, 16, 48, 17, 3, 2, false, false},
    {"small_7x7", 1, 64, 96, 7, 3, 1, false, false},
    {"pooled", 1, 32, 64, 16, 3, 1, false, true},
    {"batch2", 2, 32, 64, 10, 3, 1, false, false},
    {"sixteen_out", 1, 32, 16, 12, 3, 1, false, false},
    {"rgb_stem", 1, 3, 32, 30, 7, 2, false, true},
    {"odd_5", 1, 5, 24, 13, 3, 1, false, false},
};

void PrintTo(const Bf16Case& c, std::ostream* os) { *os << c.name; }

graph::Graph case_graph(const Bf16Case& c) {
  graph::GraphBuilder b;
  const ValueId x = b.input("x", {c.batch, c.ci, c.size, c.size});
  ValueId y = conv(b, "conv", x, c.ci, c.co, c.kernel, c.stride, 1, 31);
  if (c.residual) y = b.op("add", graph::Binary{graph::BinaryOp::add}, {y, x});
  y = b.relu("relu", y);
  if (c.pool) {
    graph::Pool2d p;
    p.kind = graph::PoolKind::max;
    p.kernel_h = p.kernel_w = 3;
    p.stride_h = p.stride_w = 2;
    y = b.op("pool", p, {y});
  }
  b.output(y);
  return b.finish();
}

// The model's output against the reference run of the same optimized graph, which emulates the
// bf16 arithmetic: the products are exact in float32, so only the order of the float32 sums
// differs.
void expect_matches_emulation(const graph::Graph& g, const ModelOptions& o) {
  Model m(g, o);
  for (uint64_t seed : {1u, 2u}) testing_util::expect_model_matches_reference(m, g, seed, 1e-4, 1e-5);
}

// In bf16 mode a classifier's Gemm (alpha, beta, B transposed or not, a bias or none) becomes
// a 1x1 convolution, marked bf16: its kernels match the emulating reference of the optimized
// graph, and that graph the float32 input graph within bf16's rounding. A Gemm whose C is
// computed stays a Gemm.
TEST(Bf16Pass, ClassifierGemmsRunAsBf16Convolutions) {
  for (const bool trans_b : {true, false}) {
    for (const bool with_bias : {true, false}) {
      SCOPED_TRACE(std::string(trans_b ? "B transposed" : "B as is") + (with_bias ? ", bias" : ""));
      graph::GraphBuilder b;
      const ValueId x = b.input("x", {2, 24, 5, 5});
      const ValueId t = b.relu("stem_relu", conv(b, "stem", x, 24, 48, 3, 1, 1, 60));
      const ValueId pooled = b.op("gap", graph::GlobalPool{graph::PoolKind::avg}, {t});
      const ValueId flat = b.op("flat", graph::Reshape{{2, 48}}, {pooled});
      graph::Gemm fc;
      fc.trans_b = trans_b;
      fc.alpha = 0.75f;
      fc.beta = 1.5f;
      const graph::Shape w_shape = trans_b ? graph::Shape{40, 48} : graph::Shape{48, 40};
      std::vector<ValueId> args = {
          flat, b.constant("fc_w", w_shape, graph::random_uniform(48 * 40, -0.5f, 0.5f, 61), Layout::any)};
      if (with_bias) args.push_back(b.constant("fc_b", {40}, graph::random_uniform(40, -0.5f, 0.5f, 62), Layout::any));
      b.output(b.op("fc", fc, args));
      const graph::Graph input = b.finish();
      graph::PipelineOptions o;
      o.precision = graph::Precision::bf16;
      const graph::Graph g = graph::run_passes(input, o);
      const auto fc_node = std::find_if(g.nodes().begin(), g.nodes().end(),
                                        [](const graph::Node& n) { return n.name == "fc"; });
      ASSERT_NE(fc_node, g.nodes().end());
      ASSERT_TRUE(std::holds_alternative<graph::Conv2d>(fc_node->op)) << graph::dump(g);
      EXPECT_TRUE(std::get<graph::Conv2d>(fc_node->op).bf16);
      ModelOptions mo;
      mo.generate_kernels = testing_util::test_generator();
      expect_matches_emulation(g, mo);
      Model m(g, mo);
      testing_util::expect_model_matches_reference(m, input, 3, 2e-2, 2e-2);
    }
  }
  graph::GraphBuilder b;
  const ValueId x = b.input("x", {2, 16});
  const ValueId c = b.relu("c", b.input("c_in", {2, 8}));
  graph::Gemm fc;
  b.output(b.op("fc", fc, {x, b.constant("w", {16, 8}, graph::random_uniform(128, -1, 1, 63), Layout::any), c}));
  graph::PipelineOptions o;
  o.precision = graph::Precision::bf16;
  EXPECT_TRUE(std::holds_alternative<graph::Gemm>(node_starting(graph::run_passes(b.finish(), o), "fc").op));
}

class Bf16Kernels : public testing::TestWithParam<Bf16Case> {};

TEST_P(Bf16Kernels, MatchTheEmulatingReferenceOnEveryTarget) {
  const graph::Graph g = bf16_everywhere(case_graph(GetParam()));
  size_t marked = 0;
  for (const graph::Node& n : g.nodes())
    if (const auto* c = std::get_if<graph::Conv2d>(&n.op)) marked += c->bf16;
  ASSERT_EQ(marked, 1u) << graph::dump(g);
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!testing_util::runs_target(t)) continue;
    for (bool amx : {true, false}) {
      if (!amx && !runtime::amx_usable()) continue;  // the same kernels as with amx
      SCOPED_TRACE(runtime::cpu_targets()[t] + (amx ? "" : ", AMX off"));
      ModelOptions o;
      o.cpu_target = t;
      o.amx = amx;
      o.generate_kernels = testing_util::test_generator();
      expect_matches_emulation(g, o);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Bf16Kernels, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<Bf16Case>& i) { return std::string(i.param.name); });

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The dispatch wrappers ask halide_can_use_target_features whether the AVX512_BF16 variant
// (Halide's avx512_zen4 level) runs here. Halide 21's own answer is yes on any CPU but one Zen 4
// model (it does not check the feature), which would run vdpbf16ps where it is missing; Kiln's
// check (installed by begin_halide_call) must answer what CPUID says.
TEST(Bf16Kernels, TheDotProductVariantIsAdmittedOnlyWhereTheCpuHasIt) {
  const std::string avx512 = runtime::cpu_targets()[0];
  const Halide::Target variant =
      Halide::Target(runtime::bf16_target(avx512)).with_feature(Halide::Target::NoRuntime);
  std::vector<uint64_t> words((Halide::Target::FeatureEnd + 63) / 64, 0);
  for (int f = 0; f < Halide::Target::FeatureEnd; ++f)
    if (variant.has_feature(static_cast<Halide::Target::Feature>(f)))
      words[f / 64] |= uint64_t{1} << (f % 64);
  unsigned a, b, c, d;
  bool expected = __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0;
  // Leaf 7.0: AVX512F/DQ/IFMA/CD/BW/VL in EBX; VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ in ECX.
  const unsigned ebx_bits = (1u << 16) | (1u << 17) | (1u << 21) | (1u << 28) | (1u << 30) | (1u << 31);
  const unsigned ecx_bits = (1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14);
  expected = expected && (b & ebx_bits) == ebx_bits && (c & ecx_bits) == ecx_bits;
  // Leaf 7.1 EAX bit 5: AVX512_BF16.
  expected = expected && __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0 && (a & (1u << 5)) != 0;
  runtime::begin_halide_call();
  EXPECT_EQ(halide_can_use_target_features(static_cast<int>(words.size()), words.data()) != 0,
            expected)
      << variant.to_string();
  EXPECT_EQ(runtime::target_supported(runtime::bf16_target(avx512)), expected);
}

// What the kernels of an AVX-512 target are made of, whatever this CPU is: the AVX512_BF16
// variant multiplies with vdpbf16ps, the AMX kernel with tdpbf16ps, the target itself with
// neither.
TEST(Bf16Kernels, InstructionsOfEachKernel) {
  for (const Bf16Case& c : {kCases[1], kCases[7]}) {
  SCOPED_TRACE(c.name);
  const graph::Graph g = bf16_everywhere(case_graph(c));
  ModelOptions lower;
  lower.lower_only = true;
  const Model lowered(g, lower);
  std::vector<graph::KernelSpec> convs;
  for (const graph::KernelSpec& k : lowered.kernels())
    if (std::holds_alternative<graph::ConvKernelSpec>(k)) convs.push_back(k);
  ASSERT_EQ(convs.size(), 1u);
  const std::string avx512 = runtime::cpu_targets()[0];
  ASSERT_NE(avx512.find("avx512_skylake"), std::string::npos) << avx512;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln-bf16-asm-" + std::to_string(::getpid()));
  ASSERT_EQ(codegen::write_kernel_listings(convs, {avx512}, "t", "assembly", dir), 3);
  const std::string variant = runtime::bf16_target(avx512);
  const std::string dot = read_file(dir / ("t_k0-" + variant + ".s"));
  const std::string amx = read_file(dir / ("t_k0_amx-" + runtime::amx_target(avx512) + ".s"));
  const std::string plain = read_file(dir / ("t_k0-" + avx512 + ".s"));
  std::filesystem::remove_all(dir);
  EXPECT_NE(dot.find("vdpbf16ps"), std::string::npos);
  EXPECT_EQ(dot.find("tdpbf16ps"), std::string::npos);
  EXPECT_NE(amx.find("tdpbf16ps"), std::string::npos);
  EXPECT_EQ(plain.find("dpbf16ps"), std::string::npos);
  EXPECT_FALSE(plain.empty());
  }
}

// A bf16 graph never binds kernels compiled for its f32 form: the signatures differ.
TEST(Bf16Kernels, AModelRefusesKernelsOfTheOtherPrecision) {
  const graph::Graph input = case_graph(kCases[1]);
  const graph::Graph f32 = graph::run_passes(input), bf16 = bf16_everywhere(input);
  ModelOptions lower;
  lower.lower_only = true;
  const std::vector<graph::KernelSpec> f32_specs = Model(f32, lower).kernels();
  const KernelGenerator inner = testing_util::test_generator();
  ModelOptions o;
  o.generate_kernels = [&](const std::vector<graph::KernelSpec>&, const KernelRequest& r) {
    return inner(f32_specs, r);
  };
  try {
    Model m(bf16, o);
    FAIL() << "a bf16 model bound f32 kernels";
  } catch (const graph::Error& e) {
    EXPECT_NE(std::string(e.what()).find("was compiled for another model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
