// The convolutions' cases of the generated-kernel tests (with generated_cases.h): convolutions
// with post steps, a MobileNet block's expansion fused into its depthwise convolution, and
// convolutions with their pooling fused, each with the graph that holds it.
#pragma once

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/ir.h"
#include "graph/passes/passes.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"

namespace kiln::testing_util {

using graph::Layout;

// Convolutions with post steps (Conv2d::post): dense and depthwise NHWC convs followed by an
// elementwise chain the prebuilt kernels lack, and grouped convs whatever follows them. Each is
// fused by the passes and generated for its shapes, with the schedule the AOT kernels use for
// its size (wide, deep, 1x1 in place, depthwise), or the grouped one.
enum class Tail {
  none,
  relu,
  silu,
  hard_swish,
  sigmoid,
  residual_relu_bn,
  prelu_mish,
  prelu_one,
  relu6_swish
};
struct ConvCase {
  std::string name;
  int64_t n, h, w, ci, co, k;
  int stride, pad;
  Tail tail;
  int groups = 1;  // == ci == co: depthwise
};
inline void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<ConvCase> conv_cases() {
  return {
      {"wide_3x3_silu", 1, 14, 14, 16, 32, 3, 1, 1, Tail::silu},
      {"stride2_odd_channels_hard_swish", 1, 15, 15, 24, 40, 3, 2, 1, Tail::hard_swish},
      {"pointwise_sigmoid", 1, 10, 10, 64, 48, 1, 1, 0, Tail::sigmoid},
      {"deep_7x7_silu", 1, 7, 7, 512, 64, 1, 1, 0, Tail::silu},
      // Blocked weights with a last block of 8 channels (ConvFuncs::whole_channel_blocks): the
      // deep family (ShuffleNet's 232) and the wide one (13x13, 2-vector tiles past the padding).
      {"deep_232_channels_residual_relu_bn", 1, 7, 7, 232, 232, 1, 1, 0, Tail::residual_relu_bn},
      {"wide_13x13_136_channels_relu", 1, 13, 13, 64, 136, 1, 1, 0, Tail::relu},
      {"deep_3x3_residual_relu_bn", 1, 7, 7, 128, 64, 3, 1, 1, Tail::residual_relu_bn},
      // The deep family on a 7x7 output, one tile per row: the kernel columns on the padding
      // are left out at compile time (two on each side of a 5x5 window).
      {"deep_5x5_stride2_relu", 1, 14, 14, 256, 64, 5, 2, 2, Tail::relu},
      {"batch2_odd_residual_relu_bn", 2, 9, 11, 8, 20, 3, 1, 1, Tail::residual_relu_bn},
      {"narrow_output_silu", 1, 12, 12, 8, 6, 3, 1, 1, Tail::silu},
      // Fewer channels than a vector: one masked vector by a row of pixels (Res2Net's 8-channel
      // 3x3s), the row's last tile shifted inwards, and a residual.
      {"narrow_8_channels_residual_relu_bn", 2, 9, 31, 12, 8, 3, 1, 1, Tail::residual_relu_bn},
      {"depthwise_3x3_hard_swish", 1, 14, 14, 32, 32, 3, 1, 1, Tail::hard_swish, 32},
      {"depthwise_5x5_stride2_silu", 2, 15, 15, 40, 40, 5, 2, 2, Tail::silu, 40},
      {"depthwise_3x3_odd_channels_sigmoid", 1, 9, 9, 19, 19, 3, 1, 1, Tail::sigmoid, 19},
      // Fewer channels than a vector: vectors of 8 or 4 lanes (GhostNet's 8-channel cheap
      // operations), 12 channels as two 8-lane vectors shifted inwards, a stride of 2.
      {"depthwise_8_channels_relu", 1, 13, 19, 8, 8, 3, 1, 1, Tail::relu, 8},
      {"depthwise_12_channels_stride2_silu", 2, 11, 10, 12, 12, 3, 2, 1, Tail::silu, 12},
      {"depthwise_4_channels_5x5_residual_relu_bn", 1, 9, 12, 4, 4, 5, 1, 2, Tail::residual_relu_bn,
       4},
      // ConvNeXt's 7x7 at stride 1, its taps of a row unrolled: a row narrower than the tile
      // is cut into tiles of 4 and 1, a last vector shifted inwards.
      {"depthwise_7x7_odd_width_relu", 1, 10, 13, 24, 24, 7, 1, 3, Tail::relu, 24},
      // Grouped: generated whatever follows them.
      {"grouped_32x4_relu", 1, 14, 14, 128, 128, 3, 1, 1, Tail::relu, 32},
      {"grouped_4x32_silu", 1, 10, 10, 64, 128, 3, 1, 1, Tail::silu, 4},
      {"grouped_narrow_stride2_residual_relu_bn", 2, 9, 9, 48, 48, 3, 2, 1, Tail::residual_relu_bn,
       8},
      {"grouped_1x1_odd_width", 1, 7, 13, 24, 36, 1, 1, 0, Tail::none,
       3},  // no block: own schedule
      {"grouped_24_per_group_silu", 1, 14, 14, 48, 48, 3, 1, 1, Tail::silu, 2},  // blocks of 2
      {"depthwise_multiplier_2", 1, 11, 11, 8, 16, 3, 1, 1, Tail::none, 8},
      // PRelu as the importer writes it (a per-channel slope, or one for all channels) and Mish
      // as exporters do before opset 18, x * Tanh(Softplus(x)): post steps prelu and mish, or
      // leaky_relu; dense with channels that are not whole vectors, and depthwise.
      {"dense_24_channels_prelu_mish", 1, 11, 13, 16, 24, 3, 1, 1, Tail::prelu_mish},
      {"depthwise_prelu_one_slope", 1, 9, 9, 32, 32, 3, 2, 1, Tail::prelu_one, 32},
      {"pointwise_prelu_mish", 1, 7, 7, 64, 40, 1, 1, 0, Tail::prelu_mish},
      // HardSwish as TensorFlow writes it: x * relu6(x + 3) * (1/6), one hard_swish step.
      {"wide_relu6_swish", 1, 12, 12, 16, 32, 3, 1, 1, Tail::relu6_swish},
  };
}

// The constants and window of an NHWC convolution: HWIO weights uniform in +-sqrt(3 / fan-in)
// (seed), a bias in [-0.5, 0.5) (seed + 1), symmetric padding.
struct NhwcConvParts {
  graph::ValueId w, bias;
  graph::Conv2d attrs;
};
inline NhwcConvParts nhwc_conv_parts(graph::GraphBuilder& b, int64_t k, int64_t ci, int64_t co,
                                     int groups, int stride, int pad, uint64_t seed) {
  const int64_t ci_per_group = ci / groups;
  const float bound = std::sqrt(3.0f / static_cast<float>(ci_per_group * k * k));
  NhwcConvParts p;
  p.w = b.constant("w", {k, k, ci_per_group, co},
                   graph::random_uniform(static_cast<size_t>(k * k * ci_per_group * co), -bound,
                                         bound, seed),
                   Layout::hwio);
  p.bias = b.constant("bias", {co},
                      graph::random_uniform(static_cast<size_t>(co), -0.5f, 0.5f, seed + 1));
  p.attrs.stride_h = p.attrs.stride_w = stride;
  p.attrs.pad_top = p.attrs.pad_left = p.attrs.pad_bottom = p.attrs.pad_right = pad;
  p.attrs.groups = groups;
  return p;
}

inline graph::Graph conv_graph(const ConvCase& c) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {c.n, c.h, c.w, c.ci}, Layout::nhwc);
  const NhwcConvParts p = nhwc_conv_parts(b, c.k, c.ci, c.co, c.groups, c.stride, c.pad, 31);
  graph::ValueId y = b.conv2d("conv", x, p.w, p.bias, p.attrs);
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
    case Tail::prelu_mish:
    case Tail::prelu_one: {
      // Slopes of both signs and above 1, as learned ones may be.
      const graph::ValueId slope =
          c.tail == Tail::prelu_one
              ? b.constant("slope", {1}, {0.3f})
              : b.constant("slope", {1, 1, 1, c.co},
                           graph::random_uniform(static_cast<size_t>(c.co), -0.5f, 1.5f, 37),
                           Layout::nhwc);
      const graph::ValueId pos = b.relu("pos", y);
      const graph::ValueId neg = b.clip("neg", y, -INFINITY, 0.0f);
      y = b.op("prelu", graph::Binary{graph::BinaryOp::add},
               {pos, b.op("sloped", graph::Binary{graph::BinaryOp::mul}, {neg, slope})});
      if (c.tail == Tail::prelu_one) break;
      const graph::ValueId sp =
          b.op("softplus", graph::ElementwiseChain{{{graph::ChainStepKind::softplus, 0, 0}}}, {y});
      const graph::ValueId th =
          b.op("tanh", graph::ElementwiseChain{{{graph::ChainStepKind::tanh, 0, 0}}}, {sp});
      y = b.op("mish", graph::Binary{graph::BinaryOp::mul}, {y, th});
      break;
    }
    case Tail::relu6_swish: {
      const graph::ValueId shifted =
          b.op("add3", graph::Binary{graph::BinaryOp::add}, {y, b.constant("three", {1}, {3.0f})});
      const graph::ValueId gate = b.clip("relu6", shifted, 0.0f, 6.0f);
      y = b.op("sixth", graph::Binary{graph::BinaryOp::mul},
               {b.op("times", graph::Binary{graph::BinaryOp::mul}, {y, gate}),
                b.constant("one_sixth", {1}, {1.0f / 6.0f})});
      break;
    }
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

