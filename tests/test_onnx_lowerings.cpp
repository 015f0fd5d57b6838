// ONNX ops Kiln imports as nodes of another form (a Reduce or Softmax of a kind, chains of binary
// nodes, Reshape/Transpose rearrangements, ConvTranspose as zero insertion and a convolution, 3-D
// and Lp pooling on the 2-D pools), each checked for its structure or against its ONNX definition
// computed here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "graph/reference.h"
#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using onnx_test::attr_i;
using onnx_test::attr_ints;
using onnx_test::Dims;
using onnx_test::import;
using onnx_test::ModelBuilder;
using onnx_test::rnd;

template <typename T>
const T& op_at(const Graph& g, uint32_t i) {
  return std::get<T>(g.node(NodeId{i}).op);
}

// Each reduction is one Reduce node of its kind; ReduceSum takes its axes as an input from opset
// 13; LogSoftmax and Hardmax are Softmax nodes of their kind.
TEST(OnnxLowering, ReductionKindsAndSoftmaxKinds) {
  ModelBuilder m(13);
  m.input("x", {2, 3, 4});
  m.init_i64("axes", {1}, {-1});
  m.node("ReduceSum", {"x", "axes"}, {"sum"});
  attr_ints(m.node("ReduceLogSumExp", {"x"}, {"lse"}), "axes", {0, 2});
  attr_i(m.node("LogSoftmax", {"x"}, {"ls"}), "axis", 1);
  m.node("Hardmax", {"x"}, {"hm"});
  for (const char* o : {"sum", "lse", "ls", "hm"}) m.output(o);
  const Graph g = import(m);
  EXPECT_EQ(op_at<Reduce>(g, 0).kind, ReduceKind::sum);
  EXPECT_EQ(op_at<Reduce>(g, 0).axes, (std::vector<int>{2}));
  EXPECT_EQ(op_at<Reduce>(g, 1).kind, ReduceKind::log_sum_exp);
  EXPECT_EQ(op_at<Reduce>(g, 1).axes, (std::vector<int>{0, 2}));
  EXPECT_EQ(op_at<Softmax>(g, 2).kind, SoftmaxKind::log_softmax);
  EXPECT_EQ(op_at<Softmax>(g, 2).axis, 1);
  EXPECT_EQ(op_at<Softmax>(g, 3).kind, SoftmaxKind::hardmax);
  EXPECT_EQ(op_at<Softmax>(g, 3).axis, 2);
}

// Max, Min and Sum are chains of binary nodes, Mean the sum divided by the count; DepthToSpace
// and SpaceToDepth a Transpose between two Reshapes.
TEST(OnnxLowering, VariadicOpsAndRearrangementsLowerToExistingNodes) {
  ModelBuilder m(13);
  for (const char* in : {"a", "b", "c"}) m.input(in, {1, 8, 2, 3});
  m.node("Mean", {"a", "b", "c"}, {"mean"});
  m.node("Max", {"mean", "a"}, {"max"});
  attr_i(m.node("DepthToSpace", {"max"}, {"d2s"}), "blocksize", 2);
  attr_i(m.node("SpaceToDepth", {"d2s"}, {"y"}), "blocksize", 2);
  m.output("y");
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 10u) << dump(g);
  EXPECT_EQ(op_at<Binary>(g, 0).op, BinaryOp::add);
  EXPECT_EQ(op_at<Binary>(g, 1).op, BinaryOp::add);
  EXPECT_EQ(op_at<Binary>(g, 2).op, BinaryOp::div);
  EXPECT_EQ(op_at<Binary>(g, 3).op, BinaryOp::max);
  EXPECT_EQ(op_at<Reshape>(g, 4).shape, (Shape{1, 2, 2, 2, 2, 3}));  // DCR: [N, b, b, C', H, W]
  EXPECT_EQ(op_at<Transpose>(g, 5).perm, (std::vector<int>{0, 3, 4, 1, 5, 2}));
  EXPECT_EQ(g.value(g.node(NodeId{6}).outputs[0]).shape, (Shape{1, 2, 4, 6}));
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{1, 8, 2, 3}));
  // SpaceToDepth undoes DCR DepthToSpace: the result is `max` itself.
  const std::vector<float> a = rnd(48, 1), b = rnd(48, 2), c = rnd(48, 3);
  const std::vector<Tensor> y = run_reference(
      g, {Tensor{{1, 8, 2, 3}, Layout::nchw, a}, Tensor{{1, 8, 2, 3}, Layout::nchw, b},
          Tensor{{1, 8, 2, 3}, Layout::nchw, c}});
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_FLOAT_EQ(y[0].data[i], std::max((a[i] + b[i] + c[i]) / 3, a[i])) << i;
}

