// Kernels generated per model by codegen/ (elementwise chains, binary ops, pooling, MatMul by a
// matrix, grouped convolutions and convolutions with post steps): each is compiled for its spec's
// shapes, loaded the way `kiln run` loads them, run by kiln::Model and compared with the reference
// interpreter. The GPU schedule runs through Halide's OpenCL backend (on the CPU, through pocl);
// the CUDA object's PTX is assembled for sm_90.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "codegen/kernel_library.h"
#include "codegen/kernel_pipeline.h"
#include "graph/builder.h"
#include "graph/example.h"
#include "graph/passes/passes.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kiln/runtime.h"
#include "ptx_util.h"
#include "runtime/conv_weights.h"
#include "runtime/kernels.h"

namespace kiln {
namespace {

using graph::ChainStep;
using graph::ChainStepKind;
using graph::Layout;
using graph::Shape;

struct ChainCase {
  std::string name;
  Shape shape;
  Layout layout;
  std::vector<ChainStep> steps;
};

void PrintTo(const ChainCase& c, std::ostream* os) { *os << c.name; }

// Every step kind, per-channel steps in both layouts, channel counts below, at and above a vector,
// odd sizes, and tensors large enough to be split over threads.
const std::vector<ChainStep> kEveryStep = {
    {ChainStepKind::affine, 0, 0},        {ChainStepKind::clamp, -1.0f, 2.0f},
    {ChainStepKind::leaky_relu, 0.2f, 0}, {ChainStepKind::hard_sigmoid, 0.3f, 0.4f},
    {ChainStepKind::affine, 0, 0},        {ChainStepKind::sigmoid, 0, 0},
    {ChainStepKind::hard_swish, 0, 0},    {ChainStepKind::silu, 0, 0}};
// The unary math steps (imported ONNX ops). abs first, so sqrt and log see positive values,
// some near 0; the activations end on positive values before the reciprocal.
const std::vector<ChainStep> kMathSteps = {{ChainStepKind::abs, 0, 0}, {ChainStepKind::sqrt, 0, 0},
                                           {ChainStepKind::log, 0, 0}, {ChainStepKind::neg, 0, 0},
                                           {ChainStepKind::exp, 0, 0}, {ChainStepKind::tanh, 0, 0}};
const std::vector<ChainStep> kActivationSteps = {{ChainStepKind::elu, 0.7f, 0},
                                                 {ChainStepKind::softsign, 0, 0},
                                                 {ChainStepKind::selu, 1.6732632f, 1.0507010f},
                                                 {ChainStepKind::erf, 0, 0},
                                                 {ChainStepKind::celu, 1.3f, 0},
                                                 {ChainStepKind::softplus, 0, 0},
                                                 {ChainStepKind::reciprocal, 0, 0},
                                                 {ChainStepKind::thresholded_relu, 0.1f, 0}};
const std::vector<ChainStep> kBnRelu = {{ChainStepKind::affine, 0, 0},
                                        {ChainStepKind::clamp, 0.0f, INFINITY}};
const std::vector<ChainStep> kSigmoidOnly = {{ChainStepKind::sigmoid, 0, 0}};

std::vector<ChainCase> chain_cases() {
  return {
      {"every_step_nhwc_c5", {2, 3, 4, 5}, Layout::nhwc, kEveryStep},
      {"every_step_nchw_c5", {2, 5, 3, 4}, Layout::nchw, kEveryStep},
      {"every_step_nhwc_c37", {1, 7, 9, 37}, Layout::nhwc, kEveryStep},
      {"bn_relu_nhwc_c3", {1, 11, 13, 3}, Layout::nhwc, kBnRelu},
      {"bn_relu_nhwc_large", {2, 28, 28, 96}, Layout::nhwc, kBnRelu},
      {"bn_relu_nchw_large", {1, 40, 30, 31}, Layout::nchw, kBnRelu},
      {"sigmoid_rank2", {7, 3}, Layout::any, kSigmoidOnly},
      {"sigmoid_wide", {1, 14, 14, 1152}, Layout::nhwc, kSigmoidOnly},
      {"sigmoid_long_row", {1, 100003}, Layout::any, kSigmoidOnly},
      {"math_steps", {1, 9, 11, 40}, Layout::nhwc, kMathSteps},
      {"activation_steps", {2, 7, 5, 24}, Layout::nhwc, kActivationSteps},
      {"tanh_alone", {3, 1000}, Layout::any, {{ChainStepKind::tanh, 0, 0}}},
      {"pow_steps",
       {1, 6, 6, 20},
       Layout::nhwc,  // odd power of negatives, then positive bases
       {{ChainStepKind::pow, 3.0f, 0},
        {ChainStepKind::pow, 2.0f, 0},
        {ChainStepKind::abs, 0, 0},
        {ChainStepKind::pow, 1.5f, 0},
        {ChainStepKind::pow, 0.5f, 0},
        {ChainStepKind::pow, -3.0f, 0}}},
  };
}

// A graph with one ElementwiseChain node: input x, then a [C] scale and shift per affine step.
graph::Graph chain_graph(const ChainCase& c, uint64_t seed) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", c.shape, c.layout);
  std::vector<graph::ValueId> ins = {x};
  const int64_t channels = c.shape.size() >= 2 ? c.shape[c.layout == Layout::nhwc ? 3 : 1] : 1;
  for (const ChainStep& s : c.steps) {
    if (s.kind != ChainStepKind::affine) continue;
    const size_t n = static_cast<size_t>(channels);
    ins.push_back(b.constant("scale" + std::to_string(ins.size()), {channels},
                             graph::random_uniform(n, -2.0f, 2.0f, seed + ins.size())));
    ins.push_back(b.constant("shift" + std::to_string(ins.size()), {channels},
                             graph::random_uniform(n, -1.0f, 1.0f, seed + 7 * ins.size())));
  }
  b.output(b.op("chain", graph::ElementwiseChain{c.steps}, ins));
  return b.finish();
}

std::string test_cache_dir() { return KILN_TEST_CACHE_DIR; }

class GeneratedChain : public testing::TestWithParam<ChainCase> {};

// Runs `g` (one kernel, generated) on every CPU target this machine runs, on two sets of random
// inputs in [lo, hi): the kernel must write every element (the second run's inputs differ from
// the first's, so stale values show) and match the reference run of `reference` (the unfused
// graph; `g` itself by default).
void expect_generated_matches_reference(const graph::Graph& g, float lo, float hi, double rtol,
                                        double atol, const graph::Graph* reference = nullptr) {
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!runtime::cpu_target_supported(t)) continue;
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
  expect_generated_matches_reference(chain_graph(GetParam(), 11), -6.0f, 6.0f, 1e-5, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Chains, GeneratedChain, testing::ValuesIn(chain_cases()),
                         [](const testing::TestParamInfo<ChainCase>& i) { return i.param.name; });

struct BinaryCase {
  std::string name;
  graph::BinaryOp op;
  Shape a, b;
  Layout layout;
  bool b_constant;
};
void PrintTo(const BinaryCase& c, std::ostream* os) { *os << c.name; }

std::vector<BinaryCase> binary_cases() {
  using graph::BinaryOp;
  return {
      {"mul_nhwc_same", BinaryOp::mul, {1, 9, 11, 40}, {1, 9, 11, 40}, Layout::nhwc, false},
      {"mul_se_gate_nhwc", BinaryOp::mul, {2, 14, 14, 72}, {2, 1, 1, 72}, Layout::nhwc, false},
      {"add_per_channel_nchw", BinaryOp::add, {1, 6, 7, 9}, {1, 6, 1, 1}, Layout::nchw, true},
      {"sub_rank2_row", BinaryOp::sub, {7, 3}, {3}, Layout::any, false},
      {"div_scalar", BinaryOp::div, {1, 5, 5, 33}, {1}, Layout::nhwc, true},
      {"add_large_residual", BinaryOp::add, {1, 56, 56, 64}, {1, 56, 56, 64}, Layout::nhwc, false},
      {"mul_both_broadcast", BinaryOp::mul, {4, 1, 6}, {1, 5, 1}, Layout::any, false},
  };
}

// One Binary node; both operands are graph inputs unless b_constant.
graph::Graph binary_graph(const BinaryCase& c) {
  graph::GraphBuilder b;
  const Layout lb = c.b.size() == 4 ? c.layout : Layout::any;
  const graph::ValueId x = b.input("a", c.a, c.layout);
  const graph::ValueId y =
      c.b_constant
          ? b.constant("b", c.b, graph::random_uniform(graph::num_elements(c.b), 0.5f, 2.0f, 9), lb)
          : b.input("b", c.b, lb);
  b.output(b.op("binary", graph::Binary{c.op}, {x, y}));
  return b.finish();
}

class GeneratedBinary : public testing::TestWithParam<BinaryCase> {};

// Divisors away from zero; the other operands of both signs through the constants.
TEST_P(GeneratedBinary, MatchesReferenceOnEveryCpuTarget) {
  expect_generated_matches_reference(binary_graph(GetParam()), 0.5f, 3.0f, 1e-6, 1e-7);
}

INSTANTIATE_TEST_SUITE_P(Binaries, GeneratedBinary, testing::ValuesIn(binary_cases()),
                         [](const testing::TestParamInfo<BinaryCase>& i) { return i.param.name; });

// Convolutions with post steps (Conv2d::post): dense and depthwise NHWC convs followed by an
// elementwise chain the prebuilt kernels lack, and grouped convs whatever follows them. Each is
// fused by the passes and generated for its shapes, with the schedule the AOT kernels use for
// its size (wide, deep, 1x1 in place, depthwise), or the grouped one.
enum class Tail { none, relu, silu, hard_swish, sigmoid, residual_relu_bn };
struct ConvCase {
  std::string name;
  int64_t n, h, w, ci, co, k;
  int stride, pad;
  Tail tail;
  int groups = 1;  // == ci == co: depthwise
};
void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

std::vector<ConvCase> conv_cases() {
  return {
      {"wide_3x3_silu", 1, 14, 14, 16, 32, 3, 1, 1, Tail::silu},
      {"stride2_odd_channels_hard_swish", 1, 15, 15, 24, 40, 3, 2, 1, Tail::hard_swish},
      {"pointwise_sigmoid", 1, 10, 10, 64, 48, 1, 1, 0, Tail::sigmoid},
      {"deep_7x7_silu", 1, 7, 7, 512, 64, 1, 1, 0, Tail::silu},
      {"deep_3x3_residual_relu_bn", 1, 7, 7, 128, 64, 3, 1, 1, Tail::residual_relu_bn},
      {"batch2_odd_residual_relu_bn", 2, 9, 11, 8, 20, 3, 1, 1, Tail::residual_relu_bn},
      {"narrow_output_silu", 1, 12, 12, 8, 6, 3, 1, 1, Tail::silu},
      {"depthwise_3x3_hard_swish", 1, 14, 14, 32, 32, 3, 1, 1, Tail::hard_swish, 32},
      {"depthwise_5x5_stride2_silu", 2, 15, 15, 40, 40, 5, 2, 2, Tail::silu, 40},
      {"depthwise_3x3_odd_channels_sigmoid", 1, 9, 9, 19, 19, 3, 1, 1, Tail::sigmoid, 19},
      // Grouped: generated whatever follows them.
      {"grouped_32x4_relu", 1, 14, 14, 128, 128, 3, 1, 1, Tail::relu, 32},
      {"grouped_4x32_silu", 1, 10, 10, 64, 128, 3, 1, 1, Tail::silu, 4},
      {"grouped_narrow_stride2_residual_relu_bn", 2, 9, 9, 48, 48, 3, 2, 1, Tail::residual_relu_bn,
       8},
      {"grouped_1x1_odd_width", 1, 7, 13, 24, 36, 1, 1, 0, Tail::none,
       3},  // no block: own schedule
      {"grouped_24_per_group_silu", 1, 14, 14, 48, 48, 3, 1, 1, Tail::silu, 2},  // blocks of 2
      {"depthwise_multiplier_2", 1, 11, 11, 8, 16, 3, 1, 1, Tail::none, 8},
  };
}

graph::Graph conv_graph(const ConvCase& c) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {c.n, c.h, c.w, c.ci}, Layout::nhwc);
  const int64_t ci_per_group = c.ci / c.groups;
  const float bound = std::sqrt(3.0f / static_cast<float>(ci_per_group * c.k * c.k));
  const graph::ValueId w =
      b.constant("w", {c.k, c.k, ci_per_group, c.co},
                 graph::random_uniform(static_cast<size_t>(c.k * c.k * ci_per_group * c.co), -bound,
                                       bound, 31),
                 Layout::hwio);
  const graph::ValueId bias =
      b.constant("bias", {c.co}, graph::random_uniform(static_cast<size_t>(c.co), -0.5f, 0.5f, 32));
  graph::Conv2d attrs;
  attrs.stride_h = attrs.stride_w = c.stride;
  attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = c.pad;
  attrs.groups = c.groups;
  graph::ValueId y = b.conv2d("conv", x, w, bias, attrs);
  auto vec = [&](const std::string& name, float lo, float hi, uint64_t seed) {
    return b.constant(name, {c.co}, graph::random_uniform(static_cast<size_t>(c.co), lo, hi, seed));
  };
  switch (c.tail) {
    case Tail::none:
      break;
    case Tail::relu:
      y = b.relu("relu", y);
      break;
    case Tail::silu:
      y = b.op("silu", graph::Binary{graph::BinaryOp::mul},
               {y, b.op("sig", graph::Sigmoid{}, {y})});
      break;
    case Tail::hard_swish:
      y = b.op("hswish", graph::Binary{graph::BinaryOp::mul},
               {b.op("hsig", graph::HardSigmoid{1.0f / 6.0f, 0.5f}, {y}), y});
      break;
    case Tail::sigmoid:
      y = b.op("sig", graph::Sigmoid{}, {y});
      break;
    case Tail::residual_relu_bn: {
      const int64_t ho = (c.h + 2 * c.pad - c.k) / c.stride + 1,
                    wo = (c.w + 2 * c.pad - c.k) / c.stride + 1;
      const graph::ValueId r = b.input("r", {c.n, ho, wo, c.co}, Layout::nhwc);
      y = b.relu("relu", b.op("add", graph::Binary{graph::BinaryOp::add}, {y, r}));
      y = b.batch_norm("bn", y, vec("g", 0.5f, 1.5f, 33), vec("be", -0.2f, 0.2f, 34),
                       vec("m", -0.2f, 0.2f, 35), vec("v", 0.5f, 2.0f, 36));
      break;
    }
  }
  b.output(y);
  return b.finish();
}

