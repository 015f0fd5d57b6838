// Portable compute kernels against the reference interpreter, and the reference itself on
// cases small enough to check by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/reference.h"
#include "graph/shape_inference.h"
#include "runtime/ops/ops.h"

namespace kiln {
namespace {

using graph::Conv2d;
using graph::Layout;
using graph::Op;
using graph::Pool2d;
using graph::PoolKind;
using graph::Shape;
using graph::Tensor;

// One input of the node under test: shape, layout and the uniform range of its random data
// (never zeros), or explicit data.
struct In {
  Shape shape;
  Layout layout = Layout::any;
  float lo = -1.0f, hi = 1.0f;
  std::vector<float> data;
};

// A one-node graph of `op` over `ins`, with its input data.
struct Case {
  graph::Graph g;
  std::vector<Tensor> inputs;
};

Case make_case(const Op& op, const std::vector<In>& ins, uint64_t seed) {
  graph::GraphBuilder b;
  std::vector<graph::ValueId> ids;
  Case c;
  for (size_t i = 0; i < ins.size(); ++i) {
    const In& in = ins[i];
    ids.push_back(b.input("in" + std::to_string(i), in.shape, in.layout));
    const size_t n = static_cast<size_t>(graph::num_elements(in.shape));
    c.inputs.push_back(
        {in.shape, in.layout,
         in.data.empty() ? graph::random_uniform(n, in.lo, in.hi, seed + 31 * i) : in.data});
  }
  b.output(b.op("node", op, ids));
  c.g = b.finish();
  return c;
}

std::vector<runtime::ops::ConstTensorRef> refs_of(const std::vector<Tensor>& ts) {
  std::vector<runtime::ops::ConstTensorRef> refs;
  for (const Tensor& t : ts) refs.push_back({t.data.data(), t.shape, t.layout});
  return refs;
}

// Float accumulation in a different order from the double reference: relative error a few
// ulps times the (short) reduction length, plus an absolute floor for sums that cancel.
constexpr double kRtol = 1e-4, kAtol = 1e-5;

// The kernel, writing into a NaN-poisoned output, against the reference interpreter.
void check(const Op& op, const std::vector<In>& ins, uint64_t seed, double rtol = kRtol,
           double atol = kAtol) {
  const Case c = make_case(op, ins, seed);
  SCOPED_TRACE(graph::dump(c.g));
  const Tensor want = graph::run_reference(c.g, c.inputs).at(0);
  const graph::Value& out = c.g.value(c.g.outputs[0]);
  std::vector<float> got(want.data.size(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(runtime::ops::supported(op));
  ASSERT_EQ(runtime::ops::run_op(op, refs_of(c.inputs), {got.data(), out.shape, out.layout}), "");
  EXPECT_GT(graph::max_abs_diff(want.data, std::vector<float>(want.data.size(), 0.0f)), 0.0)
      << "the expected output is all zeros: the comparison proves nothing";
  EXPECT_LE(graph::worst_error_ratio(got, want.data, rtol, atol), 1.0);
}

// The output shape of `op` on `ins`, or an empty shape where shape inference rejects them
// (so only for ops whose output has rank >= 1).
Shape output_shape(const Op& op, const std::vector<In>& ins) {
  try {
    const Case c = make_case(op, ins, 0);
    return c.g.value(c.g.outputs[0]).shape;
  } catch (const graph::Error&) {
    return {};
  }
}

// The reference's output for a hand-checked case.
std::vector<float> reference(const Op& op, const std::vector<In>& ins) {
  const Case c = make_case(op, ins, 1);
  return graph::run_reference(c.g, c.inputs).at(0).data;
}

std::vector<float> iota(int64_t n, float from = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = from + static_cast<float>(i);
  return v;
}

Pool2d pool(PoolKind kind, int kh, int kw, int sh, int sw, int pt = 0, int pl = 0, int pb = 0,
            int pr = 0, int dh = 1, int dw = 1, bool ceil_mode = false, bool include_pad = false) {
  return Pool2d{kind, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, ceil_mode, include_pad};
}

// ---- the reference itself ----

TEST(ComputeReference, MaxPool2x2) {
  // 1 2 3 4 / 5 6 7 8 / 9 10 11 12 / 13 14 15 16 -> 2x2 max pool, stride 2.
  EXPECT_EQ(
      reference(pool(PoolKind::max, 2, 2, 2, 2), {{{1, 1, 4, 4}, Layout::nchw, 0, 0, iota(16)}}),
      (std::vector<float>{6, 8, 14, 16}));
}

TEST(ComputeReference, AvgPoolCornerCountIncludePad) {
  // 1..9 in a 3x3 image, 3x3 window, pad 1: the top-left window holds 1 + 2 + 4 + 5 = 12 on
  // 4 real elements of the 9 in the padded window.
  const In x{{1, 1, 3, 3}, Layout::nchw, 0, 0, iota(9)};
  EXPECT_FLOAT_EQ(reference(pool(PoolKind::avg, 3, 3, 1, 1, 1, 1, 1, 1), {x})[0], 3.0f);
  EXPECT_FLOAT_EQ(reference(pool(PoolKind::avg, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true), {x})[0],
                  12.0f / 9);
  // Max ignores the padding even where every real element is negative.
  const In neg{{1, 1, 3, 3}, Layout::nchw, 0, 0, iota(9, -20.0f)};
  EXPECT_EQ(reference(pool(PoolKind::max, 3, 3, 1, 1, 1, 1, 1, 1), {neg})[0], -16.0f);
}

TEST(ComputeReference, CeilModeWindowCountsOnlyUpToThePaddedEnd) {
  // W = 5, window 2, stride 2, ceil_mode: 3 outputs, the last window [4, 6) hangs one past
  // the input. Without end padding it counts 1 element even with count_include_pad; with one
  // column of end padding it counts 2.
  const In x{{1, 1, 1, 5}, Layout::nchw, 0, 0, {1, 2, 3, 4, 10}};
  EXPECT_EQ(reference(pool(PoolKind::avg, 1, 2, 1, 2, 0, 0, 0, 0, 1, 1, true, true), {x}),
            (std::vector<float>{1.5f, 3.5f, 10.0f}));
  EXPECT_EQ(reference(pool(PoolKind::avg, 1, 2, 1, 2, 0, 0, 0, 1, 1, 1, true, true), {x}),
            (std::vector<float>{1.5f, 3.5f, 5.0f}));
  EXPECT_EQ(reference(pool(PoolKind::avg, 1, 2, 1, 2, 0, 0, 0, 1, 1, 1, true, false), {x}),
            (std::vector<float>{1.5f, 3.5f, 10.0f}));
}

TEST(ComputeReference, GemmAgainstTripleLoop) {
  const int64_t m = 3, k = 4, n = 5;
  const graph::Gemm attrs{true, true, 0.5f, 2.0f};
  const In a{{k, m}, Layout::any, 0, 0, graph::random_uniform(k * m, -1, 1, 7)};
  const In b{{n, k}, Layout::any, 0, 0, graph::random_uniform(n * k, -1, 1, 8)};
  const In c{{m, 1}, Layout::any, 0, 0, graph::random_uniform(m, -1, 1, 9)};
  const std::vector<float> got = reference(attrs, {a, b, c});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t q = 0; q < k; ++q) acc += double{a.data[q * m + i]} * b.data[j * k + q];
      EXPECT_NEAR(got[i * n + j], 0.5 * acc + 2.0 * c.data[i], 1e-6) << i << "," << j;
    }
}

TEST(ComputeReference, DepthwiseConvWithResidualAndClamp) {
  // Two channels, 1x1 depthwise weights (2, -1), bias (0.5, 0), residual 1, clamped to [0, 6].
  Conv2d attrs;
  attrs.groups = 2;
  attrs.residual = true;
  attrs.activation = {0.0f, 6.0f};
  const std::vector<float> got =
      reference(attrs, {{{1, 2, 1, 2}, Layout::nchw, 0, 0, {1, 3, 1, 4}},
                        {{2, 1, 1, 1}, Layout::oihw, 0, 0, {2, -1}},
                        {{2}, Layout::any, 0, 0, {0.5f, 0}},
                        {{1, 2, 1, 2}, Layout::nchw, 0, 0, {1, 1, 1, 1}}});
  EXPECT_EQ(got, (std::vector<float>{3.5f, 6.0f, 0.0f, 0.0f}));
}

TEST(ComputeReference, MatMulVectors) {
  // [K] x [K] is a dot product with a rank-0 result; [K] x [K, N] a row times a matrix.
  const In v{{3}, Layout::any, 0, 0, {1, 2, 3}};
  EXPECT_EQ(reference(graph::MatMul{}, {v, {{3}, Layout::any, 0, 0, {4, 5, 6}}}),
            (std::vector<float>{32}));
  EXPECT_EQ(reference(graph::MatMul{}, {v, {{3, 2}, Layout::any, 0, 0, {1, 2, 3, 4, 5, 6}}}),
            (std::vector<float>{22, 28}));
}

TEST(ComputeReference, BatchNormRank2) {
  // x = [[1, 2]], scale (2, 1), bias (0, 1), mean (1, 0), var (3, 0) with eps 1: per channel
  // (x - mean) * scale / sqrt(var + eps) + bias.
  const std::vector<float> got =
      reference(graph::BatchNorm{1.0f}, {{{1, 2}, Layout::any, 0, 0, {1, 2}},
                                         {{2}, Layout::any, 0, 0, {2, 1}},
                                         {{2}, Layout::any, 0, 0, {0, 1}},
                                         {{2}, Layout::any, 0, 0, {1, 0}},
                                         {{2}, Layout::any, 0, 0, {3, 0}}});
  EXPECT_EQ(got, (std::vector<float>{0.0f, 3.0f}));
}

// ---- kernels against the reference ----

struct ConvCase {
  const char* name;
  int64_t n, ci, h, w, co, kh, kw;
  Conv2d attrs;
};

Conv2d conv_attrs(int sh, int sw, int pt, int pl, int pb, int pr, int dh, int dw, int groups,
                  bool residual, graph::Activation act = {}) {
  return Conv2d{sh, sw, pt, pl, pb, pr, dh, dw, act, groups, residual};
}

const graph::Activation kRelu{0.0f, INFINITY}, kRelu6{0.0f, 6.0f};

const ConvCase kConvCases[] = {
    {"dense_3x3_residual", 1, 8, 9, 10, 12, 3, 3, conv_attrs(1, 1, 1, 1, 1, 1, 1, 1, 1, true)},
    {"dense_3x3_relu_no_residual", 2, 5, 7, 6, 7, 3, 3,
     conv_attrs(1, 1, 1, 1, 1, 1, 1, 1, 1, false, kRelu)},
    {"pointwise_residual_relu", 1, 16, 5, 7, 24, 1, 1,
     conv_attrs(1, 1, 0, 0, 0, 0, 1, 1, 1, true, kRelu)},
    {"groups2_s2_asym_pads", 2, 6, 11, 9, 10, 3, 3, conv_attrs(2, 2, 0, 1, 2, 0, 1, 1, 2, false)},
    {"groups3_odd_channels_residual", 1, 9, 7, 8, 6, 3, 2,
     conv_attrs(1, 2, 1, 0, 1, 1, 1, 1, 3, true, kRelu6)},
    {"depthwise_3x3_relu6", 1, 8, 10, 9, 8, 3, 3,
     conv_attrs(1, 1, 1, 1, 1, 1, 1, 1, 8, false, kRelu6)},
    {"depthwise_s2_dilation2_residual", 2, 5, 13, 12, 5, 3, 3,
     conv_attrs(2, 2, 2, 2, 2, 2, 2, 2, 5, true)},
    {"depthwise_multiplier2", 1, 4, 8, 7, 8, 3, 3, conv_attrs(1, 1, 1, 1, 1, 1, 1, 1, 4, false)},
    {"kernel_5x3_dilation_2x1_stride_1x3", 1, 4, 12, 13, 6, 5, 3,
     conv_attrs(1, 3, 3, 0, 1, 2, 2, 1, 1, false)},
    {"width_1_height_1", 1, 6, 1, 1, 4, 3, 3, conv_attrs(1, 1, 1, 1, 1, 1, 1, 1, 2, true)},
    // Enough channels to cross gemm_acc's k (64) and j (256) blocks in NHWC.
    {"wide_channels_blocks", 1, 80, 5, 4, 260, 1, 1, conv_attrs(1, 1, 0, 0, 0, 0, 1, 1, 1, true)},
};

TEST(ComputeOps, Conv2dBothLayouts) {
  uint64_t seed = 100;
  for (const ConvCase& c : kConvCases)
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      SCOPED_TRACE(std::string(c.name) + " " + graph::to_string(l));
      const graph::ImageDims in{c.n, c.ci, c.h, c.w};
      const graph::FilterDims f{c.co, c.ci / c.attrs.groups, c.kh, c.kw};
      const Layout wl = graph::filter_layout_for(l);
      // Weights scaled by 1/sqrt(fan-in) keep outputs O(1), as in a trained network.
      const float bound = 1.0f / std::sqrt(static_cast<float>(f.ci * f.kh * f.kw));
      std::vector<In> ins = {{graph::image_shape(in, l), l},
                             {graph::filter_shape(f, wl), wl, -bound, bound},
                             {{c.co}, Layout::any, -0.5f, 0.5f}};
      if (c.attrs.residual) {  // the residual has the output's shape
        Conv2d plain = c.attrs;
        plain.residual = false;
        ins.push_back({output_shape(plain, ins), l});
      }
      check(c.attrs, ins, seed += 10);
    }
}

TEST(ComputeOps, BatchNormAnyRank) {
  struct BnCase {
    Shape shape;
    Layout layout;
  };
  const BnCase cases[] = {{{3, 5}, Layout::any},          {{2, 3, 7}, Layout::any},
                          {{2, 4, 5, 3}, Layout::nchw},   {{2, 5, 3, 4}, Layout::nhwc},
                          {{1, 3, 2, 2, 3}, Layout::any}, {{1, 1, 1, 17}, Layout::nhwc}};
  uint64_t seed = 200;
  for (const BnCase& c : cases) {
    SCOPED_TRACE(graph::to_string(c.shape) + " " + graph::to_string(c.layout));
    const int64_t ch = c.shape[c.layout == Layout::nhwc ? 3 : 1];
    check(graph::BatchNorm{1e-3f},
          {{c.shape, c.layout},
           {{ch}, Layout::any, 0.5f, 1.5f},   // scale
           {{ch}, Layout::any, -1.0f, 1.0f},  // bias
           {{ch}, Layout::any, -1.0f, 1.0f},  // mean
           {{ch}, Layout::any, 0.1f, 2.0f}},  // variance
          seed += 10);
  }
}

struct PoolCase {
  const char* name;
  Pool2d attrs;
  int64_t n, c, h, w;
};

const PoolCase kPoolCases[] = {
    {"max_2x2_s2", pool(PoolKind::max, 2, 2, 2, 2), 2, 3, 8, 6},
    {"max_3x3_s2_p1", pool(PoolKind::max, 3, 3, 2, 2, 1, 1, 1, 1), 1, 5, 9, 11},
    {"max_3x3_s2_ceil", pool(PoolKind::max, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, true), 1, 4, 8, 9},
    {"max_dilation2_asym_pads", pool(PoolKind::max, 3, 2, 1, 2, 0, 1, 2, 0, 2, 2), 1, 3, 9, 10},
    {"avg_3x3_s1_p1_exclude_pad", pool(PoolKind::avg, 3, 3, 1, 1, 1, 1, 1, 1), 2, 3, 7, 5},
    {"avg_3x3_s1_p1_include_pad", pool(PoolKind::avg, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true), 1,
     4, 6, 6},
    {"avg_3x3_s2_p1_ceil_include_pad",
     pool(PoolKind::avg, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true), 1, 3, 8, 10},
    {"avg_3x3_s2_p1_ceil_exclude_pad",
     pool(PoolKind::avg, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, false), 1, 3, 10, 8},
    {"avg_2x3_s1x2_asym_pads_include_pad",
     pool(PoolKind::avg, 2, 3, 1, 2, 1, 0, 0, 2, 1, 1, false, true), 2, 2, 5, 9},
    {"avg_dilation2_ceil_include_pad",
     pool(PoolKind::avg, 2, 3, 3, 2, 1, 0, 1, 1, 2, 2, true, true), 1, 3, 11, 12},
    {"avg_kernel_covers_input", pool(PoolKind::avg, 7, 7, 1, 1, 1, 1, 1, 1), 1, 6, 5, 5},
    // Windows entirely in the padding (onnxruntime rejects pads >= kernel; shape inference
    // does not): avg gives 0 and max the lowest float, in both.
    {"avg_pads_wider_than_kernel", pool(PoolKind::avg, 2, 2, 2, 2, 2, 2, 2, 2), 1, 3, 4, 4},
    {"max_pads_wider_than_kernel", pool(PoolKind::max, 2, 2, 2, 2, 2, 2, 2, 2), 1, 3, 4, 4},
};

TEST(ComputeOps, Pool2dBothLayouts) {
  uint64_t seed = 300;
  for (const PoolCase& c : kPoolCases)
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      SCOPED_TRACE(std::string(c.name) + " " + graph::to_string(l));
      check(c.attrs, {{graph::image_shape({c.n, c.c, c.h, c.w}, l), l}}, seed += 10);
    }
}

