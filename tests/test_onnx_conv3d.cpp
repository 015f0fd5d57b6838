// 3-D Conv and ConvTranspose, imported as 2-D convolutions over the depth-gathered input
// (graph/onnx/ops_conv3d.cpp), against their ONNX definitions computed here in double precision
// through the reference interpreter; the import's structure; the refusals that remain.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>

#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using onnx_test::attr_i;
using onnx_test::attr_ints;
using onnx_test::attr_s;
using onnx_test::Dims;
using onnx_test::import;
using onnx_test::import_error;
using onnx_test::ModelBuilder;
using onnx_test::rnd;

using A3 = std::array<int64_t, 3>;

struct Conv3dCase {
  Dims x;  // [N, C, D, H, W]
  int64_t co, groups;
  A3 k, stride, dilation, pad_begin, pad_end;
  std::string auto_pad;  // "" for explicit pads
  bool bias;
};

// The ONNX Conv definition: y[n, m, o...] = b[m] + sum over the group's channels c and taps t of
// x[n, c, o * stride + t * dilation - pad_begin] * w[m, c, t] (zero outside the input).
std::vector<double> conv3d_definition(const Dims& xd, const std::vector<float>& x, const Dims& wd,
                                      const std::vector<float>& w, const std::vector<float>& b,
                                      int64_t groups, const A3& s, const A3& dl, const A3& pb,
                                      const Dims& yd) {
  std::vector<double> y(static_cast<size_t>(num_elements(yd)));
  const int64_t cig = wd[1], cog = wd[0] / groups;
  size_t at = 0;
  for (int64_t n = 0; n < yd[0]; ++n)
    for (int64_t m = 0; m < yd[1]; ++m)
      for (int64_t od = 0; od < yd[2]; ++od)
        for (int64_t oh = 0; oh < yd[3]; ++oh)
          for (int64_t ow = 0; ow < yd[4]; ++ow, ++at) {
            double acc = b.empty() ? 0.0 : b[static_cast<size_t>(m)];
            for (int64_t c = 0; c < cig; ++c)
              for (int64_t kd = 0; kd < wd[2]; ++kd)
                for (int64_t kh = 0; kh < wd[3]; ++kh)
                  for (int64_t kw = 0; kw < wd[4]; ++kw) {
                    const int64_t id = od * s[0] + kd * dl[0] - pb[0];
                    const int64_t ih = oh * s[1] + kh * dl[1] - pb[1];
                    const int64_t iw = ow * s[2] + kw * dl[2] - pb[2];
                    if (id < 0 || id >= xd[2] || ih < 0 || ih >= xd[3] || iw < 0 || iw >= xd[4])
                      continue;
                    const int64_t ci = m / cog * cig + c;
                    acc += double{x[static_cast<size_t>(
                               (((n * xd[1] + ci) * xd[2] + id) * xd[3] + ih) * xd[4] + iw)]} *
                           w[static_cast<size_t>(
                               (((m * cig + c) * wd[2] + kd) * wd[3] + kh) * wd[4] + kw)];
                  }
            y[at] = acc;
          }
  return y;
}

