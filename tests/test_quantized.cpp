// Quantized ONNX models (QuantizeLinear / DequantizeLinear, the QLinear ops, onnxruntime's
// com.microsoft QOperator ops, dynamic quantization, Resize of quantized tensors) imported as
// float computation on the integers: values against the ONNX definitions computed here from the
// integers, through the reference interpreter and the generated kernels of every CPU target; the
// refusals that keep integers out of float ops.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "graph/passes/pipeline.h"
#include "onnx_test_models.h"
#include "test_generator.h"

namespace kiln {
namespace {

using namespace onnx_test;  // ModelBuilder, import, import_error, attr_*, rnd, Dims
using graph::Tensor;
using testing::HasSubstr;

// An integer initializer (INT8, UINT8, INT32, ...: ONNX keeps them in int32_data).
void init_int(ModelBuilder& m, const std::string& name, const Dims& dims, int dtype,
              const std::vector<int>& values) {
  TP& t = *m.graph().add_initializer();
  ModelBuilder::fill(t, name, dims, dtype);
  for (int v : values) t.add_int32_data(v);
}

// ONNX QuantizeLinear: saturate(round_half_even(x / scale) + zero), then DequantizeLinear.
double quantize(double x, double scale, int zero, int lo, int hi) {
  return std::clamp(std::nearbyint(x / scale) + zero, double(lo), double(hi));
}

// Values on the integer grid of `scale`, a third of them exact halves between two steps (ties,
// which round to even), some beyond what 8 bits hold (saturation), the rest uniform.
std::vector<float> grid_values(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> steps(-200, 200);
  std::uniform_real_distribution<float> u(-150.0f, 150.0f);
  std::vector<float> x(n);
  for (size_t k = 0; k < n; ++k)
    x[k] = k % 3 == 0 ? (static_cast<float>(steps(rng)) + 0.5f) * scale : u(rng) * scale;
  return x;
}

// The model's outputs on every CPU target must equal `want` within `tol` (one quantization step
// where a sum may land either side of a tie), and the reference interpreter's as well.
void expect_everywhere(const graph::Graph& g, const std::vector<Tensor>& ins,
                       const std::vector<std::vector<double>>& want, double tol) {
  std::vector<Tensor> ref = graph::run_reference(g, ins);
  ASSERT_EQ(ref.size(), want.size());
  auto check = [&](size_t i, const Tensor& got) {
    ASSERT_EQ(got.data.size(), want[i].size());
    int exact = 0;
    for (size_t k = 0; k < want[i].size(); ++k) {
      EXPECT_NEAR(got.data[k], want[i][k], tol) << "output " << i << " element " << k;
      exact += got.data[k] == static_cast<float>(want[i][k]);
    }
    EXPECT_GE(exact, static_cast<int>(want[i].size() * 9 / 10)) << "output " << i;
  };
  for (size_t i = 0; i < ref.size(); ++i) check(i, ref[i]);
  testing_util::check_outputs_on_every_target(graph::run_passes(g), ins, ref, check);
}

// x -> QuantizeLinear -> Transpose -> MaxPool -> DequantizeLinear, per channel in UINT8 with zero
// points, and per tensor in INT8: scales are powers of two, so every tie is exact in float and
// must round to even; values past the type's range saturate. Data movement keeps the integers.
TEST(Quantized, QuantizeAndDequantizeFollowOnnxOnEveryCpuTarget) {
  ModelBuilder m(13);
  m.input("x", {1, 4, 6, 6});
  const std::vector<float> scales = {0.5f, 0.25f, 0.125f, 1.0f / 64};
  const std::vector<int> zeros = {128, 0, 255, 100};
  m.init("s", {4}, scales);
  init_int(m, "z", {4}, TP::UINT8, zeros);
  m.init("s8", {}, {0.25f});
  init_int(m, "z8", {}, TP::INT8, {-3});
  attr_i(m.node("QuantizeLinear", {"x", "s", "z"}, {"q"}), "axis", 1);
  attr_ints(m.node("Transpose", {"q"}, {"qt"}), "perm", {0, 1, 3, 2});
  auto& pool = m.node("MaxPool", {"qt"}, {"qp"});
  attr_ints(pool, "kernel_shape", {2, 2});
  attr_ints(pool, "strides", {2, 2});
  attr_i(m.node("DequantizeLinear", {"qp", "s", "z"}, {"y"}), "axis", 1);
  m.node("QuantizeLinear", {"x", "s8", "z8"}, {"q8"});
  m.node("DequantizeLinear", {"q8", "s8", "z8"}, {"y8"});
  m.output("y");
  m.output("y8");
  const graph::Graph g = import(m);

  std::vector<float> x(4 * 36);
  for (int c = 0; c < 4; ++c) {
    const std::vector<float> v = grid_values(36, scales[c], 11 + c);
    std::copy(v.begin(), v.end(), x.begin() + c * 36);
  }
  std::vector<double> y(4 * 9), y8(x.size());
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 3; ++i)      // pooled row of the transposed image: original column
      for (int j = 0; j < 3; ++j) {  // pooled column: original row
        double best = -1;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b)
            best = std::max(best, quantize(x[c * 36 + (2 * j + b) * 6 + 2 * i + a], scales[c],
                                           zeros[c], 0, 255));
        y[c * 9 + i * 3 + j] = (best - zeros[c]) * scales[c];
      }
  int ties = 0, saturated = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    const double q = quantize(x[k], 0.25, -3, -128, 127);
    y8[k] = (q + 3) * 0.25;
    ties += std::fabs(x[k] / 0.25 - std::floor(x[k] / 0.25) - 0.5) < 1e-9;
    saturated += q == -128 || q == 127;
  }
  EXPECT_GT(ties, 10);
  EXPECT_GT(saturated, 10);
  expect_everywhere(g, {Tensor{{1, 4, 6, 6}, graph::Layout::nchw, x}}, {y, y8}, 0.0);
}