TEST(ComputeOps, GlobalPoolBothLayouts) {
  const graph::ImageDims shapes[] = {{2, 5, 7, 3}, {1, 16, 1, 1}, {1, 3, 13, 11}, {1, 40, 4, 5}};
  uint64_t seed = 400;
  for (const graph::ImageDims& d : shapes)
    for (PoolKind kind : {PoolKind::avg, PoolKind::max})
      for (Layout l : {Layout::nchw, Layout::nhwc}) {
        SCOPED_TRACE(graph::to_string(graph::image_shape(d, l)) + " " + graph::to_string(l) +
                     (kind == PoolKind::max ? " max" : " avg"));
        check(graph::GlobalPool{kind}, {{graph::image_shape(d, l), l}}, seed += 10);
      }
}

TEST(ComputeOps, GemmTransposesAndBias) {
  const int64_t m = 5, k = 7, n = 6;
  const std::vector<std::vector<Shape>> c_shapes = {{},       {{n}}, {{1, n}}, {{m, 1}},
                                                    {{m, n}}, {{1}}, {Shape{}}};
  uint64_t seed = 500;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const std::vector<Shape>& c : c_shapes) {
        SCOPED_TRACE(std::string("transA=") + (ta ? "1" : "0") + " transB=" + (tb ? "1" : "0") +
                     " C=" + (c.empty() ? "none" : graph::to_string(c[0])));
        std::vector<In> ins = {{ta ? Shape{k, m} : Shape{m, k}}, {tb ? Shape{n, k} : Shape{k, n}}};
        if (!c.empty()) ins.push_back({c[0]});
        check(graph::Gemm{ta, tb, 0.75f, -1.25f}, ins, seed += 10);
      }
}