std::vector<Conv3dCase> conv3d_cases() {
  return {
      {{1, 2, 4, 5, 6}, 3, 1, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, "", true},
      {{2, 4, 5, 6, 5}, 6, 2, {2, 3, 1}, {2, 1, 2}, {1, 2, 1}, {1, 0, 0}, {0, 2, 1}, "", true},
      {{2, 3, 6, 4, 4}, 3, 3, {3, 1, 3}, {1, 1, 1}, {2, 1, 1}, {0, 0, 0}, {0, 0, 0}, "", false},
      {{1, 4, 7, 5, 5}, 4, 1, {3, 2, 2}, {3, 2, 1}, {1, 1, 1}, {}, {}, "SAME_UPPER", true},
      {{1, 2, 5, 5, 4}, 2, 1, {2, 2, 3}, {2, 2, 2}, {1, 1, 1}, {}, {}, "SAME_LOWER", true},
      {{2, 2, 3, 4, 4}, 5, 1, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {}, {}, "VALID", false},
      {{1, 6, 4, 3, 3}, 12, 6, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, {1, 0, 0}, "", true},
      {{2, 3, 1, 5, 5}, 4, 1, {1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, "", true},
  };
}

// The model of one case, its weights and bias, and the padding the definition uses.
struct Built {
  ModelBuilder m{13};
  Dims wd;
  std::vector<float> w, b;
  A3 pb{0, 0, 0};
  Dims yd;
};

Built build_conv3d(const Conv3dCase& t, uint64_t seed) {
  Built r;
  r.m.input("x", t.x);
  r.wd = {t.co, t.x[1] / t.groups, t.k[0], t.k[1], t.k[2]};
  r.w = rnd(num_elements(r.wd), seed, -0.5f, 0.5f);
  r.m.init("w", r.wd, r.w);
  std::vector<std::string> in = {"x", "w"};
  if (t.bias) {
    r.b = rnd(t.co, seed + 1);
    r.m.init("b", {t.co}, r.b);
    in.push_back("b");
  }
  auto& n = r.m.node("Conv", in, {"y"}, "conv3d");
  attr_i(n, "group", t.groups);
  attr_ints(n, "kernel_shape", {t.k[0], t.k[1], t.k[2]});
  attr_ints(n, "strides", {t.stride[0], t.stride[1], t.stride[2]});
  attr_ints(n, "dilations", {t.dilation[0], t.dilation[1], t.dilation[2]});
  r.yd = {t.x[0], t.co};
  if (t.auto_pad.empty()) {
    attr_ints(
        n, "pads",
        {t.pad_begin[0], t.pad_begin[1], t.pad_begin[2], t.pad_end[0], t.pad_end[1], t.pad_end[2]});
    r.pb = t.pad_begin;
    for (size_t a = 0; a < 3; ++a)
      r.yd.push_back(
          (t.x[a + 2] + t.pad_begin[a] + t.pad_end[a] - t.dilation[a] * (t.k[a] - 1) - 1) /
              t.stride[a] +
          1);
  } else {
    attr_s(n, "auto_pad", t.auto_pad);
    for (size_t a = 0; a < 3; ++a) {
      const int64_t in_a = t.x[a + 2], span = t.dilation[a] * (t.k[a] - 1) + 1;
      if (t.auto_pad == "VALID") {
        r.yd.push_back((in_a - span) / t.stride[a] + 1);
        continue;
      }
      const int64_t out = (in_a + t.stride[a] - 1) / t.stride[a];
      const int64_t total = std::max<int64_t>(0, (out - 1) * t.stride[a] + span - in_a);
      r.pb[a] = t.auto_pad == "SAME_UPPER" ? total / 2 : (total + 1) / 2;
      r.yd.push_back(out);
    }
  }
  r.m.output("y");
  return r;
}

TEST(OnnxConv3d, MatchesItsDefinition) {
  uint64_t seed = 100;
  for (const Conv3dCase& t : conv3d_cases()) {
    SCOPED_TRACE("case x " + to_string(t.x) + " groups " + std::to_string(t.groups) + " " +
                 t.auto_pad);
    Built r = build_conv3d(t, seed += 10);
    const Graph g = import(r.m);
    ASSERT_EQ(g.value(g.outputs[0]).shape, r.yd);
    const std::vector<float> x = rnd(num_elements(t.x), seed + 5);
    const std::vector<double> want =
        conv3d_definition(t.x, x, r.wd, r.w, r.b, t.groups, t.stride, t.dilation, r.pb, r.yd);
    for (const Graph& h : {g, run_passes(g)}) {  // the import, and the optimized graph
      Tensor y = run_reference(h, {Tensor{t.x, Layout::any, x}})[0];
      if (y.layout == Layout::nhwc) y = to_layout(y, Layout::nchw);
      ASSERT_EQ(y.data.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y.data[i], want[i], 2e-5) << i;
    }
  }
}

// One 2-D convolution with C * KD input channels over [N * Do, ...]: the depth taps are a Slice
// each, joined by a Concat; a BatchNorm and a ReLU after the 3-D convolution fold and fuse into it.
TEST(OnnxConv3d, ImportsAsOneConv2dAndTakesItsEpilogue) {
  ModelBuilder m(13);
  m.input("x", {2, 3, 5, 6, 6});
  m.init("w", {4, 3, 3, 3, 3}, rnd(324, 3, -0.5f, 0.5f));
  m.init("b", {4}, rnd(4, 4));
  attr_ints(m.node("Conv", {"x", "w", "b"}, {"c"}, "conv"), "pads", {1, 1, 1, 1, 1, 1});
  m.init("scale", {4}, rnd(4, 5, 0.5f, 1.5f));
  m.init("shift", {4}, rnd(4, 6));
  m.init("mean", {4}, rnd(4, 7));
  m.init("var", {4}, rnd(4, 8, 0.5f, 2.0f));
  m.node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"bn"}, "bn");
  m.node("Relu", {"bn"}, {"y"}, "relu");
  m.output("y");
  const Graph g = import(m);
  int convs = 0, slices = 0;
  for (const Node& n : g.nodes()) {
    if (const auto* c = std::get_if<Conv2d>(&n.op)) {
      ++convs;
      EXPECT_EQ(g.value(n.inputs[0]).shape, (Shape{2 * 5, 3 * 3, 6, 6}));
      EXPECT_EQ(g.value(n.inputs[1]).shape, (Shape{4, 9, 3, 3}));
      EXPECT_EQ(c->pad_top, 1);
    }
    slices += std::holds_alternative<Slice>(n.op);
  }
  EXPECT_EQ(convs, 1);
  EXPECT_EQ(slices, 3);
  const Graph opt = run_passes(g);
  for (const Node& n : opt.nodes()) {
    EXPECT_FALSE(std::holds_alternative<BatchNorm>(n.op)) << "the BatchNorm did not fold";
    EXPECT_FALSE(std::holds_alternative<Relu>(n.op)) << "the ReLU did not fuse";
    EXPECT_FALSE(std::holds_alternative<ElementwiseChain>(n.op)) << "the ReLU did not fuse";
    if (const auto* c = std::get_if<Conv2d>(&n.op)) {
      EXPECT_FALSE(c->activation.is_identity());
    }
  }
  const Tensor in{{2, 3, 5, 6, 6}, Layout::any, rnd(1080, 9)};
  const Tensor want = run_reference(g, {in})[0];
  Tensor got = run_reference(opt, {in})[0];
  if (got.layout == Layout::nhwc) got = to_layout(got, Layout::nchw);
  EXPECT_LE(worst_error_ratio(got.data, want.data, 1e-5, 1e-6), 1.0);
}