// An inverted-residual block's expansion (1x1 convolution + activation) and the depthwise
// convolution that alone reads it (graph::fuse_expand_depthwise): the kernel computes the
// expanded rows per band of output rows. Stride 1 and 2, a 5x5 window, a batch of 2, odd
// sizes, channels that are not whole vectors, an expansion without an activation, 7x7, and
// the expansions of EfficientNet (SiLU, as exported: x * Sigmoid(x)) and MobileNetV3
// (HardSwish), which fuse as post steps (Conv2d::expand_post).
enum class ExpandActivation { relu6, none, silu, hard_swish };
struct ExpandCase {
  std::string name;
  int64_t n, h, w, ci, c, k;
  int stride, pad;
  ExpandActivation activation = ExpandActivation::relu6;  // the expansion's
};
inline void PrintTo(const ExpandCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<ExpandCase> expand_cases() {
  return {
      {"stride1", 1, 14, 13, 16, 48, 3, 1, 1},
      {"stride2_odd_height", 1, 15, 16, 24, 64, 3, 2, 1},
      {"batch2_5x5_stride2_partial_vectors", 2, 11, 9, 8, 40, 5, 2, 2},
      {"small_7x7", 1, 7, 7, 32, 96, 3, 1, 1},
      {"no_activation_odd_channels", 1, 10, 12, 6, 19, 3, 1, 1, ExpandActivation::none},
      {"silu_stride2", 1, 16, 14, 16, 48, 3, 2, 1, ExpandActivation::silu},
      {"hard_swish_5x5_odd_channels", 1, 12, 11, 8, 40, 5, 1, 2, ExpandActivation::hard_swish},
  };
}

// The block as the user gives it (NHWC, HWIO): 1x1 convolution, its activation, the depthwise
// convolution, Clip(0, 6).
inline graph::Graph expand_graph(const ExpandCase& c) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {c.n, c.h, c.w, c.ci}, Layout::nhwc);
  const NhwcConvParts e = nhwc_conv_parts(b, 1, c.ci, c.c, 1, 1, 0, 91);
  graph::ValueId y = b.conv2d("expand", x, e.w, e.bias, e.attrs);
  switch (c.activation) {
    case ExpandActivation::relu6: y = b.op("expand_clip", graph::Clip{0.0f, 6.0f}, {y}); break;
    case ExpandActivation::none: break;
    case ExpandActivation::silu:
      y = b.op("expand_silu", graph::Binary{graph::BinaryOp::mul},
               {y, b.op("expand_sigmoid", graph::Sigmoid{}, {y})});
      break;
    case ExpandActivation::hard_swish: y = b.op("expand_hard_swish", graph::HardSwish{}, {y}); break;
  }
  const NhwcConvParts d = nhwc_conv_parts(b, c.k, c.c, c.c, static_cast<int>(c.c), c.stride, c.pad, 93);
  y = b.conv2d("depthwise", y, d.w, d.bias, d.attrs);
  b.output(b.op("clip", graph::Clip{0.0f, 6.0f}, {y}));
  return b.finish();
}