TEST(ComputeOps, GemmAcrossBlocks) {
  // Crosses the k (64) and j (256) blocks and the dot path's row blocks, odd sizes throughout.
  const int64_t m = 33, k = 130, n = 300;
  uint64_t seed = 600;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string("transA=") + (ta ? "1" : "0") + " transB=" + (tb ? "1" : "0"));
      check(graph::Gemm{ta, tb, 1.0f, 1.0f},
            {{ta ? Shape{k, m} : Shape{m, k}}, {tb ? Shape{n, k} : Shape{k, n}}, {{n}}},
            seed += 10);
    }
}

TEST(ComputeOps, MatMulPromotionAndBroadcasting) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{7}, {7, 5}},                 // 1-D x 2-D
      {{4, 7}, {7}},                 // 2-D x 1-D
      {{9}, {9}},                    // 1-D x 1-D: rank-0 result
      {{2, 3, 4, 7}, {7, 5}},        // batched A, shared B (4-D output)
      {{4, 7}, {3, 7, 6}},           // shared A, batched B
      {{3, 1, 4, 7}, {1, 2, 7, 5}},  // both broadcast
      {{2, 4, 7}, {7}},              // batched matrix-vector
      {{7}, {2, 3, 7, 5}},           // vector times batched matrices
      {{65, 130}, {130, 270}},       // across gemm_acc's blocks
      {{2, 5, 130}, {2, 130, 1}},    // matrix-vector through dot, batched
  };
  uint64_t seed = 700;
  for (const auto& [a, b] : cases) {
    SCOPED_TRACE(graph::to_string(a) + " x " + graph::to_string(b));
    const Layout la = graph::logical_layout(a.size()), lb = graph::logical_layout(b.size());
    check(graph::MatMul{}, {{a, la}, {b, lb}}, seed += 10);
  }
}