// QLinearConv (per-channel INT8 weights with zero points, an INT32 bias, padding, 2 groups) and
// QLinearMatMul (per-column scales), each between QuantizeLinear and DequantizeLinear, against
// the integer arithmetic of their definitions.
TEST(Quantized, QLinearConvAndMatMulMatchTheirIntegerDefinitions) {
  constexpr int C = 4, M = 6, H = 7, W = 5, G = 2, K = 16, N = 5;
  const float xs = 1.0f / 32, ys = 1.0f / 8;
  const std::vector<float> ws = {1.0f / 64, 1.0f / 128, 1.0f / 32, 1.0f / 64, 1.0f / 16, 1.0f / 64};
  const std::vector<int> wz = {0, 3, -2, 0, 1, 0};
  std::mt19937 rng(5);
  auto ints = [&](size_t n, int lo, int hi) {
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<int> v(n);
    for (int& e : v) e = d(rng);
    return v;
  };
  const std::vector<int> w = ints(M * (C / G) * 9, -127, 127), bias = ints(M, -3000, 3000);
  const std::vector<int> b = ints(K * N, -127, 127);
  const std::vector<float> bs = {1.0f / 64, 1.0f / 32, 1.0f / 128, 1.0f / 64, 1.0f / 16};

  ModelBuilder m(13);
  m.input("x", {1, C, H, W});
  m.input("a", {3, K});
  m.init("xs", {}, {xs});
  init_int(m, "xz", {}, TP::UINT8, {120});
  m.init("ws", {M}, ws);
  init_int(m, "wz", {M}, TP::INT8, wz);
  init_int(m, "w", {M, C / G, 3, 3}, TP::INT8, w);
  init_int(m, "bias", {M}, TP::INT32, bias);
  m.init("ys", {}, {ys});
  init_int(m, "yz", {}, TP::UINT8, {100});
  m.init("bs", {N}, bs);
  init_int(m, "bz", {N}, TP::INT8, std::vector<int>(N, 0));
  init_int(m, "b", {K, N}, TP::INT8, b);
  m.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
  auto& conv =
      m.node("QLinearConv", {"xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"}, {"yq"});
  attr_ints(conv, "pads", {1, 1, 1, 1});
  attr_i(conv, "group", G);
  m.node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"});
  m.node("QuantizeLinear", {"a", "xs", "xz"}, {"aq"});
  m.node("QLinearMatMul", {"aq", "xs", "xz", "b", "bs", "bz", "ys", "yz"}, {"pq"});
  m.node("DequantizeLinear", {"pq", "ys", "yz"}, {"p"});
  m.output("y");
  m.output("p");
  const graph::Graph g = import(m);

  const std::vector<float> x = grid_values(C * H * W, xs, 21), a = grid_values(3 * K, xs, 22);
  auto xq = [&](const std::vector<float>& v, size_t k) {
    return quantize(v[k], xs, 120, 0, 255) - 120;
  };
  std::vector<double> y(M * H * W), p(3 * N);
  for (int o = 0; o < M; ++o)
    for (int i = 0; i < H; ++i)
      for (int j = 0; j < W; ++j) {
        double acc = 0;  // exact: integers
        for (int c = 0; c < C / G; ++c)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int yy = i + ky - 1, xx = j + kx - 1;
              if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
              const int ci = o / (M / G) * (C / G) + c;
              acc += xq(x, (ci * H + yy) * W + xx) *
                     (w[((o * (C / G) + c) * 3 + ky) * 3 + kx] - wz[o]);
            }
        const double real = (acc + bias[o]) * xs * ws[o];
        y[(o * H + i) * W + j] = (quantize(real, ys, 100, 0, 255) - 100) * ys;
      }
  for (int r = 0; r < 3; ++r)
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += xq(a, r * K + k) * b[k * N + n];
      p[r * N + n] = (quantize(acc * xs * bs[n], ys, 100, 0, 255) - 100) * ys;
    }
  expect_everywhere(
      g, {Tensor{{1, C, H, W}, graph::Layout::nchw, x}, Tensor{{3, K}, graph::Layout::any, a}},
      {y, p}, ys);
}