// The block fused into one kernel, whatever its shapes (fuse_expand_depthwise_everywhere).
inline graph::Graph expand_fused_graph(const graph::Graph& block) {
  graph::PipelineOptions until_last;
  until_last.stop_after = "fuse_conv_pooling";
  return graph::fuse_expand_depthwise_everywhere(graph::run_passes(block, until_last));
}

// Convolution `name`_conv of NCHW `x` as the user would give it: OIHW weights `name`_w uniform
// in +-sqrt(3 / fan-in) (seed), a bias `name`_b in [-0.5, 0.5) (seed + 1), symmetric padding.
inline graph::ValueId nchw_conv(graph::GraphBuilder& b, const std::string& name, graph::ValueId x,
                                int64_t ci, int64_t co, int64_t k, int stride, int pad, int groups,
                                uint64_t seed) {
  const int64_t ci_per_group = ci / groups;
  const float bound = std::sqrt(3.0f / static_cast<float>(ci_per_group * k * k));
  const graph::ValueId w = b.constant(
      name + "_w", {co, ci_per_group, k, k},
      graph::random_uniform(static_cast<size_t>(co * ci_per_group * k * k), -bound, bound, seed),
      Layout::oihw);
  const graph::ValueId bias =
      b.constant(name + "_b", {co}, graph::random_uniform(static_cast<size_t>(co), -0.5f, 0.5f, seed + 1));
  graph::Conv2d attrs;
  attrs.stride_h = attrs.stride_w = stride;
  attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = pad;
  attrs.groups = groups;
  return b.conv2d(name + "_conv", x, w, bias, attrs);
}