// ConvTranspose 3-D (zero insertion along D, H and W, then the 3-D convolution) against its
// definition, a scatter: input (id, ih, iw) adds w * x at o = i * stride + k * dilation - pad.
TEST(OnnxConv3d, ConvTransposeMatchesItsDefinition) {
  struct Case {
    Dims x;
    int64_t groups, co_per_group;
    A3 k, stride, dilation, pad_begin, pad_end, out_pad;
  };
  for (
      const Case& t :
      {Case{
           {1, 2, 3, 4, 3}, 1, 3, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
       Case{
           {2, 4, 2, 3, 3}, 2, 2, {2, 3, 2}, {2, 2, 3}, {1, 1, 1}, {1, 0, 1}, {0, 1, 0}, {1, 1, 0}},
       Case{{1, 2, 3, 2, 3},
            1,
            2,
            {2, 2, 3},
            {1, 2, 1},
            {2, 1, 2},
            {2, 0, 1},
            {1, 0, 0},
            {1, 0, 1}}}) {
    const int64_t n = t.x[0], ci = t.x[1], cig = ci / t.groups, co = t.co_per_group * t.groups;
    Dims yd = {n, co};
    for (size_t a = 0; a < 3; ++a)
      yd.push_back(t.stride[a] * (t.x[a + 2] - 1) + t.out_pad[a] + (t.k[a] - 1) * t.dilation[a] +
                   1 - t.pad_begin[a] - t.pad_end[a]);
    const Dims wd = {ci, t.co_per_group, t.k[0], t.k[1], t.k[2]};
    ModelBuilder m(13);
    m.input("x", t.x);
    const std::vector<float> wt = rnd(num_elements(wd), 17), bias = rnd(co, 18);
    m.init("w", wd, wt);
    m.init("b", {co}, bias);
    auto& node = m.node("ConvTranspose", {"x", "w", "b"}, {"y"}, "deconv");
    attr_i(node, "group", t.groups);
    attr_ints(node, "strides", {t.stride[0], t.stride[1], t.stride[2]});
    attr_ints(node, "dilations", {t.dilation[0], t.dilation[1], t.dilation[2]});
    attr_ints(
        node, "pads",
        {t.pad_begin[0], t.pad_begin[1], t.pad_begin[2], t.pad_end[0], t.pad_end[1], t.pad_end[2]});
    attr_ints(node, "output_padding", {t.out_pad[0], t.out_pad[1], t.out_pad[2]});
    m.output("y");
    const Graph g = import(m);
    ASSERT_EQ(g.value(g.outputs[0]).shape, yd);
    const std::vector<float> x = rnd(num_elements(t.x), 19);
    const Tensor y = run_reference(g, {Tensor{t.x, Layout::any, x}})[0];
    std::vector<double> want(static_cast<size_t>(num_elements(yd)));
    const int64_t plane = yd[2] * yd[3] * yd[4];
    for (int64_t b = 0; b < n; ++b)
      for (int64_t o = 0; o < co; ++o)
        for (int64_t p = 0; p < plane; ++p)
          want[static_cast<size_t>((b * co + o) * plane + p)] = bias[static_cast<size_t>(o)];
    for (int64_t b = 0; b < n; ++b)
      for (int64_t c = 0; c < ci; ++c)
        for (int64_t id = 0; id < t.x[2]; ++id)
          for (int64_t ih = 0; ih < t.x[3]; ++ih)
            for (int64_t iw = 0; iw < t.x[4]; ++iw)
              for (int64_t o = 0; o < t.co_per_group; ++o)
                for (int64_t kd = 0; kd < t.k[0]; ++kd)
                  for (int64_t kh = 0; kh < t.k[1]; ++kh)
                    for (int64_t kw = 0; kw < t.k[2]; ++kw) {
                      const int64_t od = id * t.stride[0] + kd * t.dilation[0] - t.pad_begin[0];
                      const int64_t oh = ih * t.stride[1] + kh * t.dilation[1] - t.pad_begin[1];
                      const int64_t ow = iw * t.stride[2] + kw * t.dilation[2] - t.pad_begin[2];
                      if (od < 0 || od >= yd[2] || oh < 0 || oh >= yd[3] || ow < 0 || ow >= yd[4])
                        continue;
                      const int64_t oc = c / cig * t.co_per_group + o;
                      want[static_cast<size_t>((((b * co + oc) * yd[2] + od) * yd[3] + oh) * yd[4] +
                                               ow)] +=
                          double{x[static_cast<size_t>(
                              (((b * ci + c) * t.x[2] + id) * t.x[3] + ih) * t.x[4] + iw)]} *
                          wt[static_cast<size_t>(
                              (((c * t.co_per_group + o) * t.k[0] + kd) * t.k[1] + kh) * t.k[2] +
                              kw)];
                    }
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y.data[i], want[i], 2e-5) << i;
  }
}

