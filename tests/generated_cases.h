// The cases of the generated-kernel tests (test_generated_kernels.cpp, test_generated_gpu.cpp):
// for each kind of generated kernel, the shapes and attributes it is tested on and a one-node
// graph (or a small graph the passes fuse into one kernel) that holds it. The convolutions'
// cases are in generated_conv_cases.h, those of data movement, reductions and products in
// generated_op_cases.h. Also a builder the rewrite tests share (pointwise_relu).
#pragma once

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "generated_conv_cases.h"
#include "generated_op_cases.h"
#include "graph/builder.h"
#include "graph/ir.h"
#include "graph/reference.h"

namespace kiln::testing_util {

using graph::ChainStep;
using graph::ChainStepKind;
using graph::Layout;
using graph::Shape;

// A 1x1 convolution (seeded random OIHW weights and bias) + ReLU; `seed` advances.
inline graph::ValueId pointwise_relu(graph::GraphBuilder& b, const std::string& name,
                                     graph::ValueId x, int64_t ci, int64_t co, uint64_t& seed) {
  const float r = 1.0f / std::sqrt(static_cast<float>(ci));
  const graph::ValueId w = b.constant(name + "_w", {co, ci, 1, 1},
                                      graph::random_uniform(co * ci, -r, r, seed++), Layout::oihw);
  const graph::ValueId bias =
      b.constant(name + "_b", {co}, graph::random_uniform(co, -0.2f, 0.2f, seed++));
  return b.relu(name + "_relu", b.conv2d(name, x, w, bias, graph::Conv2d{}));
}

struct ChainCase {
  std::string name;
  Shape shape;
  Layout layout;
  std::vector<ChainStep> steps;
};

inline void PrintTo(const ChainCase& c, std::ostream* os) { *os << c.name; }

// The absolute tolerance of a chain case over inputs in [-6, 6]: 1e-6, or 2e-6 with a GELU, the
// bound GeneratedKernels.ErfAndGeluAccuracyAcrossTheirRange holds it to (the erf fit's absolute
// error, up to 6e-7, times |v| / 2 where v is near -5 and GELU(v) itself under 1e-6; measured
// 1.02e-6 through OpenCL, where nothing is contracted into a multiply-add).
inline double chain_case_atol(const ChainCase& c) {
  for (const ChainStep& s : c.steps)
    if (s.kind == graph::ChainStepKind::gelu) return 2e-6;
  return 1e-6;
}

// Every step kind, per-channel steps in both layouts, channel counts below, at and above a vector,
// odd sizes, and tensors large enough to be split over threads.
inline const std::vector<ChainStep> kEveryStep = {
    {ChainStepKind::affine, 0, 0},        {ChainStepKind::clamp, -1.0f, 2.0f},
    {ChainStepKind::leaky_relu, 0.2f, 0}, {ChainStepKind::hard_sigmoid, 0.3f, 0.4f},
    {ChainStepKind::affine, 0, 0},        {ChainStepKind::sigmoid, 0, 0},
    {ChainStepKind::hard_swish, 0, 0},    {ChainStepKind::silu, 0, 0}};
// The unary math steps (imported ONNX ops). abs first, so sqrt and log see positive values,
// some near 0; the activations end on positive values before the reciprocal.
inline const std::vector<ChainStep> kMathSteps = {{ChainStepKind::abs, 0, 0}, {ChainStepKind::sqrt, 0, 0},
                                           {ChainStepKind::log, 0, 0}, {ChainStepKind::neg, 0, 0},
                                           {ChainStepKind::exp, 0, 0}, {ChainStepKind::tanh, 0, 0}};
inline const std::vector<ChainStep> kActivationSteps = {{ChainStepKind::elu, 0.7f, 0},
                                                 {ChainStepKind::softsign, 0, 0},
                                                 {ChainStepKind::selu, 1.6732632f, 1.0507010f},
                                                 {ChainStepKind::erf, 0, 0},
                                                 {ChainStepKind::celu, 1.3f, 0},
                                                 {ChainStepKind::softplus, 0, 0},
                                                 {ChainStepKind::reciprocal, 0, 0},
                                                 {ChainStepKind::thresholded_relu, 0.1f, 0},
                                                 {ChainStepKind::mish, 0, 0}};
// 24 steps, most of which use their operand more than once (GeneratedKernels.
// LongChainsCompileInLinearSize): before each step's operand was bound once, 12 alternating ReLU
// and Sigmoid steps took 8 GB and a minute to compile. The affine steps keep the values spread.
inline std::vector<ChainStep> long_chain_steps() {
  std::vector<ChainStep> steps;
  for (int i = 0; i < 4; ++i)
    for (const ChainStep& s : std::vector<ChainStep>{{ChainStepKind::affine, 0, 0},
                                                     {ChainStepKind::leaky_relu, 0.2f, 0},
                                                     {ChainStepKind::sigmoid, 0, 0},
                                                     {ChainStepKind::affine, 0, 0},
                                                     {ChainStepKind::hard_swish, 0, 0},
                                                     {ChainStepKind::clamp, -1.0f, 4.0f}})
      steps.push_back(s);
  return steps;
}
inline const std::vector<ChainStep> kBnRelu = {{ChainStepKind::affine, 0, 0},
                                        {ChainStepKind::clamp, 0.0f, INFINITY}};
inline const std::vector<ChainStep> kSigmoidOnly = {{ChainStepKind::sigmoid, 0, 0}};

inline std::vector<ChainCase> chain_cases() {
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
      {"long_chain", {1, 6, 7, 21}, Layout::nhwc, long_chain_steps()},
      {"sign_of_shrink",
       {1, 9, 11, 40},
       Layout::nhwc,
       {{ChainStepKind::affine, 0, 0},
        {ChainStepKind::shrink, 0.5f, 0.25f},
        {ChainStepKind::sign, 0, 0}}},
      // log of the negative values is NaN: is_nan finds them (special values on every CPU
      // target: GeneratedKernels.SignShrinkIsNanIsInfOnSpecialValues).
      {"is_nan_of_log",
       {2, 5, 7, 19},
       Layout::nchw,
       {{ChainStepKind::affine, 0, 0}, {ChainStepKind::log, 0, 0}, {ChainStepKind::is_nan, 0, 0}}},
      // Kiln's own sin, cos and tan (accuracy over their range on every CPU target:
      // GeneratedKernels.SinCosTanAccuracyAcrossTheirRange); tan of values in [-1, 1], away from
      // its poles.
      {"sin_of_cos",
       {1, 9, 11, 40},
       Layout::nhwc,
       {{ChainStepKind::affine, 0, 0}, {ChainStepKind::cos, 0, 0}, {ChainStepKind::sin, 0, 0}}},
      {"tan_of_sin",
       {2, 5, 7, 19},
       Layout::nchw,
       {{ChainStepKind::sin, 0, 0}, {ChainStepKind::tan, 0, 0}}},
      // The inverses and the hyperbolic functions (accuracy over their domains on every CPU
      // target: GeneratedKernels.InverseTrigAndHyperbolicAccuracyAcrossTheirDomains), each fed
      // values inside its domain and away from its edges, where the inverses are ill-conditioned
      // (softsign of [-6, 6] is within +-6/7).
      {"asinh_of_sinh_of_atan",
       {1, 9, 11, 40},
       Layout::nhwc,
       {{ChainStepKind::affine, 0, 0},
        {ChainStepKind::atan, 0, 0},
        {ChainStepKind::sinh, 0, 0},
        {ChainStepKind::asinh, 0, 0}}},
      {"acosh_of_cosh_of_acos_of_softsign",
       {2, 5, 7, 19},
       Layout::nchw,
       {{ChainStepKind::softsign, 0, 0},
        {ChainStepKind::acos, 0, 0},
        {ChainStepKind::cosh, 0, 0},
        {ChainStepKind::acosh, 0, 0}}},
      {"atanh_of_tanh_of_asin_of_softsign",
       {1, 9, 11, 40},
       Layout::nhwc,
       {{ChainStepKind::softsign, 0, 0},
        {ChainStepKind::asin, 0, 0},
        {ChainStepKind::tanh, 0, 0},
        {ChainStepKind::atanh, 0, 0}}},
      {"gelu", {1, 9, 11, 40}, Layout::nhwc, {{ChainStepKind::gelu, 0, 0}}},
      {"gelu_tanh_after_affine",
       {2, 5, 7, 19},
       Layout::nchw,
       {{ChainStepKind::affine, 0, 0}, {ChainStepKind::gelu_tanh, 0, 0}}},
      // PRelu's per-channel slope and scale (random, of both signs: the two branches differ),
      // between per-channel affine steps, on both layouts; Mish after it.
      {"prelu_between_affines",
       {2, 5, 7, 19},
       Layout::nchw,
       {{ChainStepKind::affine, 0, 0},
        {ChainStepKind::prelu, 0, 0},
        {ChainStepKind::affine, 0, 0}}},
      {"prelu_then_mish",
       {1, 9, 11, 40},
       Layout::nhwc,
       {{ChainStepKind::prelu, 0, 0}, {ChainStepKind::mish, 0, 0}}},
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

// A graph with one ElementwiseChain node: input x, then two [C] inputs per per-channel step
// (affine: scale, shift; prelu: slope, scale).
inline graph::Graph chain_graph(const ChainCase& c, uint64_t seed) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", c.shape, c.layout);
  std::vector<graph::ValueId> ins = {x};
  const int64_t channels = c.shape.size() >= 2 ? c.shape[c.layout == Layout::nhwc ? 3 : 1] : 1;
  for (const ChainStep& s : c.steps) {
    if (!graph::per_channel_step(s.kind)) continue;
    const size_t n = static_cast<size_t>(channels);
    ins.push_back(b.constant("scale" + std::to_string(ins.size()), {channels},
                             graph::random_uniform(n, -2.0f, 2.0f, seed + ins.size())));
    ins.push_back(b.constant("shift" + std::to_string(ins.size()), {channels},
                             graph::random_uniform(n, -1.0f, 1.0f, seed + 7 * ins.size())));
  }
  b.output(b.op("chain", graph::ElementwiseChain{c.steps}, ins));
  return b.finish();
}

struct BinaryCase {
  std::string name;
  graph::BinaryOp op;
  Shape a, b;
  Layout layout;
  bool b_constant;
};
inline void PrintTo(const BinaryCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<BinaryCase> binary_cases() {
  using graph::BinaryOp;
  return {
      {"mul_nhwc_same", BinaryOp::mul, {1, 9, 11, 40}, {1, 9, 11, 40}, Layout::nhwc, false},
      {"mul_se_gate_nhwc", BinaryOp::mul, {2, 14, 14, 72}, {2, 1, 1, 72}, Layout::nhwc, false},
      {"add_per_channel_nchw", BinaryOp::add, {1, 6, 7, 9}, {1, 6, 1, 1}, Layout::nchw, true},
      {"sub_rank2_row", BinaryOp::sub, {7, 3}, {3}, Layout::any, false},
      {"div_scalar", BinaryOp::div, {1, 5, 5, 33}, {1}, Layout::nhwc, true},
      {"add_large_residual", BinaryOp::add, {1, 56, 56, 64}, {1, 56, 56, 64}, Layout::nhwc, false},
      {"mul_both_broadcast", BinaryOp::mul, {4, 1, 6}, {1, 5, 1}, Layout::any, false},
      {"max_both_broadcast", BinaryOp::max, {4, 1, 6}, {1, 5, 1}, Layout::any, false},
      {"min_per_channel_nhwc", BinaryOp::min, {1, 5, 7, 24}, {1, 1, 1, 24}, Layout::nhwc, false},
  };
}

// One Binary node; both operands are graph inputs unless b_constant.
inline graph::Graph binary_graph(const BinaryCase& c) {
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

// Pooling of NHWC tensors: ResNet's and SqueezeNet's max pools, DenseNet's average pool,
// padding counted or not, dilation, ceil_mode windows that start in the padding, and global
// pooling; channel counts below, at and above a vector.
struct PoolCase {
  std::string name;
  Shape shape;  // NHWC input
  graph::Op op;
};
inline void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<PoolCase> pool_cases() {
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
      // Windows of more than 25 taps reduce over an RDom (smaller ones are unrolled).
      {"avg_7x7_rdom_padded", {1, 9, 8, 12}, Pool2d{PoolKind::avg, 7, 7, 2, 2, 2, 3, 2, 3, 1, 1, false, false}},
      {"max_6x5_rdom", {1, 11, 10, 9}, Pool2d{PoolKind::max, 6, 5, 1, 2, 0, 0, 0, 0, 1, 1, false, false}},
      {"global_avg", {1, 7, 7, 2048}, GlobalPool{PoolKind::avg}},
      {"global_max_batch2", {2, 5, 9, 40}, GlobalPool{PoolKind::max}},
      {"global_avg_large", {1, 56, 56, 24}, GlobalPool{PoolKind::avg}},
      // Summed in bands of rows (the last band short, channels fewer than a vector), an image
      // per task, and one row alone.
      {"global_avg_odd_bands", {1, 11, 13, 5}, GlobalPool{PoolKind::avg}},
      {"global_avg_batch3", {3, 6, 5, 20}, GlobalPool{PoolKind::avg}},
      {"global_avg_one_row", {1, 1, 9, 17}, GlobalPool{PoolKind::avg}},
  };
}

inline graph::Graph pool_graph(const PoolCase& c) {
  graph::GraphBuilder b;
  b.output(b.op("pool", c.op, {b.input("x", c.shape, Layout::nhwc)}));
  return b.finish();
}

// MatMul of a 4-D tensor by a matrix (a channels-last linear layer), generated as the 1x1
// convolution it is: wide, small-and-deep, and fewer output columns than a vector; the matrix
// a constant or a graph input.
struct MatMulCase {
  std::string name;
  Shape a, b;
  bool b_constant;
};
inline void PrintTo(const MatMulCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<MatMulCase> matmul_cases() {
  return {{"convnext_mlp", {1, 14, 14, 48}, {48, 192}, true},
          {"small_deep", {1, 4, 4, 256}, {256, 64}, true},
          {"odd_narrow_runtime_matrix", {2, 5, 7, 13}, {13, 10}, false}};
}

inline graph::Graph matmul_graph(const MatMulCase& c) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("a", c.a, Layout::any);
  const graph::ValueId w =
      c.b_constant
          ? b.constant("b", c.b, graph::random_uniform(graph::num_elements(c.b), -0.3f, 0.3f, 51))
          : b.input("b", c.b, Layout::any);
  b.output(b.op("matmul", graph::MatMul{}, {x, w}));
  return b.finish();
}

}  // namespace kiln::testing_util