class GeneratedConv : public testing::TestWithParam<ConvCase> {};

TEST_P(GeneratedConv, FusedAndMatchesReferenceOnEveryCpuTarget) {
  const ConvCase& c = GetParam();
  const graph::Graph g = conv_graph(c);
  const graph::Graph fused = graph::fuse_elementwise_chains(graph::fuse_epilogues(g));
  ASSERT_EQ(fused.num_nodes(), 1u) << graph::dump(fused);
  const bool has_post = c.tail != Tail::none && c.tail != Tail::relu;
  ASSERT_EQ(std::get<graph::Conv2d>(fused.node(graph::NodeId{0}).op).post.empty(), !has_post)
      << graph::dump(fused);
  expect_generated_matches_reference(fused, -2.0f, 2.0f, 1e-4, 1e-5, &g);
}

INSTANTIATE_TEST_SUITE_P(Convs, GeneratedConv, testing::ValuesIn(conv_cases()),
                         [](const testing::TestParamInfo<ConvCase>& i) { return i.param.name; });

// Pooling of NHWC tensors: ResNet's and SqueezeNet's max pools, DenseNet's average pool,
// padding counted or not, dilation, ceil_mode windows that start in the padding, and global
// pooling; channel counts below, at and above a vector.
struct PoolCase {
  std::string name;
  Shape shape;  // NHWC input
  graph::Op op;
};
void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