// ---- parameter sweeps: every small combination shape inference accepts ----

TEST(ComputeOps, Pool2dParameterSweep) {
  // Odd image sizes, asymmetric kernels, strides, pads and dilations: the corner cases of
  // window clipping, ceil_mode's last window and both divisors.
  uint64_t seed = 1000;
  int checked = 0;
  for (Layout l : {Layout::nchw, Layout::nhwc})
    for (int k : {1, 2, 3})
      for (int s : {1, 2, 3})
        for (int pad : {0, 1, 2})
          for (int d : {1, 2})
            for (bool ceil_mode : {false, true})
              for (int mode = 0; mode < 3; ++mode) {  // max, avg excluding pad, avg including
                const Pool2d attrs =
                    pool(mode == 0 ? PoolKind::max : PoolKind::avg, k, 4 - k, s, 1 + s % 3, pad,
                         (pad + 1) % 3, (pad + 2) % 3, pad, d, 3 - d, ceil_mode, mode == 2);
                const std::vector<In> ins = {{graph::image_shape({1, 2, 5, 6}, l), l}};
                if (output_shape(attrs, ins).empty()) continue;
                SCOPED_TRACE("k=" + std::to_string(k) + " s=" + std::to_string(s) +
                             " pad=" + std::to_string(pad) + " d=" + std::to_string(d) +
                             (ceil_mode ? " ceil" : "") + " mode=" + std::to_string(mode));
                check(attrs, ins, ++seed);
                ++checked;
              }
  EXPECT_GT(checked, 500);
}