// A convolution whose output only a pooling reads (graph::fuse_conv_pooling): the kernel pools
// bands of the convolution's rows in cache (the wide schedule), or the whole output first (every
// other schedule). ResNet's stem (7x7/s2 on an NCHW RGB input read in place, then max 3x3/s2
// pad 1), Inception's 1x1 conv read in place then max 3x3/s2 unpadded (the last band shifts
// inwards), an average pool counting the padding with ceil_mode, a 2x2/s2 max pool after a
// residual + ReLU, and convolutions that take the deep, Winograd, depthwise and grouped
// schedules.
struct ConvPoolCase {
  std::string name;
  int64_t n, h, w, ci, co, k;
  int stride, pad, groups;
  bool nchw_input, residual;
  graph::Pool2d pool;
};
inline void PrintTo(const ConvPoolCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<ConvPoolCase> conv_pool_cases() {
  using graph::Pool2d;
  using graph::PoolKind;
  const Pool2d max3s2p1{PoolKind::max, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false};
  const Pool2d max3s2{PoolKind::max, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, false, false};
  return {
      {"stem_7x7_s2_nchw_max", 1, 45, 38, 3, 24, 7, 2, 3, 1, true, false, max3s2p1},
      {"pointwise_in_place_max", 1, 23, 19, 16, 32, 1, 1, 0, 1, false, false, max3s2},  // 11 rows
      // An odd number of rows: the last window reaches the padding below (Xception's blocks).
      {"pointwise_odd_rows_padded_max", 1, 21, 18, 16, 32, 1, 1, 0, 1, false, false, max3s2p1},
      {"avg_include_pad_ceil", 2, 17, 15, 8, 20, 3, 1, 1, 1, false, false,
       Pool2d{PoolKind::avg, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true}},
      {"residual_relu_max_2x2", 1, 16, 18, 16, 16, 3, 1, 1, 1, false, true,
       Pool2d{PoolKind::max, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, false, false}},
      {"deep_7x7_max", 1, 7, 7, 256, 32, 3, 1, 1, 1, false, false, max3s2p1},
      {"winograd_14x14_max", 1, 14, 14, 64, 64, 3, 1, 1, 1, false, false, max3s2p1},
      {"depthwise_max", 1, 14, 13, 24, 24, 3, 1, 1, 24, false, false, max3s2p1},
      {"grouped_narrow_max", 1, 12, 12, 32, 32, 3, 1, 1, 8, false, false, max3s2},
  };
}

// One graph of all the cases side by side (each conv + ReLU + pool on its own input), as the
// user would give it: NCHW, OIHW weights. The passes fuse every pooling into its convolution.
inline graph::Graph conv_pool_graph(const std::vector<ConvPoolCase>& cases) {
  graph::GraphBuilder b;
  uint64_t seed = 70;
  for (const ConvPoolCase& c : cases) {
    const graph::ValueId x = b.input(c.name + "_x", {c.n, c.ci, c.h, c.w});
    graph::ValueId y = nchw_conv(b, c.name, x, c.ci, c.co, c.k, c.stride, c.pad, c.groups, seed);
    if (c.residual) {
      const graph::ValueId r = b.input(c.name + "_r", {c.n, c.co, c.h, c.w});
      y = b.op(c.name + "_add", graph::Binary{graph::BinaryOp::add}, {y, r});
    }
    y = b.relu(c.name + "_relu", y);
    b.output(b.op(c.name + "_pool", c.pool, {y}));
    seed += 10;
  }
  return b.finish();
}

// One case as the fused node alone (NHWC input, HWIO weights, ReLU unless `relu` is false,
// Conv2d::pool set): a single kernel, for the GPU tests. The residual is left out.
inline graph::Graph conv_pool_nhwc_graph(const ConvPoolCase& c, bool relu = true) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {c.n, c.h, c.w, c.ci}, Layout::nhwc);
  NhwcConvParts p = nhwc_conv_parts(b, c.k, c.ci, c.co, c.groups, c.stride, c.pad, 81);
  if (relu) p.attrs.activation = graph::Activation{0.0f};
  p.attrs.pool = c.pool;
  b.output(b.op("conv", p.attrs, {x, p.w, p.bias}));
  return b.finish();
}