std::vector<PoolCase> pool_cases() {
  using graph::GlobalPool;
  using graph::Pool2d;
  using graph::PoolKind;
  return {
      {"max_3x3_s2_p1_resnet",
       {1, 15, 15, 64},
       Pool2d{PoolKind::max, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false}},
      {"max_3x3_s2_ceil_squeezenet",
       {1, 13, 13, 20},
       Pool2d{PoolKind::max, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, true, false}},
      {"avg_2x2_s2_densenet",
       {2, 12, 10, 17},
       Pool2d{PoolKind::avg, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, false, false}},
      {"avg_3x3_p1_exclude_pad",
       {1, 9, 11, 3},
       Pool2d{PoolKind::avg, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false}},
      {"avg_3x3_s2_p1_include_pad_ceil",
       {1, 10, 10, 33},
       Pool2d{PoolKind::avg, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true}},
      {"max_dilated_3x2",
       {1, 12, 14, 16},
       Pool2d{PoolKind::max, 3, 2, 1, 2, 0, 1, 0, 1, 2, 2, false, false}},
      {"global_avg", {1, 7, 7, 2048}, GlobalPool{PoolKind::avg}},
      {"global_max_batch2", {2, 5, 9, 40}, GlobalPool{PoolKind::max}},
      {"global_avg_large", {1, 56, 56, 24}, GlobalPool{PoolKind::avg}},
  };
}