TEST(ComputeOps, Conv2dParameterSweep) {
  uint64_t seed = 2000;
  int checked = 0;
  for (Layout l : {Layout::nchw, Layout::nhwc})
    for (int k : {1, 2, 3})
      for (int s : {1, 2, 3})
        for (int pad : {0, 1, 2})
          for (int d : {1, 2})
            for (int groups : {1, 2, 4}) {  // 4: depthwise
              const int64_t ci = 4, co = groups == 4 ? 4 : 6;
              const bool residual = (k + s + pad) % 2 == 0;
              const Conv2d attrs = conv_attrs(s, 1 + s % 3, pad, (pad + 1) % 3, (pad + 2) % 3, pad,
                                              d, 3 - d, groups, false, kRelu6);
              const Layout wl = graph::filter_layout_for(l);
              std::vector<In> ins = {
                  {graph::image_shape({1, ci, 5, 6}, l), l, -4.0f, 4.0f},  // so ReLU6 clips
                  {graph::filter_shape({co, ci / groups, k, 4 - k}, wl), wl},
                  {{co}, Layout::any}};
              const Shape out = output_shape(attrs, ins);
              if (out.empty()) continue;
              Conv2d with = attrs;
              with.residual = residual;
              if (residual) ins.push_back({out, l});
              SCOPED_TRACE("k=" + std::to_string(k) + " s=" + std::to_string(s) +
                           " pad=" + std::to_string(pad) + " d=" + std::to_string(d) +
                           " groups=" + std::to_string(groups));
              check(with, ins, ++seed);
              ++checked;
            }
  EXPECT_GT(checked, 250);
}