// ConvTranspose against its definition, a scatter: each input pixel adds w * x at oy = iy *
// stride + ky * dilation - pad_top (and likewise x). Strided and undilated, it is one
// convolution of the input per output phase and a DepthToSpace (then a Slice where the padding
// is no multiple of the stride): no zeros inserted. Dilated, or padded past the window, it is
// zero insertion and a convolution.
TEST(OnnxLowering, ConvTransposeMatchesItsDefinition) {
  struct Case {
    Dims x;
    int64_t groups, co_per_group, k, stride, dilation, pad_begin, pad_end, out_pad;
    bool zeros;  // inserted (for a stride above 1)
  };
  for (const Case& t :
       {Case{{1, 4, 3, 5}, 2, 3, 3, 2, 1, 1, 0, 1, false}, Case{{2, 3, 4, 4}, 1, 2, 2, 3, 2, 0, 2, 1, true},
        Case{{1, 2, 5, 3}, 1, 1, 3, 1, 1, 2, 2, 0, false}, Case{{2, 6, 3, 4}, 1, 5, 2, 2, 1, 0, 0, 0, false},
        Case{{1, 4, 2, 3}, 1, 3, 3, 3, 1, 0, 0, 0, false},
        // CenterNet's 4x4/s2 padded 1, DLA's depthwise one, a decoder's 3x3/s2 with output
        // padding, a 5x5/s2, a 4x4/s3 (taps of two phases only), padding past the window.
        Case{{1, 4, 5, 6}, 1, 3, 4, 2, 1, 1, 1, 0, false}, Case{{2, 4, 3, 5}, 4, 1, 4, 2, 1, 1, 1, 0, false},
        Case{{1, 3, 4, 3}, 1, 2, 3, 2, 1, 1, 1, 1, false}, Case{{1, 2, 4, 4}, 1, 3, 5, 2, 1, 2, 2, 1, false},
        Case{{1, 2, 3, 4}, 1, 2, 4, 3, 1, 2, 0, 2, false}, Case{{1, 2, 6, 5}, 1, 2, 3, 2, 1, 4, 0, 0, true}}) {
    SCOPED_TRACE("k " + std::to_string(t.k) + " stride " + std::to_string(t.stride) + " pads " +
                 std::to_string(t.pad_begin) + "," + std::to_string(t.pad_end) + " groups " +
                 std::to_string(t.groups));
    const int64_t n = t.x[0], ci = t.x[1], h = t.x[2], w = t.x[3], cig = ci / t.groups;
    const int64_t co = t.co_per_group * t.groups;
    auto out_size = [&](int64_t in) {
      return t.stride * (in - 1) + t.out_pad + (t.k - 1) * t.dilation + 1 - t.pad_begin - t.pad_end;
    };
    const int64_t ho = out_size(h), wo = out_size(w);
    ModelBuilder m(13);
    m.input("x", t.x);
    const std::vector<float> wt = rnd(ci * t.co_per_group * t.k * t.k, 7), bias = rnd(co, 8);
    m.init("w", {ci, t.co_per_group, t.k, t.k}, wt);
    m.init("b", {co}, bias);
    auto& node = m.node("ConvTranspose", {"x", "w", "b"}, {"y"}, "deconv");
    attr_i(node, "group", t.groups);
    attr_ints(node, "strides", {t.stride, t.stride});
    attr_ints(node, "dilations", {t.dilation, t.dilation});
    attr_ints(node, "pads", {t.pad_begin, t.pad_begin, t.pad_end, t.pad_end});
    attr_ints(node, "output_padding", {t.out_pad, t.out_pad});
    m.output("y");
    const Graph g = import(m);
    ASSERT_EQ(g.value(g.outputs[0]).shape, (Shape{n, co, ho, wo}));
    bool zeros_inserted = false;
    for (const Node& nd : g.nodes()) zeros_inserted = zeros_inserted || std::holds_alternative<Pad>(nd.op);
    if (t.stride > 1) EXPECT_EQ(zeros_inserted, t.zeros) << dump(g);
    const std::vector<float> x = rnd(n * ci * h * w, 9);
    const Tensor y = run_reference(g, {Tensor{t.x, Layout::nchw, x}})[0];
    std::vector<double> want(static_cast<size_t>(n * co * ho * wo));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t o = 0; o < co; ++o)
        for (int64_t p = 0; p < ho * wo; ++p)
          want[static_cast<size_t>((b * co + o) * ho * wo + p)] = bias[o];
    for (int64_t b = 0; b < n; ++b)
      for (int64_t c = 0; c < ci; ++c)
        for (int64_t iy = 0; iy < h; ++iy)
          for (int64_t ix = 0; ix < w; ++ix)
            for (int64_t o = 0; o < t.co_per_group; ++o)
              for (int64_t ky = 0; ky < t.k; ++ky)
                for (int64_t kx = 0; kx < t.k; ++kx) {
                  const int64_t oy = iy * t.stride + ky * t.dilation - t.pad_begin;
                  const int64_t ox = ix * t.stride + kx * t.dilation - t.pad_begin;
                  if (oy < 0 || oy >= ho || ox < 0 || ox >= wo) continue;
                  const int64_t oc = c / cig * t.co_per_group + o;
                  want[static_cast<size_t>(((b * co + oc) * ho + oy) * wo + ox)] +=
                      double{x[static_cast<size_t>(((b * ci + c) * h + iy) * w + ix)]} *
                      wt[static_cast<size_t>(((c * t.co_per_group + o) * t.k + ky) * t.k + kx)];
                }
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y.data[i], want[i], 1e-5) << i;
  }
}