// onnxruntime's QOperator ops (domain com.microsoft): QLinearLeakyRelu, QLinearSigmoid,
// QLinearAdd, QLinearMul, QLinearConcat, QLinearAveragePool, QLinearGlobalAveragePool and QGemm
// with an INT32 bias and a float output, each its float op between dequantized operands and a
// quantized result.
TEST(Quantized, MicrosoftQOperatorOpsMatchTheirDefinitions) {
  ModelBuilder m(13);
  auto* ms = m.model().add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  m.input("x", {1, 2, 4, 4});
  m.init("s", {}, {1.0f / 16});
  init_int(m, "z", {}, TP::UINT8, {128});
  m.init("s2", {}, {1.0f / 8});
  init_int(m, "z2", {}, TP::UINT8, {64});
  init_int(m, "w", {3, 2}, TP::INT8, {5, -7, 11, 2, -4, 9});
  m.init("ws", {}, {1.0f / 32});
  init_int(m, "wz", {}, TP::INT8, {1});
  init_int(m, "c", {3}, TP::INT32, {100, -50, 7});
  auto ms_node = [&](const std::string& op, const std::vector<std::string>& in,
                     const std::string& out) -> ::onnx::NodeProto& {
    auto& n = m.node(op, in, {out}, out);
    n.set_domain("com.microsoft");
    return n;
  };
  m.node("QuantizeLinear", {"x", "s", "z"}, {"q"});
  attr_f(ms_node("QLinearLeakyRelu", {"q", "s", "z", "s", "z"}, "lr"), "alpha", 0.25f);
  ms_node("QLinearSigmoid", {"q", "s", "z", "s2", "z2"}, "sg");
  ms_node("QLinearAdd", {"lr", "s", "z", "sg", "s2", "z2", "s2", "z2"}, "add");
  ms_node("QLinearMul", {"lr", "s", "z", "add", "s2", "z2", "s2", "z2"}, "mul");
  attr_i(ms_node("QLinearConcat", {"s2", "z2", "add", "s2", "z2", "q", "s", "z"}, "cat"), "axis",
         1);
  auto& avg = ms_node("QLinearAveragePool", {"mul", "s2", "z2", "s2", "z2"}, "avg");
  attr_ints(avg, "kernel_shape", {2, 2});
  attr_ints(avg, "strides", {2, 2});
  ms_node("QLinearGlobalAveragePool", {"cat", "s2", "z2", "s2", "z2"}, "gap");
  m.init_i64("shape", {2}, {1, 4});
  m.node("Reshape", {"gap", "shape"}, {"flat"});
  m.node("DequantizeLinear", {"flat", "s2", "z2"}, {"f"});
  m.node("QuantizeLinear", {"f", "s", "z"}, {"fq"});
  m.node("Slice", {"fq", "st", "en", "ax"}, {"fq2"});
  m.init_i64("st", {1}, {0});
  m.init_i64("en", {1}, {2});
  m.init_i64("ax", {1}, {1});
  attr_i(ms_node("QGemm", {"fq2", "s", "z", "w", "ws", "wz", "c"}, "gemm"), "transB", 1);
  m.node("DequantizeLinear", {"avg", "s2", "z2"}, {"avg_f"});
  m.output("gemm");
  m.output("avg_f");
  const graph::Graph g = import(m);

  const std::vector<float> x = grid_values(32, 1.0f / 16, 31);
  auto q = [](double v, double s, int z) { return quantize(v, s, z, 0, 255); };
  auto dq = [](double v, double s, int z) { return (v - z) * s; };
  auto requant = [&](double v, double s, int z) { return dq(q(v, s, z), s, z); };
  std::vector<double> lr(32), sg(32), add(32), mul(32);
  for (int k = 0; k < 32; ++k) {
    const double xv = dq(q(x[k], 1.0 / 16, 128), 1.0 / 16, 128);
    lr[k] = requant(xv < 0 ? 0.25 * xv : xv, 1.0 / 16, 128);
    sg[k] = requant(1 / (1 + std::exp(-xv)), 1.0 / 8, 64);
    add[k] = requant(lr[k] + sg[k], 1.0 / 8, 64);
    mul[k] = requant(lr[k] * add[k], 1.0 / 8, 64);
  }
  std::vector<double> avg_f(8), gap(4);
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        double s = 0;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) s += mul[c * 16 + (2 * i + a) * 4 + 2 * j + b];
        avg_f[c * 4 + i * 2 + j] = requant(s / 4, 1.0 / 8, 64);
      }
  for (int c = 0; c < 4; ++c) {  // Concat: add's two channels, then q's (requantized at s2)
    double s = 0;
    for (int k = 0; k < 16; ++k)
      s += c < 2 ? add[c * 16 + k]
                 : requant(dq(q(x[(c - 2) * 16 + k], 1.0 / 16, 128), 1.0 / 16, 128), 1.0 / 8, 64);
    gap[c] = requant(s / 16, 1.0 / 8, 64);
  }
  const std::vector<int> w = {5, -7, 11, 2, -4, 9}, c = {100, -50, 7};
  std::vector<double> gemm(3);
  for (int n = 0; n < 3; ++n) {
    double acc = 0;
    for (int k = 0; k < 2; ++k) acc += (q(gap[k], 1.0 / 16, 128) - 128) * (w[n * 2 + k] - 1);
    gemm[n] = (acc + c[n]) * (1.0 / 16) * (1.0 / 32);
  }
  expect_everywhere(g, {Tensor{{1, 2, 4, 4}, graph::Layout::nchw, x}}, {gemm, avg_f}, 1.0 / 8);
}