graph::Graph pool_graph(const PoolCase& c) {
  graph::GraphBuilder b;
  b.output(b.op("pool", c.op, {b.input("x", c.shape, Layout::nhwc)}));
  return b.finish();
}

class GeneratedPool : public testing::TestWithParam<PoolCase> {};

TEST_P(GeneratedPool, MatchesReferenceOnEveryCpuTarget) {
  expect_generated_matches_reference(pool_graph(GetParam()), -3.0f, 3.0f, 1e-5, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Pools, GeneratedPool, testing::ValuesIn(pool_cases()),
                         [](const testing::TestParamInfo<PoolCase>& i) { return i.param.name; });

// MatMul of a 4-D tensor by a matrix (a channels-last linear layer), generated as the 1x1
// convolution it is: wide, small-and-deep, and fewer output columns than a vector; the matrix
// a constant or a graph input.
struct MatMulCase {
  std::string name;
  Shape a, b;
  bool b_constant;
};
void PrintTo(const MatMulCase& c, std::ostream* os) { *os << c.name; }

std::vector<MatMulCase> matmul_cases() {
  return {{"convnext_mlp", {1, 14, 14, 48}, {48, 192}, true},
          {"small_deep", {1, 4, 4, 256}, {256, 64}, true},
          {"odd_narrow_runtime_matrix", {2, 5, 7, 13}, {13, 10}, false}};
}

graph::Graph matmul_graph(const MatMulCase& c) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("a", c.a, Layout::any);
  const graph::ValueId w =
      c.b_constant
          ? b.constant("b", c.b, graph::random_uniform(graph::num_elements(c.b), -0.3f, 0.3f, 51))
          : b.input("b", c.b, Layout::any);
  b.output(b.op("matmul", graph::MatMul{}, {x, w}));
  return b.finish();
}

class GeneratedMatMul : public testing::TestWithParam<MatMulCase> {};