// A pooling whose output only a 1x1 convolution reads (graph::fuse_pooling_into_conv): the
// kernel pools its input as it stages it (Conv2d::pool_first). Inception's pooling branch (3x3/s1
// average counting the padding, then a 1x1 with BatchNorm and ReLU), GoogLeNet's (the same with
// a max pooling), Keras's "same" average pooling (the padding not counted), a ResNet-D shortcut
// (2x2/s2 average with ceil_mode over an odd image, the pooling's last window partly outside),
// a 5x5 max pooling of two images with fewer channels than a vector, and two that must stay
// apart: a pooling that a second op reads as well, and one before a 3x3 convolution.
struct PoolConvCase {
  std::string name;
  int64_t n, h, w, ci, co, k;
  graph::Pool2d pool;
  bool fused;  // whether the passes put the pooling into the convolution
};
inline void PrintTo(const PoolConvCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<PoolConvCase> pool_conv_cases() {
  using graph::Pool2d;
  using graph::PoolKind;
  const Pool2d avg3_include{PoolKind::avg, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true};
  return {
      {"inception_avg_3x3", 1, 17, 15, 40, 32, 1, avg3_include, true},
      {"googlenet_max_3x3", 1, 14, 13, 24, 16, 1,
       Pool2d{PoolKind::max, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false}, true},
      {"keras_same_avg_3x3", 1, 9, 11, 32, 48, 1,
       Pool2d{PoolKind::avg, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false}, true},
      {"resnet_d_avg_2x2_s2_ceil", 1, 15, 13, 32, 64, 1,
       Pool2d{PoolKind::avg, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, true, false}, true},
      {"batch2_max_5x5_narrow", 2, 10, 9, 12, 20, 1,
       Pool2d{PoolKind::max, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, false, false}, true},
      {"read_twice_avg_3x3", 1, 12, 12, 16, 16, 1, avg3_include, false},
      {"before_3x3_conv", 1, 12, 10, 16, 16, 3, avg3_include, false},
  };
}

// One graph of all the cases side by side, as the user would give it: NCHW, a pooling, an OIHW
// convolution (padded to keep the size where it is 3x3), BatchNorm and ReLU; read_twice_* adds
// the pooled tensor to a graph output of its own.
inline graph::Graph pool_conv_graph(const std::vector<PoolConvCase>& cases) {
  graph::GraphBuilder b;
  uint64_t seed = 170;
  for (const PoolConvCase& c : cases) {
    const graph::ValueId x = b.input(c.name + "_x", {c.n, c.ci, c.h, c.w});
    const graph::ValueId pooled = b.op(c.name + "_pool", c.pool, {x});
    graph::ValueId y =
        nchw_conv(b, c.name, pooled, c.ci, c.co, c.k, 1, static_cast<int>(c.k / 2), 1, seed);
    auto vec = [&](const std::string& name, float lo, float hi, uint64_t s) {
      return b.constant(c.name + name, {c.co},
                        graph::random_uniform(static_cast<size_t>(c.co), lo, hi, s));
    };
    y = b.batch_norm(c.name + "_bn", y, vec("_g", 0.5f, 1.5f, seed + 2),
                     vec("_be", -0.2f, 0.2f, seed + 3), vec("_m", -0.1f, 0.1f, seed + 4),
                     vec("_v", 0.5f, 1.5f, seed + 5));
    b.output(b.relu(c.name + "_relu", y));
    if (c.name.rfind("read_twice", 0) == 0) b.output(b.relu(c.name + "_second", pooled));
    seed += 10;
  }
  return b.finish();
}

// One case as the fused node alone (NHWC input, HWIO weights, ReLU, Conv2d::pool_first): a
// single kernel, for the GPU tests.
inline graph::Graph pool_conv_nhwc_graph(const PoolConvCase& c) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {c.n, c.h, c.w, c.ci}, Layout::nhwc);
  NhwcConvParts p = nhwc_conv_parts(b, c.k, c.ci, c.co, 1, 1, 0, 181);
  p.attrs.activation = graph::Activation{0.0f};
  p.attrs.pool = c.pool;
  p.attrs.pool_first = true;
  b.output(b.op("conv", p.attrs, {x, p.w, p.bias}));
  return b.finish();
}