// A window over the spatial axes of [N, C, spatial...] and a visitor of the input positions of
// each output position: the direct definition of pooling the tests below compare with.
struct Window {
  std::vector<int64_t> k, stride, pad_begin, pad_end;
};

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t a = s.size() - 1; a-- > 0;) st[a] = st[a + 1] * s[a + 1];
  return st;
}

// For each output element (row-major over `out`): the input values in its window inside the
// input, and the window's size.
template <typename F>
void for_each_window(const Shape& in, const Shape& out, const Window& w,
                     const std::vector<float>& x, F&& f) {
  const size_t axes = in.size() - 2;
  const std::vector<int64_t> is = strides_of(in);
  for (int64_t o = 0; o < num_elements(out); ++o) {
    std::vector<int64_t> oi(out.size());
    for (size_t a = out.size(), r = static_cast<size_t>(o); a-- > 0;)
      oi[a] = static_cast<int64_t>(r % out[a]), r /= out[a];
    std::vector<double> values;
    int64_t total = 1;
    for (size_t a = 0; a < axes; ++a) total *= w.k[a];
    for (int64_t t = 0; t < total; ++t) {
      int64_t flat = oi[0] * is[0] + oi[1] * is[1];
      bool inside = true;
      for (size_t a = axes, r = static_cast<size_t>(t); a-- > 0;) {
        const int64_t i =
            oi[a + 2] * w.stride[a] + static_cast<int64_t>(r % w.k[a]) - w.pad_begin[a];
        r /= w.k[a];
        inside = inside && i >= 0 && i < in[a + 2];
        flat += i * is[a + 2];
      }
      if (inside) values.push_back(x[static_cast<size_t>(flat)]);
    }
    f(static_cast<size_t>(o), values, total);
  }
}