// What stays refused: convolutions beyond 3-D, and 3-D windows that do not fit.
TEST(OnnxConv3d, RefusalsNameTheNodeAndTheLimit) {
  {
    ModelBuilder m(13);
    m.input("x", {1, 1, 2, 2, 2, 2});
    m.init("w", {1, 1, 1, 1, 1, 1}, {0.5f});
    m.node("Conv", {"x", "w"}, {"y"}, "conv4d");
    m.output("y");
    EXPECT_THAT(import_error(m.bytes()),
                testing::HasSubstr("node 'conv4d' (Conv): only 1-D, 2-D and 3-D convolutions"));
  }
  {
    ModelBuilder m(13);
    m.input("x", {1, 1, 2, 4, 4});
    m.init("w", {1, 1, 3, 1, 1}, {0.5f, 0.25f, 0.125f});
    m.node("Conv", {"x", "w"}, {"y"}, "deep");
    m.output("y");
    EXPECT_THAT(import_error(m.bytes()),
                testing::HasSubstr("node 'deep' (Conv): the depth window (3 taps"));
  }
  {
    ModelBuilder m(13);
    m.input("x", {1, 2, 2, 4, 4});
    m.init("w", {2, 2, 1, 1, 1}, {0.5f, 0.25f, 0.125f, 1.0f});
    attr_ints(m.node("Conv", {"x", "w"}, {"y"}, "badpads"), "pads", {1, 1, 1, 1});
    m.output("y");
    EXPECT_THAT(import_error(m.bytes()),
                testing::HasSubstr("node 'badpads' (Conv): attribute 'pads' has 4 entries, "
                                   "expected 6 (3-D)"));
  }
  {
    ModelBuilder m(13);
    m.input("x", {1, 1, 2, 2, 2, 2});
    m.init("w", {1, 1, 1, 1, 1, 1}, {0.5f});
    m.node("ConvTranspose", {"x", "w"}, {"y"}, "deconv4d");
    m.output("y");
    EXPECT_THAT(import_error(m.bytes()),
                testing::HasSubstr("node 'deconv4d' (ConvTranspose): only 1-D, 2-D and 3-D "
                                   "transposed convolutions"));
  }
}

}  // namespace
}  // namespace kiln::graph