TEST_P(GeneratedMatMul, MatchesReferenceOnEveryCpuTarget) {
  expect_generated_matches_reference(matmul_graph(GetParam()), -1.0f, 1.0f, 1e-4, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(MatMuls, GeneratedMatMul, testing::ValuesIn(matmul_cases()),
                         [](const testing::TestParamInfo<MatMulCase>& i) { return i.param.name; });

// Data movement, reductions and products: one node each, its inputs graph inputs (so the
// kernel reads them at run time) or constants.
struct OpCase {
  std::string name;
  graph::Op op;
  std::vector<Shape> inputs;
  Layout layout = Layout::any;  // of the first input
  std::vector<bool> constant = {};  // per input; default: none
  double rtol = 1e-5, atol = 1e-6;  // products: fp32 sums against the reference's doubles
};
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

std::vector<OpCase> op_cases() {
  using graph::Gemm;
  return {
      {"gemm_fc_transposed_b_bias", Gemm{false, true, 1.0f, 1.0f}, {{1, 512}, {1000, 512}, {1000}},
       Layout::any, {false, true, true}, 1e-4, 1e-4},
      {"gemm_batch_3_odd", Gemm{false, false, 1.0f, 1.0f}, {{3, 37}, {37, 21}, {1, 21}}, Layout::any, {}, 1e-4, 1e-4},
      {"gemm_transposed_a_row_bias_scaled", Gemm{true, false, 0.5f, 2.0f}, {{19, 6}, {19, 40}, {6, 1}}, Layout::any, {}, 1e-4, 1e-4},
      {"gemm_both_transposed_full_bias", Gemm{true, true, 1.5f, -1.0f}, {{8, 9}, {33, 8}, {9, 33}}, Layout::any, {}, 1e-4, 1e-4},
      {"gemm_scalar_bias_no_vector", Gemm{false, false, 1.0f, 1.0f}, {{5, 7}, {7, 3}, {1}}, Layout::any, {}, 1e-4, 1e-4},
      {"gemm_without_bias", Gemm{false, true, 1.0f, 1.0f}, {{2, 64}, {70, 64}}, Layout::any, {}, 1e-4, 1e-4},
      {"matmul_batched_broadcast", graph::MatMul{}, {{2, 1, 5, 12}, {3, 12, 17}}, Layout::any, {}, 1e-4, 1e-4},
      {"matmul_2d", graph::MatMul{}, {{6, 40}, {40, 36}}, Layout::any, {}, 1e-4, 1e-4},
      {"transpose_nhwc_to_nchw", graph::Transpose{{0, 3, 1, 2}}, {{2, 5, 6, 19}}},
      {"transpose_rank3_reverse", graph::Transpose{{2, 1, 0}}, {{7, 3, 20}}},
      {"layout_nhwc_to_nchw", graph::LayoutTransform{Layout::nhwc, Layout::nchw}, {{1, 7, 9, 24}},
       Layout::nhwc},
      {"reshape_flatten", graph::Reshape{{2, 60}}, {{2, 3, 4, 5}}},
      {"reshape_split_inner", graph::Reshape{{4, 3, 10}}, {{12, 10}}},
      {"concat_channels_3", graph::Concat{1}, {{1, 5, 4, 3}, {1, 2, 4, 3}, {1, 9, 4, 3}}},
      {"concat_innermost", graph::Concat{2}, {{2, 3, 17}, {2, 3, 5}}},
      {"slice_steps", graph::Slice{{1, 0, 9}, {5, 6, -1}, {2, 1, -3}}, {{6, 6, 10}}},
      {"pad_and_crop", graph::Pad{{1, 0, -1, 2, 0, 3}, 0.5f}, {{3, 8, 4}}},
      {"softmax_last_axis", graph::Softmax{1, false}, {{3, 1000}}},
      {"softmax_middle_axis", graph::Softmax{1, false}, {{2, 7, 33}}},
      {"softmax_coerce_2d", graph::Softmax{1, true}, {{2, 3, 4, 5}}},
      {"reduce_mean_last_keepdims", graph::ReduceMean{{3}, true}, {{1, 9, 9, 48}}},
      {"reduce_mean_spatial_dropped", graph::ReduceMean{{2, 3}, false}, {{2, 20, 6, 7}}},
      {"reduce_mean_all", graph::ReduceMean{{}, true}, {{4, 33}}},
      {"global_avg_pool_nchw", graph::GlobalPool{graph::PoolKind::avg}, {{2, 24, 7, 9}},
       Layout::nchw},
  };
}

graph::Graph op_graph(const OpCase& c) {
  graph::GraphBuilder b;
  std::vector<graph::ValueId> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    const Layout layout = i == 0 ? c.layout : Layout::any;
    ins.push_back(i < c.constant.size() && c.constant[i]
                      ? b.constant(name, c.inputs[i],
                                   graph::random_uniform(graph::num_elements(c.inputs[i]), -0.5f,
                                                         0.5f, 70 + i),
                                   layout)
                      : b.input(name, c.inputs[i], layout));
  }
  b.output(b.op(c.name, c.op, ins));
  return b.finish();
}

class GeneratedOp : public testing::TestWithParam<OpCase> {};

TEST_P(GeneratedOp, MatchesReferenceOnEveryCpuTarget) {
  const OpCase& c = GetParam();
  expect_generated_matches_reference(op_graph(c), -3.0f, 3.0f, c.rtol, c.atol);
}

INSTANTIATE_TEST_SUITE_P(Ops, GeneratedOp, testing::ValuesIn(op_cases()),
                         [](const testing::TestParamInfo<OpCase>& i) { return i.param.name; });

// The sigmoid's vectorized exponential against the double-precision reference over the whole
// float range where the result is not yet saturated, and past it.
TEST(GeneratedKernels, SigmoidAccuracyAcrossItsRange) {
  ChainCase c{"sigmoid", {1, 200001}, Layout::any, kSigmoidOnly};
  const graph::Graph g = chain_graph(c, 3);
  ModelOptions o;
  o.generate_kernels = codegen::kernel_generator({{}, test_cache_dir(), nullptr});
  Model m(g, o);
  std::vector<float> x(200001);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -100.0f + 200.0f * static_cast<float>(i) / 200000.0f;
  ASSERT_TRUE(m.run({graph::Tensor{c.shape, c.layout, x}}));
  const float* y = m.output(0).data;
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])));
    worst = std::max(worst, std::abs(y[i] - want) / std::max(want, 1e-30));
    ASSERT_TRUE(std::isfinite(y[i])) << "x = " << x[i];
  }
  EXPECT_LT(worst, 1e-6);  // relative: Halide's float exp is exact to the last bit
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
  const std::string src = codegen::kernel_table_source(specs, "net");
  EXPECT_NE(src.find("int net_k0_argv(void**);"), std::string::npos) << src;
  EXPECT_NE(src.find("int net_k1_argv(void**);"), std::string::npos) << src;
  EXPECT_EQ(src.find("net_k2_argv"), std::string::npos) << src;
  EXPECT_NE(src.find("net_kernel_table(std::size_t* count)"), std::string::npos) << src;
  EXPECT_NE(src.find("*count = 3;"), std::string::npos) << src;
}