// 3-D MaxPool and AveragePool (two 2-D pools) against the direct definition, with padding,
// strides and both counting rules.
TEST(OnnxLowering, Pool3dMatchesItsDefinition) {
  const Shape in = {1, 3, 5, 6, 7};
  const Window w{{3, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 1, 0}};
  Shape out = {1, 3};
  for (size_t a = 0; a < 3; ++a)
    out.push_back((in[a + 2] + w.pad_begin[a] + w.pad_end[a] - w.k[a]) / w.stride[a] + 1);
  const std::vector<float> x = rnd(num_elements(in), 41);
  for (const char* op : {"MaxPool", "AveragePool"})
    for (int include_pad : {0, 1}) {
      ModelBuilder m(13);
      m.input("x", in);
      auto& n = m.node(op, {"x"}, {"y"}, "pool");
      attr_ints(n, "kernel_shape", w.k);
      attr_ints(n, "strides", w.stride);
      attr_ints(n, "pads",
                {w.pad_begin[0], w.pad_begin[1], w.pad_begin[2], w.pad_end[0], w.pad_end[1],
                 w.pad_end[2]});
      if (std::string(op) == "AveragePool") attr_i(n, "count_include_pad", include_pad);
      m.output("y");
      const Graph g = import(m);
      ASSERT_EQ(g.value(g.outputs[0]).shape, out);
      const Tensor y = run_reference(g, {Tensor{in, Layout::any, x}})[0];
      for_each_window(in, out, w, x, [&](size_t o, const std::vector<double>& v, int64_t window) {
        double want = 0;
        if (std::string(op) == "MaxPool") {
          want = *std::max_element(v.begin(), v.end());
        } else {
          for (double e : v) want += e;
          want /= include_pad ? static_cast<double>(window) : static_cast<double>(v.size());
        }
        EXPECT_NEAR(y.data[o], want, 1e-6) << op << " include_pad " << include_pad << " at " << o;
      });
    }
}

// GlobalMaxPool and GlobalAveragePool of a 5-D input: one value per (n, c).
TEST(OnnxLowering, GlobalPool3d) {
  ModelBuilder m(13);
  m.input("x", {2, 3, 2, 3, 4});
  m.node("GlobalMaxPool", {"x"}, {"mx"}, "gmax");
  m.node("GlobalAveragePool", {"x"}, {"avg"}, "gavg");
  m.output("mx");
  m.output("avg");
  const std::vector<float> x = rnd(144, 45);
  const std::vector<Tensor> y = run_reference(import(m), {Tensor{{2, 3, 2, 3, 4}, Layout::any, x}});
  ASSERT_EQ(y[0].shape, (Shape{2, 3, 1, 1, 1}));
  ASSERT_EQ(y[1].shape, (Shape{2, 3, 1, 1, 1}));
  for (size_t nc = 0; nc < 6; ++nc) {
    const auto first = x.begin() + static_cast<std::ptrdiff_t>(nc * 24), last = first + 24;
    EXPECT_EQ(y[0].data[nc], *std::max_element(first, last));
    double sum = 0;
    for (auto it = first; it != last; ++it) sum += *it;
    EXPECT_NEAR(y[1].data[nc], sum / 24, 1e-6);
  }
}