// ---- validation: inconsistent buffers get a message, never an out-of-bounds access ----

// A non-empty message that says what is wrong.
void expect_error(const std::string& msg, const char* what) {
  EXPECT_NE(msg.find(what), std::string::npos) << "message: '" << msg << "'";
}

TEST(ComputeOps, RejectsInconsistentBuffers) {
  std::vector<float> buf(4096, 1.0f), out(4096);
  const float* p = buf.data();
  using runtime::ops::run_op;
  const Shape x{1, 4, 5, 5};
  const runtime::ops::ConstTensorRef xr{p, x, Layout::nchw}, bias{p, {6}};
  const runtime::ops::ConstTensorRef w{p, {6, 4, 3, 3}, Layout::oihw};
  expect_error(run_op(Conv2d{}, {xr, w, bias}, {out.data(), {1, 6, 5, 5}, Layout::nchw}),
               "the inputs give [1, 6, 3, 3]");
  Conv2d res;
  res.residual = true;
  expect_error(run_op(res, {xr, w, bias}, {out.data(), {1, 6, 3, 3}, Layout::nchw}),
               "expected 4 inputs");
  expect_error(run_op(res, {xr, w, bias, {p, {1, 6, 5, 5}, Layout::nchw}},
                      {out.data(), {1, 6, 3, 3}, Layout::nchw}),
               "residual");
  expect_error(run_op(Conv2d{}, {xr, {p, {3, 3, 4, 6}, Layout::hwio}, bias},
                      {out.data(), {1, 6, 3, 3}, Layout::nchw}),
               "weights");
  expect_error(run_op(Conv2d{}, {xr, w, {p, {5}}}, {out.data(), {1, 6, 3, 3}, Layout::nchw}),
               "bias");
  Conv2d g3;
  g3.groups = 3;
  expect_error(run_op(g3, {xr, {p, {6, 1, 3, 3}, Layout::oihw}, bias},
                      {out.data(), {1, 6, 3, 3}, Layout::nchw}),
               "groups=3");
  // The output's layout tag must agree with the input's for image ops.
  expect_error(
      run_op(pool(PoolKind::max, 2, 2, 2, 2), {xr}, {out.data(), {1, 4, 2, 2}, Layout::nhwc}),
      "the input is");
  expect_error(run_op(graph::Gemm{}, {{p, {3, 4}}, {p, {5, 6}}}, {out.data(), {3, 6}}),
               "inner dimensions differ");
  expect_error(run_op(graph::Gemm{}, {{p, {3, 4}}, {p, {4, 6}}, {p, {2, 6}}}, {out.data(), {3, 6}}),
               "does not broadcast");
  expect_error(run_op(graph::MatMul{}, {{p, {3, 4}}}, {out.data(), {3, 4}}), "expected 2 inputs");
  expect_error(run_op(graph::MatMul{}, {{p, {2, 3, 4}}, {p, {3, 4, 5}}}, {out.data(), {3, 3, 5}}),
               "batch dimensions");
  expect_error(run_op(graph::BatchNorm{},
                      {{p, {2, 3, 4}, Layout::nhwc}, {p, {4}}, {p, {4}}, {p, {4}}, {p, {4}}},
                      {out.data(), {2, 3, 4}, Layout::nhwc}),
               "must be 4-D");
  expect_error(run_op(graph::GlobalPool{}, {{p, {1, 3, 4}, Layout::nchw}}, {out.data(), {1, 3, 1}}),
               "4-D NCHW or NHWC");
  expect_error(run_op(graph::GlobalPool{}, {{p, {1, -3, 4, 4}, Layout::nchw}},
                      {out.data(), {1, 3, 1, 1}, Layout::nchw}),
               "negative");
}

TEST(ComputeOps, SupportedSet) {
  for (const Op& op : {Op{Conv2d{}}, Op{graph::BatchNorm{}}, Op{Pool2d{}}, Op{graph::GlobalPool{}},
                       Op{graph::Gemm{}}, Op{graph::MatMul{}}})
    EXPECT_TRUE(runtime::ops::supported(op)) << graph::op_name(op);
}

}  // namespace
}  // namespace kiln