// A linear Resize of a quantized tensor: the interpolated integers truncated toward zero and
// clamped, as ONNX's reference and onnxruntime cast them (UINT8: the floor; INT8: up for
// negative halves), checked on a width doubled with the asymmetric rule (every other output the
// mean of two neighbours, the last one clamped to the edge).
TEST(Quantized, LinearResizeOfQuantizedTensorsTruncatesLikeOnnx) {
  ModelBuilder m(13);
  m.input("x", {1, 2, 3, 4});
  m.init("s", {}, {0.25f});
  init_int(m, "zu", {}, TP::UINT8, {100});
  init_int(m, "z8", {}, TP::INT8, {-5});
  m.init("roi", {0}, {});
  m.init("scales", {4}, {1, 1, 1, 2});
  for (const std::string t : {"u", "8"}) {
    const std::string z = t == "u" ? "zu" : "z8";
    m.node("QuantizeLinear", {"x", "s", z}, {"q" + t});
    auto& r = m.node("Resize", {"q" + t, "roi", "scales"}, {"r" + t});
    attr_s(r, "mode", "linear");
    attr_s(r, "coordinate_transformation_mode", "asymmetric");
    m.node("DequantizeLinear", {"r" + t, "s", z}, {"y" + t});
    m.output("y" + t);
  }
  const graph::Graph g = import(m);
  const std::vector<float> x = grid_values(24, 0.25f, 41);
  std::vector<std::vector<double>> want(2, std::vector<double>(48));
  int truncated_up = 0;
  for (int signed_type = 0; signed_type < 2; ++signed_type) {
    const int zero = signed_type ? -5 : 100, lo = signed_type ? -128 : 0,
              hi = signed_type ? 127 : 255;
    for (int row = 0; row < 6; ++row)
      for (int k = 0; k < 4; ++k) {
        const double a = quantize(x[row * 4 + k], 0.25, zero, lo, hi);
        const double b = quantize(x[row * 4 + std::min(k + 1, 3)], 0.25, zero, lo, hi);
        const double mean = std::trunc((a + b) / 2);
        truncated_up += mean > (a + b) / 2;
        want[signed_type][row * 8 + 2 * k] = (a - zero) * 0.25;
        want[signed_type][row * 8 + 2 * k + 1] = (mean - zero) * 0.25;
      }
  }
  EXPECT_GT(truncated_up, 2);  // negative halves, where truncation is not the floor
  expect_everywhere(g, {Tensor{{1, 2, 3, 4}, graph::Layout::nchw, x}}, {want[0], want[1]}, 0.0);
}