// LpPool and GlobalLpPool against (sum |x|^p)^(1/p), 1-D to 3-D, p 1 to 3.
TEST(OnnxLowering, LpPoolMatchesItsDefinition) {
  struct Case {
    Shape in;
    Window w;
    int64_t p;
  };
  for (const Case& t : {Case{{2, 3, 9}, {{3}, {2}, {1}, {1}}, 2},
                        Case{{1, 2, 5, 6}, {{2, 3}, {1, 2}, {0, 1}, {1, 0}}, 3},
                        Case{{1, 2, 4, 3, 5}, {{2, 2, 2}, {2, 1, 2}, {0, 0, 1}, {0, 1, 0}}, 1}}) {
    const size_t axes = t.in.size() - 2;
    Shape out = {t.in[0], t.in[1]};
    for (size_t a = 0; a < axes; ++a)
      out.push_back((t.in[a + 2] + t.w.pad_begin[a] + t.w.pad_end[a] - t.w.k[a]) / t.w.stride[a] +
                    1);
    ModelBuilder m(11);
    m.input("x", t.in);
    auto& n = m.node("LpPool", {"x"}, {"y"}, "lp");
    attr_ints(n, "kernel_shape", t.w.k);
    attr_ints(n, "strides", t.w.stride);
    std::vector<int64_t> pads = t.w.pad_begin;
    pads.insert(pads.end(), t.w.pad_end.begin(), t.w.pad_end.end());
    attr_ints(n, "pads", pads);
    attr_i(n, "p", t.p);
    attr_i(m.node("GlobalLpPool", {"x"}, {"g"}, "glp"), "p", t.p);
    m.output("y");
    m.output("g");
    const Graph g = import(m);
    const std::vector<float> x = rnd(num_elements(t.in), 43);
    const std::vector<Tensor> y =
        run_reference(g, {Tensor{t.in, t.in.size() == 4 ? Layout::nchw : Layout::any, x}});
    ASSERT_EQ(y[0].shape, out);
    const double p = static_cast<double>(t.p);
    for_each_window(t.in, out, t.w, x, [&](size_t o, const std::vector<double>& v, int64_t) {
      double sum = 0;
      for (double e : v) sum += std::pow(std::fabs(e), p);
      EXPECT_NEAR(y[0].data[o], std::pow(sum, 1 / p), 1e-5) << "LpPool p " << t.p << " at " << o;
    });
    Shape global = {t.in[0], t.in[1]};
    global.resize(t.in.size(), 1);
    ASSERT_EQ(y[1].shape, global);
    const int64_t per_channel = num_elements(t.in) / (t.in[0] * t.in[1]);
    for (int64_t nc = 0; nc < t.in[0] * t.in[1]; ++nc) {
      double sum = 0;
      for (int64_t i = 0; i < per_channel; ++i)
        sum += std::pow(std::fabs(double{x[static_cast<size_t>(nc * per_channel + i)]}), p);
      EXPECT_NEAR(y[1].data[static_cast<size_t>(nc)], std::pow(sum, 1 / p), 1e-5)
          << "GlobalLpPool p " << t.p;
    }
  }
}

// LpPool with ceil_mode (opset 18): the last windows reach past the end padding and sum what they
// cover, against the definition; 1-D to 3-D.
TEST(OnnxLowering, LpPoolCeilModeMatchesItsDefinition) {
  struct Case {
    Shape in;
    Window w;
    int64_t p;
  };
  for (const Case& t : {Case{{2, 3, 8}, {{3}, {2}, {0}, {0}}, 2},
                        Case{{1, 2, 7, 6}, {{3, 2}, {2, 3}, {1, 0}, {0, 1}}, 3},
                        Case{{1, 2, 5, 4, 6}, {{2, 3, 2}, {2, 2, 3}, {0, 1, 0}, {1, 0, 0}}, 1}}) {
    const size_t axes = t.in.size() - 2;
    Shape out = {t.in[0], t.in[1]};
    for (size_t a = 0; a < axes; ++a) {
      const int64_t room = t.in[a + 2] + t.w.pad_begin[a] + t.w.pad_end[a] - t.w.k[a];
      int64_t o = (room + t.w.stride[a] - 1) / t.w.stride[a] + 1;
      if ((o - 1) * t.w.stride[a] >= t.in[a + 2] + t.w.pad_begin[a]) --o;
      out.push_back(o);
    }
    ModelBuilder m(18);
    m.input("x", t.in);
    auto& n = m.node("LpPool", {"x"}, {"y"}, "lp");
    attr_ints(n, "kernel_shape", t.w.k);
    attr_ints(n, "strides", t.w.stride);
    std::vector<int64_t> pads = t.w.pad_begin;
    pads.insert(pads.end(), t.w.pad_end.begin(), t.w.pad_end.end());
    attr_ints(n, "pads", pads);
    attr_i(n, "p", t.p);
    attr_i(n, "ceil_mode", 1);
    m.output("y");
    const Graph g = import(m);
    const std::vector<float> x = rnd(num_elements(t.in), 47);
    const std::vector<Tensor> y =
        run_reference(g, {Tensor{t.in, t.in.size() == 4 ? Layout::nchw : Layout::any, x}});
    ASSERT_EQ(y[0].shape, out);
    const double p = static_cast<double>(t.p);
    for_each_window(t.in, out, t.w, x, [&](size_t o, const std::vector<double>& v, int64_t) {
      double sum = 0;
      for (double e : v) sum += std::pow(std::fabs(e), p);
      EXPECT_NEAR(y[0].data[o], std::pow(sum, 1 / p), 1e-5) << "LpPool p " << t.p << " at " << o;
    });
  }
}