// Runs the single generated kernel of `g` with its GPU schedule through Halide's OpenCL backend
// (pocl runs it on the CPU) and compares with the reference. The output is poisoned first.
void expect_opencl_matches_reference(const graph::Graph& g, float lo, float hi, double rtol,
                                     double atol) {
  ModelOptions lower;
  lower.lower_only = true;
  const graph::KernelSpec spec = Model(g, lower).kernels().at(0);
  const Halide::Target target = Halide::get_host_target().with_feature(Halide::Target::OpenCL);
  codegen::KernelPipeline k = codegen::build_kernel_pipeline(spec, target);

  std::vector<graph::Tensor> ins;
  for (graph::ValueId v : g.inputs) {
    const graph::Value& val = g.value(v);
    ins.push_back({val.shape, val.layout,
                   graph::random_uniform(graph::num_elements(val.shape), lo, hi, 40 + v.index)});
  }
  const std::vector<graph::TensorDesc> args = graph::generated_kernel_arguments(spec);
  std::vector<Halide::Buffer<float>> bufs;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const graph::Value& val = g.value(args[i].value);
    const std::vector<float>* data = val.data.get();
    for (size_t j = 0; j < g.inputs.size(); ++j)
      if (g.inputs[j] == args[i].value) data = &ins[j].data;
    std::vector<int> sizes(args[i].shape.rbegin(), args[i].shape.rend());
    std::vector<float> widened;  // narrow groups' weights, as the runtime lays them out
    const auto* conv = std::get_if<graph::ConvKernelSpec>(&spec);
    const int merge = conv && i == 1 && !conv->depthwise
                          ? runtime::grouped_conv_merge(conv->groups, conv->output.shape[3])
                          : 1;
    if (merge > 1) {
      const graph::Shape& w = args[i].shape;
      widened = runtime::widen_grouped_conv_weights(data->data(), w[0], w[1], w[2], w[3],
                                                    conv->groups, merge);
      data = &widened;
      sizes[1] *= merge;
    }
    bufs.emplace_back(Halide::Buffer<float>(sizes));
    std::copy(data->begin(), data->end(), bufs.back().data());
    bufs.back().set_host_dirty();  // written through a pointer: the device copy must be made
    k.inputs[i].set(bufs.back());
  }
  const graph::Shape& out_shape = args.back().shape;
  Halide::Buffer<float> out(std::vector<int>(out_shape.rbegin(), out_shape.rend()));
  out.fill(NAN);  // poisoned: an element the kernel misses stays NaN
  k.pipeline.realize(out, target);
  out.copy_to_host();
  const graph::Tensor want = graph::run_reference(g, ins)[0];
  const std::vector<float> got(out.data(), out.data() + out.number_of_elements());
  EXPECT_LE(graph::worst_error_ratio(got, want.data, rtol, atol), 1.0);
}

// The GPU schedules (gpu_blocks / gpu_threads) executed through Halide's OpenCL backend: the
// same pipelines the CUDA objects are compiled from.
TEST(GeneratedKernels, GpuScheduleRunsThroughOpenCl) {
  for (const ChainCase& c : chain_cases()) {
    SCOPED_TRACE(c.name);
    expect_opencl_matches_reference(chain_graph(c, 21), -6.0f, 6.0f, 1e-5, 1e-6);
  }
  for (const BinaryCase& c : binary_cases()) {
    SCOPED_TRACE(c.name);
    expect_opencl_matches_reference(binary_graph(c), 0.5f, 3.0f, 1e-6, 1e-7);  // divisors > 0
  }
  for (const MatMulCase& c : matmul_cases()) {
    SCOPED_TRACE(c.name);
    expect_opencl_matches_reference(matmul_graph(c), -1.0f, 1.0f, 1e-4, 1e-5);
  }
  for (const PoolCase& c : pool_cases()) {
    SCOPED_TRACE(c.name);
    expect_opencl_matches_reference(pool_graph(c), -3.0f, 3.0f, 1e-5, 1e-6);
  }
  for (const OpCase& c : op_cases()) {
    SCOPED_TRACE(c.name);
    expect_opencl_matches_reference(op_graph(c), -3.0f, 3.0f, c.rtol, c.atol);
  }
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const graph::Graph g = conv_graph(c);
    expect_opencl_matches_reference(graph::fuse_elementwise_chains(graph::fuse_epilogues(g)), -2.0f,
                                    2.0f, 1e-4, 1e-5);
  }
}