// onnxruntime's dynamic quantization: DynamicQuantizeLinear (the scale and zero point from the
// range of x, 0 included, computed in the graph), ConvInteger with per-channel weight zero
// points, MatMulInteger with per-column ones, each cast to FLOAT and scaled as
// quantize_dynamic writes it, and DequantizeLinear by the computed scale and zero point: against
// the definitions in float32, as onnxruntime computes them.
TEST(Quantized, DynamicQuantizationMatchesItsDefinition) {
  ModelBuilder m(13);
  m.input("x", {1, 3, 5, 5});
  m.input("a", {2, 6});
  std::mt19937 rng(9);
  std::vector<int> w(108);
  for (int& e : w) e = static_cast<int>(rng() % 256);
  init_int(m, "w", {4, 3, 3, 3}, TP::UINT8, w);
  init_int(m, "wz", {4}, TP::UINT8, {128, 120, 131, 127});
  init_int(m, "b", {6, 3}, TP::INT8,
           {5, -7, 11, 2, -4, 9, -120, 33, 0, 64, -1, 17, 99, -50, 23, 8, 127, -128});
  init_int(m, "bz", {3}, TP::INT8, {1, -2, 0});
  m.node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  attr_ints(m.node("ConvInteger", {"xq", "w", "xz", "wz"}, {"ci"}), "pads", {1, 1, 1, 1});
  attr_i(m.node("Cast", {"ci"}, {"cf"}), "to", TP::FLOAT);
  m.node("Mul", {"cf", "xs"}, {"y"});
  m.node("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"});
  m.node("DynamicQuantizeLinear", {"a"}, {"aq", "as", "az"});
  m.node("MatMulInteger", {"aq", "b", "az", "bz"}, {"pi"});
  attr_i(m.node("Cast", {"pi"}, {"pf"}), "to", TP::FLOAT);
  m.node("Mul", {"pf", "as"}, {"p"});
  for (const char* o : {"y", "xd", "p"}) m.output(o);
  const graph::Graph g = import(m);

  // x from -0.7 to 2.3 (zero point 59 or so), a from 0.1 to 1.9 (zero point 0: the range
  // includes 0).
  const std::vector<float> x = rnd(75, 51, -0.7f, 2.3f), a = rnd(12, 52, 0.1f, 1.9f);
  struct Dynamic {
    float scale;
    int zero;
    std::vector<int> q;
  };
  auto dynamic = [](const std::vector<float>& v) {
    const float lo = std::min(0.0f, *std::min_element(v.begin(), v.end()));
    const float hi = std::max(0.0f, *std::max_element(v.begin(), v.end()));
    Dynamic d{(hi - lo) / 255.0f, 0, {}};
    d.zero = static_cast<int>(std::clamp(std::nearbyint(-(lo / d.scale)), 0.0f, 255.0f));
    for (float e : v)  // float32 division, as the graph's
      d.q.push_back(
          static_cast<int>(std::clamp(std::nearbyint(e / d.scale) + d.zero, 0.0f, 255.0f)));
    return d;
  };
  const Dynamic dx = dynamic(x), da = dynamic(a);
  EXPECT_GT(dx.zero, 0);
  EXPECT_EQ(da.zero, 0);
  const std::vector<int> wz = {128, 120, 131, 127}, bz = {1, -2, 0};
  const std::vector<int> b = {5,  -7, 11, 2,  -4,  9,  -120, 33,  0,
                              64, -1, 17, 99, -50, 23, 8,    127, -128};
  std::vector<double> y(4 * 25), xd(75), p(6);
  for (int o = 0; o < 4; ++o)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j) {
        int64_t acc = 0;
        for (int c = 0; c < 3; ++c)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int yy = i + ky - 1, xx = j + kx - 1;
              if (yy < 0 || yy >= 5 || xx < 0 || xx >= 5) continue;
              acc += int64_t{dx.q[(c * 5 + yy) * 5 + xx] - dx.zero} *
                     (w[((o * 3 + c) * 3 + ky) * 3 + kx] - wz[o]);
            }
        y[(o * 5 + i) * 5 + j] = static_cast<float>(acc) * dx.scale;
      }
  for (int k = 0; k < 75; ++k) xd[k] = static_cast<float>(dx.q[k] - dx.zero) * dx.scale;
  for (int r = 0; r < 2; ++r)
    for (int n = 0; n < 3; ++n) {
      int64_t acc = 0;
      for (int k = 0; k < 6; ++k)
        acc += int64_t{da.q[r * 6 + k] - da.zero} * (b[k * 3 + n] - bz[n]);
      p[r * 3 + n] = static_cast<float>(acc) * da.scale;
    }
  expect_everywhere(
      g, {Tensor{{1, 3, 5, 5}, graph::Layout::nchw, x}, Tensor{{2, 6}, graph::Layout::any, a}},
      {y, xd, p}, 1e-2);
}