// BatchNormalization with training_mode=1 normalizes with the input's own statistics per
// channel (over the batch and the other axes; the population variance), as PyTorch's
// F.batch_norm(training=True) does; the running statistics in inputs 3 and 4 play no part in
// output 0. Batch 2 at rank 4 (a Transpose to channels first) and batch 1 at rank 3 (a weight
// standardization's [1, O, I*Kh*Kw]), both against the definition computed here.
TEST(OnnxLowering, TrainingModeBatchNormUsesTheInputsStatistics) {
  for (const Dims& shape : {Dims{2, 3, 4, 5}, Dims{1, 4, 27}}) {
    const int64_t n = shape[0], ch = shape[1],
                  inner = shape.size() == 4 ? shape[2] * shape[3] : shape[2];
    SCOPED_TRACE(testing::PrintToString(shape));
    const std::vector<float> x = rnd(n * ch * inner, 401, -2.0f, 3.0f);
    const std::vector<float> scale = rnd(ch, 402, 0.5f, 1.5f), shift = rnd(ch, 403);
    ModelBuilder m(15);
    m.input("x", shape);
    m.init("s", {ch}, scale), m.init("b", {ch}, shift);
    m.init("mu", {ch}, rnd(ch, 404)), m.init("var", {ch}, rnd(ch, 405, 0.5f, 2.0f));
    auto& bn = m.node("BatchNormalization", {"x", "s", "b", "mu", "var"},
                      {"y", "running_mean", "running_var"}, "bn");
    attr_i(bn, "training_mode", 1);
    onnx_test::attr_f(bn, "epsilon", 1e-3f);
    m.output("y");
    const Tensor y = onnx_test::run_one(m, x);
    ASSERT_EQ(y.data.size(), x.size());
    for (int64_t c = 0; c < ch; ++c) {
      double sum = 0, square_sum = 0;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) sum += x[(b * ch + c) * inner + i];
      const double mean = sum / static_cast<double>(n * inner);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i)
          square_sum += std::pow(x[(b * ch + c) * inner + i] - mean, 2);
      const double inv_std = 1.0 / std::sqrt(square_sum / static_cast<double>(n * inner) + 1e-3);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) {
          const size_t k = static_cast<size_t>((b * ch + c) * inner + i);
          EXPECT_NEAR(y.data[k], (x[k] - mean) * inv_std * scale[c] + shift[c], 1e-4)
              << c << " " << b << " " << i;
        }
    }
  }
}