// A convolution whose output only a Resize reads (graph::fuse_conv_resize): the kernel computes
// the convolution whole, then the resize. Interpolating resizes read NCHW, so they fuse through
// the transform back to NCHW (Conv2d::nchw_output); nearest ones fuse where they lie, NHWC.
// A segmentation head (1x1, 21 classes, bilinear x8 as torchvision's exports write it), bilinear
// x2 with align_corners after a padded 3x3 of two images, cubic x2 after a Winograd-class 3x3,
// bilinear downsampling after a depthwise convolution, and nearest upsamplings (a feature
// pyramid's x2 after a 1x1; x3 with rounding up after a grouped convolution).
struct ConvResizeCase {
  std::string name;
  int64_t n, h, w, ci, co, k;
  int pad, groups;
  graph::ResizeMode mode;
  graph::ResizeCoordinates coordinates;
  graph::NearestRounding nearest;
  float scale;
};
inline void PrintTo(const ConvResizeCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<ConvResizeCase> conv_resize_cases() {
  using graph::NearestRounding;
  using graph::ResizeCoordinates;
  using graph::ResizeMode;
  const NearestRounding floor = NearestRounding::floor;
  return {
      {"head_1x1_linear_x8", 1, 30, 40, 32, 21, 1, 0, 1, ResizeMode::linear,
       ResizeCoordinates::pytorch_half_pixel, floor, 8.0f},
      {"linear_x2_align_corners", 2, 13, 11, 16, 24, 3, 1, 1, ResizeMode::linear,
       ResizeCoordinates::align_corners, floor, 2.0f},
      {"winograd_cubic_x2", 1, 14, 14, 64, 64, 3, 1, 1, ResizeMode::cubic,
       ResizeCoordinates::half_pixel, floor, 2.0f},
      {"depthwise_linear_half", 1, 16, 18, 24, 24, 3, 1, 24, ResizeMode::linear,
       ResizeCoordinates::half_pixel, floor, 0.5f},
      {"pyramid_nearest_x2", 1, 10, 12, 24, 16, 1, 0, 1, ResizeMode::nearest,
       ResizeCoordinates::asymmetric, floor, 2.0f},
      {"grouped_nearest_x3", 1, 7, 9, 16, 32, 3, 1, 4, ResizeMode::nearest,
       ResizeCoordinates::half_pixel, NearestRounding::round_prefer_ceil, 3.0f},
  };
}

// Case c's Resize of a [N, C, H, W] tensor (`channel_axis` 1), or of its NHWC form (3): H and W
// scaled by c.scale, sizes rounded down as ONNX does.
inline graph::Resize conv_resize_attrs(const ConvResizeCase& c, size_t channel_axis) {
  graph::Resize r;
  r.mode = c.mode;
  r.coordinates = c.coordinates;
  r.nearest = c.nearest;
  const size_t h = channel_axis == 1 ? 2 : 1;
  r.sizes = channel_axis == 1 ? graph::Shape{c.n, c.co, c.h, c.w} : graph::Shape{c.n, c.h, c.w, c.co};
  r.scales = {1.0f, 1.0f, 1.0f, 1.0f};
  for (size_t a : {h, h + 1}) {
    r.scales[a] = c.scale;
    r.sizes[a] = static_cast<int64_t>(std::floor(static_cast<float>(r.sizes[a]) * c.scale));
  }
  return r;
}

// One graph of all the cases side by side (each conv + ReLU + Resize on its own input, the
// resized tensor a graph output), as the user would give it: NCHW, OIHW weights.
inline graph::Graph conv_resize_graph(const std::vector<ConvResizeCase>& cases) {
  graph::GraphBuilder b;
  uint64_t seed = 170;
  for (const ConvResizeCase& c : cases) {
    const graph::ValueId x = b.input(c.name + "_x", {c.n, c.ci, c.h, c.w});
    const graph::ValueId y =
        b.relu(c.name + "_relu", nchw_conv(b, c.name, x, c.ci, c.co, c.k, 1, c.pad, c.groups, seed));
    b.output(b.op(c.name + "_resize", conv_resize_attrs(c, 1), {y}));
    seed += 10;
  }
  return b.finish();
}

// One case as the fused node alone (NHWC input, HWIO weights, no activation, Conv2d::resize
// set; an NCHW output unless the resize is nearest): a single kernel, for the GPU tests.
inline graph::Graph conv_resize_nhwc_graph(const ConvResizeCase& c) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {c.n, c.h, c.w, c.ci}, Layout::nhwc);
  NhwcConvParts p = nhwc_conv_parts(b, c.k, c.ci, c.co, c.groups, 1, c.pad, 181);
  p.attrs.nchw_output = c.mode != graph::ResizeMode::nearest;
  p.attrs.resize = conv_resize_attrs(c, p.attrs.nchw_output ? 1 : 3);
  b.output(b.op("conv", p.attrs, {x, p.w, p.bias}));
  return b.finish();
}

}  // namespace kiln::testing_util