// An x of all zeros: the scale 1 and the zero point 0, as onnxruntime gives them (the range
// formula would divide by zero).
TEST(Quantized, DynamicQuantizationOfZerosTakesTheUnitScale) {
  ModelBuilder m(13);
  m.input("x", {2, 3});
  m.node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  m.node("DequantizeLinear", {"xq", "xs", "xz"}, {"y"});
  m.output("y");
  m.output("xs");
  const graph::Graph g = import(m);
  expect_everywhere(g, {Tensor{{2, 3}, graph::Layout::any, std::vector<float>(6, 0.0f)}},
                    {std::vector<double>(6, 0.0), {1.0}}, 0.0);
}

// What stays refused, by name: float ops on quantized tensors, quantized graph outputs, mixing
// types, blocked quantization, non-positive scales, dequantizing a float tensor.
TEST(Quantized, RefusesIntegerArithmeticItDoesNotModel) {
  auto model = [](const std::string& tail) {
    ModelBuilder m(21);
    m.input("x", {1, 3, 2, 2});
    m.init("s", {}, {0.5f});
    init_int(m, "z", {}, TP::UINT8, {10});
    init_int(m, "z8", {}, TP::INT8, {0});
    m.node("QuantizeLinear", {"x", "s", "z"}, {"q"});
    if (tail == "add") {
      m.node("Add", {"q", "q"}, {"y"});
    } else if (tail == "output") {
      m.node("Identity", {"q"}, {"y"});
    } else if (tail == "mix") {
      m.node("QuantizeLinear", {"x", "s", "z8"}, {"q8"});
      attr_i(m.node("Concat", {"q", "q8"}, {"y"}), "axis", 1);
    } else if (tail == "float_concat") {
      attr_i(m.node("Concat", {"q", "x"}, {"y"}), "axis", 1);
    } else if (tail == "block") {
      attr_i(m.node("DequantizeLinear", {"q", "s", "z"}, {"y"}), "block_size", 2);
    } else if (tail == "scale") {
      m.init("zero_scale", {}, {0.0f});
      m.node("DequantizeLinear", {"q", "zero_scale", "z"}, {"y"});
    } else if (tail == "float") {
      m.node("DequantizeLinear", {"x", "s", "z"}, {"y"});
    }
    m.output("y");
    return m.bytes();
  };
  EXPECT_THAT(import_error(model("add")), HasSubstr("reads 'q', a quantized UINT8 tensor"));
  EXPECT_THAT(import_error(model("output")), HasSubstr("end the graph with DequantizeLinear"));
  EXPECT_THAT(import_error(model("mix")), HasSubstr("mixes quantized UINT8 and INT8 tensors"));
  EXPECT_THAT(import_error(model("float_concat")), HasSubstr("with FLOAT ones"));
  EXPECT_THAT(import_error(model("block")), HasSubstr("block_size"));
  EXPECT_THAT(import_error(model("scale")), HasSubstr("positive scales"));
  EXPECT_THAT(import_error(model("float")), HasSubstr("is a FLOAT graph tensor"));
}

}  // namespace
}  // namespace kiln