// MeanVarianceNormalization over its default axes (per channel of the batch: moved last by a
// Transpose, unless the batch is 1 and the view alone does) and over others, against
// (x - mean) / (sqrt(var) + 1e-9) computed here in double.
TEST(OnnxLowering, MeanVarianceNormalizationOverAnyAxes) {
  struct Case {
    Dims shape;
    std::vector<int64_t> axes;  // empty: the attribute is absent ([0, 2, 3])
    bool transposes;
  };
  const Case cases[] = {{{2, 3, 4, 5}, {}, true},      {{1, 3, 4, 5}, {}, false},
                        {{2, 3, 4, 5}, {2, 3}, false}, {{2, 3, 4}, {1}, true},
                        {{2, 3, 4}, {-1}, false},      {{2, 3, 4, 5}, {0, 1, 2, 3}, false},
                        {{3, 1, 4}, {0}, true},        {{3, 4, 1}, {0, 2}, true}};
  uint64_t seed = 420;
  for (const Case& k : cases) {
    SCOPED_TRACE(testing::PrintToString(k.shape) + " axes " + testing::PrintToString(k.axes));
    int64_t count = 1;
    for (int64_t d : k.shape) count *= d;
    const std::vector<float> x = rnd(count, seed++, -2.0f, 3.0f);
    ModelBuilder m(13);
    m.input("x", k.shape);
    auto& node = m.node("MeanVarianceNormalization", {"x"}, {"y"}, "mvn");
    if (!k.axes.empty()) attr_ints(node, "axes", k.axes);
    m.output("y");
    const Graph g = import(m);
    bool transposes = false;
    for (const Node& n : g.nodes())
      transposes = transposes || std::holds_alternative<Transpose>(n.op);
    EXPECT_EQ(transposes, k.transposes) << dump(g);
    // Group every element by the coordinates of its kept axes; the statistics are per group.
    const size_t rank = k.shape.size();
    std::vector<bool> reduced(rank, false);
    for (int64_t a : k.axes.empty() ? std::vector<int64_t>{0, 2, 3} : k.axes)
      reduced[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(rank) : a)] = true;
    std::vector<int64_t> group(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      int64_t rest = i, key = 0, scale = 1;
      for (size_t d = rank; d-- > 0;) {
        const int64_t coord = rest % k.shape[d];
        rest /= k.shape[d];
        if (!reduced[d]) key += coord * scale, scale *= k.shape[d];
      }
      group[static_cast<size_t>(i)] = key;
    }
    std::map<int64_t, std::pair<double, double>> stats;  // sum, count -> mean; then square sum
    for (int64_t i = 0; i < count; ++i) stats[group[i]].first += x[i], stats[group[i]].second += 1;
    std::map<int64_t, double> mean, square;
    for (const auto& [key, sc] : stats) mean[key] = sc.first / sc.second;
    for (int64_t i = 0; i < count; ++i) square[group[i]] += std::pow(x[i] - mean[group[i]], 2);
    const Tensor y = onnx_test::run_one(m, x);
    ASSERT_EQ(y.data.size(), x.size());
    for (int64_t i = 0; i < count; ++i) {
      const double sd = std::sqrt(square[group[i]] / stats[group[i]].second);
      EXPECT_NEAR(y.data[i], (x[i] - mean[group[i]]) / (sd + 1e-9), 2e-5) << i;
    }
  }
  ModelBuilder twice(13);
  twice.input("x", {2, 3, 4});
  attr_ints(twice.node("MeanVarianceNormalization", {"x"}, {"y"}, "mvn"), "axes", {1, -2});
  twice.output("y");
  EXPECT_THAT(onnx_test::import_error(twice.bytes()),
              testing::HasSubstr("axes lists axis 1 twice"));
}

// PyTorch exports F.pad(x, [left, right, top, bottom]) as arithmetic on an integer pad list:
// ConstantOfShape, Concat, Reshape to [4, 2], a reversing Slice, Transpose and Reshape to 8, Cast
// (HGNetV2's and EfficientViT's exports). The Transpose of that constant folds at import, so
// Pad sees constant pads.
TEST(OnnxLowering, TransposeOfAnIntegerConstantFolds) {
  ModelBuilder m(17);
  m.input("x", {1, 2, 3, 4});
  m.init_i64("torch_pads", {4}, {1, 2, 0, 3});  // left, right, top, bottom
  m.init_i64("zeros", {4}, {0, 0, 0, 0});       // ConstantOfShape's, in the export
  attr_i(m.node("Concat", {"torch_pads", "zeros"}, {"pairs_flat"}, "concat"), "axis", 0);
  m.init_i64("pairs_shape", {2}, {-1, 2});
  m.node("Reshape", {"pairs_flat", "pairs_shape"}, {"pairs"}, "pairs");
  m.init_i64("start", {1}, {-1}), m.init_i64("stop", {1}, {std::numeric_limits<int64_t>::min()});
  m.init_i64("axis0", {1}, {0}), m.init_i64("step", {1}, {-1});
  m.node("Slice", {"pairs", "start", "stop", "axis0", "step"}, {"reversed"}, "reverse");
  attr_ints(m.node("Transpose", {"reversed"}, {"by_side"}, "transpose"), "perm", {1, 0});
  m.init_i64("flat", {1}, {-1});
  m.node("Reshape", {"by_side", "flat"}, {"pads"}, "flatten");
  m.node("Pad", {"x", "pads"}, {"y"}, "pad");
  m.output("y");
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 1u);
  const Pad& pad = op_at<Pad>(g, 0);
  // ONNX order: begins of N, C, H, W, then their ends: H gets top 0 and bottom 3, W 1 and 2.
  EXPECT_EQ(pad.pads, (std::vector<int64_t>{0, 0, 0, 1, 0, 0, 3, 2}));
}

}  // namespace
}  // namespace kiln::graph