// The CUDA objects of generated kernels, one of each kind (chain, binary, MatMul, pooling, the
// layout transform, Gemm, a batched MatMul, Concat, Softmax, ReduceMean, dense convolutions
// with and without post steps or a residual, depthwise and grouped ones): their PTX assembles
// for the H200 (sm_90).
TEST(GeneratedKernels, CudaObjectPtxAssemblesForSm90) {
  if (!ptx_util::have_ptxas()) GTEST_SKIP() << "ptxas not found (install the CUDA toolkit)";
  ModelOptions lower;
  lower.lower_only = true;
  std::vector<graph::KernelSpec> specs =
      Model(chain_graph({"cuda", {1, 14, 14, 96}, Layout::nhwc, kEveryStep}, 8), lower).kernels();
  for (const graph::Graph& g : {binary_graph(binary_cases()[1]), matmul_graph(matmul_cases()[0]),
                                pool_graph(pool_cases()[0])})
    specs.push_back(Model(g, lower).kernels().at(0));
  const std::vector<OpCase> ops = op_cases();
  for (const char* name : {"gemm_fc_transposed_b_bias", "matmul_batched_broadcast",
                           "concat_channels_3", "softmax_last_axis", "reduce_mean_last_keepdims"})
    for (const OpCase& c : ops)
      if (c.name == name) specs.push_back(Model(op_graph(c), lower).kernels().at(0));
  for (size_t c : {0, 4, 7, 10}) {  // dense + SiLU, dense + residual, depthwise, grouped
    const graph::Graph conv = conv_graph(conv_cases()[c]);
    specs.push_back(
        Model(graph::fuse_elementwise_chains(graph::fuse_epilogues(conv)), lower).kernels().at(0));
  }
  // The reference example: the layout transform and a conv with only an activation.
  const std::vector<graph::KernelSpec> example =
      Model(graph::run_passes(graph::reference_example()), lower).kernels();
  specs.insert(specs.end(), example.begin(), example.end());
  const std::filesystem::path dir = std::filesystem::path(KILN_TEST_CACHE_DIR) / "cuda_objects";
  std::filesystem::create_directories(dir);
  const auto archives = codegen::write_kernel_archives(specs, {KILN_CUDA_TARGET}, "cuda_test", dir);
  ASSERT_EQ(archives.size(), specs.size());
  for (size_t k = 0; k < archives.size(); ++k) {
    SCOPED_TRACE(graph::kernel_name(specs[k]));
    const std::vector<std::string> modules = ptx_util::extract_ptx(archives[k].string());
    ASSERT_FALSE(modules.empty()) << "no PTX in " << archives[k];
    for (size_t i = 0; i < modules.size(); ++i)
      EXPECT_EQ(
          ptx_util::assemble_sm90(
              modules[i], (dir / ("k" + std::to_string(k) + "_" + std::to_string(i))).string()),
          "");
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// A whole model on the OpenCL backend (the GPU schedules through pocl on the CPU): the layout
// transform, convs with ReLU, a residual branch, global pooling, Flatten and Gemm run as GPU
// kernels; a MatMul by a vector, which no kernel is generated for yet, runs on the host between
// them (its input copied back from the device, its output up again), and a Sigmoid after it
// runs on the device again. Outputs poisoned; compared with the unfused reference.
TEST(GeneratedKernels, WholeModelRunsOnTheOpenClBackend) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {2, 5, 9, 11});
  auto conv = [&](const std::string& name, graph::ValueId in, int64_t ci, int64_t co, int k,
                  uint64_t seed) {
    graph::Conv2d attrs;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = k / 2;
    return b.conv2d(name, in,
                    b.constant(name + "_w", {co, ci, k, k},
                               graph::random_uniform(co * ci * k * k, -0.4f, 0.4f, seed),
                               Layout::oihw),
                    b.constant(name + "_b", {co}, graph::random_uniform(co, -0.2f, 0.2f, seed + 1)),
                    attrs);
  };
  const graph::ValueId c1 = b.relu("relu1", conv("conv1", x, 5, 24, 3, 1));
  const graph::ValueId c2 = conv("conv2", c1, 24, 24, 3, 3);
  const graph::ValueId sum = b.relu("relu2", b.op("add", graph::Binary{graph::BinaryOp::add}, {c2, c1}));
  const graph::ValueId pooled = b.op("gap", graph::GlobalPool{graph::PoolKind::avg}, {sum});
  const graph::ValueId flat = b.op("flatten", graph::Reshape{{2, 24}}, {pooled});
  const graph::ValueId fc = b.op("fc", graph::Gemm{false, true, 1.0f, 1.0f},
                                 {flat, b.constant("fc_w", {10, 24}, graph::random_uniform(240, -0.3f, 0.3f, 5)),
                                  b.constant("fc_b", {10}, graph::random_uniform(10, -0.1f, 0.1f, 6))});
  // A MatMul by a vector: no kernel is generated for it yet, so it runs on the host.
  const graph::ValueId dot = b.op("dot", graph::MatMul{},
                                  {fc, b.constant("v", {10}, graph::random_uniform(10, -1.0f, 1.0f, 7))});
  b.output(b.op("sigmoid", graph::ElementwiseChain{{{ChainStepKind::sigmoid, 0, 0}}}, {dot}));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);

  ModelOptions o;
  o.backend = Backend::opencl;
  o.generate_kernels = codegen::kernel_generator({{}, test_cache_dir(), nullptr});
  std::unique_ptr<Model> m;
  try {
    m = std::make_unique<Model>(optimized, o);
  } catch (const graph::Error& e) {
    GTEST_SKIP() << "no usable OpenCL device (install pocl-opencl-icd): " << e.what();
  }
  ASSERT_EQ(m->backend(), Backend::opencl);
  size_t portable = 0, generated = 0;
  for (const graph::KernelSpec& k : m->kernels()) (graph::is_generated(k) ? generated : portable)++;
  EXPECT_GE(portable, 1u) << "the test needs a host op between device kernels";
  EXPECT_GE(generated, 4u);
  for (uint64_t seed : {1u, 2u}) {
    const graph::Tensor in{{2, 5, 9, 11}, Layout::nchw, graph::random_uniform(990, -1.0f, 1.0f, seed)};
    const size_t nout = graph::num_elements(m->output(0).shape);
    float* out = const_cast<float*>(m->output(0).data);
    std::fill(out, out + nout, NAN);
    const Status s = m->run(std::vector<graph::Tensor>{in});
    ASSERT_TRUE(s) << s.message();
    const graph::Tensor want = graph::run_reference(input, {in})[0];
    const std::vector<float> got(m->output(0).data, m->output(0).data + nout);
    EXPECT_LE(graph::worst_error_ratio(got, want.data, 1e-4, 1e-5), 1.0)
        << "seed " << seed << ", max abs error " << graph::max_abs_diff(got, want.data);
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// ONNX's NaN semantics: max(0, NaN) is NaN. A NaN in the input must reach the output through a
// conv with fused ReLU or Clip(0, 6), max pooling, global max pooling and HardSigmoid, as it does
// in onnxruntime, on every CPU target; numbers elsewhere still match the reference. (Before the
// fix every one of these outputs had no NaN at all: the clamps were Halide's max and min, and a
// floating-point NaN test on a value computed in registers is folded away under fast math.)
TEST(GeneratedKernels, NanPropagatesThroughClampsAndMaxima) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {1, 8, 10, 10});
  auto conv = [&](const std::string& name, uint64_t seed) {
    graph::Conv2d attrs;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = 1;
    return b.conv2d(name, x,
                    b.constant(name + "_w", {16, 8, 3, 3},
                               graph::random_uniform(16 * 8 * 9, -0.3f, 0.3f, seed), Layout::oihw),
                    b.constant(name + "_b", {16}, graph::random_uniform(16, -0.2f, 0.2f, seed + 1)),
                    attrs);
  };
  graph::Pool2d pool;
  pool.kind = graph::PoolKind::max;
  pool.kernel_h = pool.kernel_w = pool.stride_h = pool.stride_w = 2;
  b.output(b.op("maxpool", pool, {b.relu("relu", conv("conv_relu", 1))}));
  b.output(b.op("gmp", graph::GlobalPool{graph::PoolKind::max}, {b.clip("clip", conv("conv_clip", 3), 0.0f, 6.0f)}));
  b.output(b.op("hsig", graph::HardSigmoid{0.2f, 0.5f}, {conv("conv_hsig", 5)}));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);

  graph::Tensor in{{1, 8, 10, 10}, Layout::nchw, graph::random_uniform(800, -1.0f, 1.0f, 9)};
  in.data[3 * 100 + 4 * 10 + 5] = NAN;  // channel 3, row 4, column 5
  const std::vector<graph::Tensor> want = graph::run_reference(input, {in});
  for (const graph::Tensor& w : want) {
    size_t nans = 0;
    for (float v : w.data) nans += std::isnan(v);
    ASSERT_GT(nans, 0u) << "the reference must propagate the NaN";
  }
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!runtime::cpu_target_supported(t)) continue;
    SCOPED_TRACE(runtime::cpu_targets()[t]);
    ModelOptions o;
    o.cpu_target = t;
    o.generate_kernels = codegen::kernel_generator({{}, test_cache_dir(), nullptr});
    Model m(optimized, o);
    for (const graph::KernelSpec& k : m.kernels()) ASSERT_TRUE(graph::is_generated(k));
    ASSERT_TRUE(m.run(std::vector<graph::Tensor>{in}));
    for (size_t i = 0; i < want.size(); ++i) {
      const TensorView out = m.output(i);
      graph::Tensor got{out.shape, out.layout,
                        std::vector<float>(out.data, out.data + graph::num_elements(out.shape))};
      if (got.layout != want[i].layout) got = graph::to_layout(got, want[i].layout);
      size_t got_nans = 0, want_nans = 0;
      for (size_t j = 0; j < got.data.size(); ++j) {
        got_nans += std::isnan(got.data[j]);
        want_nans += std::isnan(want[i].data[j]);
      }
      EXPECT_EQ(got_nans, want_nans) << "output " << i << ": NaN swallowed or made up";
      EXPECT_LE(graph::worst_error_ratio(got.data, want[i].data, 1e-4, 1e-5), 1.0)
          << "output " << i << ": numbers that differ from the reference";
    }
  }
}

}  // namespace
}  // namespace kiln
