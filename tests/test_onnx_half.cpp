// Half-precision models (docs/onnx.md, "Half-precision models"): FLOAT16 and BFLOAT16 tensors
// decoded exactly, Casts of constants to them rounded as the types round, Casts of runtime
// tensors passed through, half graph inputs and outputs exchanged as float32; and a float16
// model converted as exporters convert them (weights FLOAT16, a Cast to FLOAT16 after the input
// and to FLOAT before the output) against the float32 model with the same rounded weights.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "graph/bf16.h"
#include "graph/builder.h"
#include "graph/onnx/importer.h"
#include "graph/passes/pipeline.h"
#include "kiln/runtime.h"
#include "onnx_test_models.h"
#include "test_generator.h"

namespace kiln::graph {
namespace {

using onnx_test::attr_i;
using onnx_test::attr_ints;
using onnx_test::Dims;
using onnx_test::import;
using onnx_test::ModelBuilder;
using onnx_test::rnd;
using TP = ::onnx::TensorProto;

// IEEE binary16 bits of `v`, which must be a float16 value: sign, exponent, 10 mantissa bits.
uint16_t half_bits(float v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const float a = std::fabs(v);
  if (std::isinf(a)) return sign | 0x7c00;
  if (a == 0) return sign;
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  if (e - 1 < -14)                    // subnormal: a = mantissa 2^-24
    return sign | static_cast<uint16_t>(std::ldexp(a, 24));
  const auto mantissa = static_cast<uint16_t>(std::ldexp(m, 11)) & 0x3ff;
  return sign | static_cast<uint16_t>((e - 1 + 15) << 10) | mantissa;
}

uint16_t bfloat16_bits(float v) {  // `v` must be a bfloat16 value
  uint32_t word = 0;
  std::memcpy(&word, &v, sizeof v);
  return static_cast<uint16_t>(word >> 16);
}

TEST(OnnxHalf, BitsDecodeExactly) {
  const std::vector<float> values = {0.0f,
                                     -0.0f,
                                     1.0f,
                                     -2.5f,
                                     65504.0f,
                                     -65504.0f,
                                     0.000061035f /* smallest normal, 2^-14 */,
                                     std::ldexp(1.0f, -24) /* smallest subnormal */,
                                     std::ldexp(3.0f, -24),
                                     0.0999755859375f,
                                     INFINITY,
                                     -INFINITY};
  for (float v : values) {
    const float exact = std::fabs(v) == 0.000061035f ? std::copysign(std::ldexp(1.0f, -14), v) : v;
    EXPECT_EQ(from_half_bits(half_bits(exact)), exact) << exact;
    EXPECT_EQ(std::signbit(from_half_bits(half_bits(exact))), std::signbit(exact));
  }
  // Bit patterns from the IEEE 754 binary16 table, independent of half_bits above.
  EXPECT_TRUE(std::isnan(from_half_bits(0x7e00)));
  EXPECT_EQ(from_half_bits(0x3c01), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(from_half_bits(0xc000), -2.0f);
  EXPECT_EQ(from_half_bits(0x7bff), 65504.0f);
  EXPECT_EQ(from_half_bits(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(from_half_bits(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(from_half_bits(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::signbit(from_half_bits(0x8000)));
  EXPECT_EQ(from_half_bits(0xfc00), -INFINITY);
  EXPECT_EQ(from_bf16_bits(0x3f80), 1.0f);
  EXPECT_EQ(from_bf16_bits(0xc0a0), -5.0f);
}

TEST(OnnxHalf, RoundsAsTheTypesRound) {
  const auto half = [](float v) { return onnx::round_to_dtype(v, TP::FLOAT16); };
  const auto bf16 = [](float v) { return onnx::round_to_dtype(v, TP::BFLOAT16); };
  EXPECT_EQ(half(0.1f), 0.0999755859375f);
  EXPECT_EQ(half(1.0f + std::ldexp(1.0f, -11)), 1.0f);                             // a tie: to even
  EXPECT_EQ(half(1.0f + 3 * std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -9));  // tie, up
  EXPECT_EQ(half(65519.0f), 65504.0f);
  EXPECT_EQ(half(65520.0f), INFINITY);  // half way to 65536: the even neighbour is out of range
  EXPECT_EQ(half(-1e6f), -INFINITY);
  EXPECT_EQ(half(std::ldexp(1.4f, -24)), std::ldexp(1.0f, -24));  // subnormal steps of 2^-24
  EXPECT_EQ(half(std::ldexp(1.0f, -26)), 0.0f);
  EXPECT_EQ(half(-3.0f), -3.0f);
  EXPECT_EQ(bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);                             // tie: even
  EXPECT_EQ(bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));  // tie: up
  EXPECT_EQ(bf16(3.14159265f), 3.140625f);
  EXPECT_EQ(onnx::round_to_dtype(0.1f, TP::FLOAT), 0.1f);  // other dtypes: unchanged
  EXPECT_TRUE(std::isnan(half(NAN)));
}

// A FLOAT16 initializer in raw_data and one in int32_data (the bits, one per value), a BFLOAT16
// one, and a Cast of a FLOAT constant to FLOAT16 (rounded) all feed the graph as float32.
TEST(OnnxHalf, HalfConstantsFeedTheGraph) {
  const std::vector<float> w = {0.5f, -1.25f, 3.0f, std::ldexp(5.0f, -24)};
  ModelBuilder m(13);
  m.input("x", {4});
  TP& raw = *m.graph().add_initializer();
  ModelBuilder::fill(raw, "w_raw", {4}, TP::FLOAT16);
  std::string bytes;
  for (float v : w) {
    const uint16_t b = half_bits(v);
    bytes.append(reinterpret_cast<const char*>(&b), 2);
  }
  raw.set_raw_data(bytes);
  TP& typed = *m.graph().add_initializer();
  ModelBuilder::fill(typed, "w_typed", {4}, TP::FLOAT16);
  for (float v : w) typed.add_int32_data(half_bits(v));
  TP& brain = *m.graph().add_initializer();
  ModelBuilder::fill(brain, "w_bf16", {4}, TP::BFLOAT16);
  for (float v : {2.0f, -0.5f, 1.5f, 256.0f}) brain.add_int32_data(bfloat16_bits(v));
  m.init("tenth", {4}, {0.1f, 0.1f, 0.1f, 0.1f});
  attr_i(m.node("Cast", {"tenth"}, {"tenth16"}), "to", TP::FLOAT16);
  m.node("Mul", {"x", "w_raw"}, {"a"});
  m.node("Add", {"a", "w_typed"}, {"b"});
  m.node("Mul", {"b", "w_bf16"}, {"c"});
  m.node("Add", {"c", "tenth16"}, {"y"});
  m.output("y");
  const Graph g = import(m);
  const std::vector<float> x = rnd(4, 900);
  const Tensor out = run_reference(g, {Tensor{{4}, Layout::any, x}})[0];
  const float b16[] = {2.0f, -0.5f, 1.5f, 256.0f};
  for (size_t i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(out.data[i], (x[i] * w[i] + w[i]) * b16[i] + 0.0999755859375f) << i;
}

// FLOAT16 graph inputs and outputs are float32 at the boundary; a Cast of a runtime tensor to
// FLOAT16 passes it through (float32 inside Kiln); a Cast to an integer type is still refused.
TEST(OnnxHalf, HalfInputsOutputsAndRuntimeCasts) {
  ModelBuilder m(13);
  m.input("x", {2, 3}, TP::FLOAT16);
  attr_i(m.node("Cast", {"x"}, {"x32"}), "to", TP::FLOAT);
  m.node("Relu", {"x32"}, {"r"});
  attr_i(m.node("Cast", {"r"}, {"y"}), "to", TP::FLOAT16);
  m.output("y");
  auto* out = m.graph().mutable_output(0)->mutable_type()->mutable_tensor_type();
  out->set_elem_type(TP::FLOAT16);
  const Graph g = import(m);
  EXPECT_EQ(g.value(g.inputs[0]).dtype, DType::f32);
  const std::vector<float> x = {-1.0f, 0.3f, 2.0f, -0.1f, 0.123456f, 5.0f};
  const Tensor y = run_reference(g, {Tensor{{2, 3}, Layout::any, x}})[0];
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y.data[i], std::max(x[i], 0.0f)) << i;

  ModelBuilder to_int(13);
  to_int.input("x", {2}, TP::FLOAT16);
  attr_i(to_int.node("Cast", {"x"}, {"y"}), "to", TP::INT32);
  to_int.output("y");
  EXPECT_THAT(onnx_test::import_error(to_int.bytes()), testing::HasSubstr("is not supported"));
}

// A small convolutional network as a float16 converter writes it (every weight FLOAT16, the
// input cast to FLOAT16 and the output back to FLOAT), compiled and run by Kiln, against the
// float32 network with the same weights rounded to float16, run by the reference interpreter.
TEST(OnnxHalf, Float16ModelRunsAsFloat32) {
  const auto build = [](bool half) {
    ModelBuilder m(13);
    m.input("x", {1, 8, 12, 12});
    const auto weights = [&](const std::string& name, const Dims& dims, uint64_t seed) {
      int64_t n = 1;
      for (int64_t d : dims) n *= d;
      std::vector<float> v = rnd(n, seed, -0.3f, 0.3f);
      for (float& f : v) f = onnx::round_to_dtype(f, TP::FLOAT16);
      TP& t = *m.graph().add_initializer();
      ModelBuilder::fill(t, name, dims, half ? TP::FLOAT16 : TP::FLOAT);
      for (float f : v) half ? t.add_int32_data(half_bits(f)) : t.add_float_data(f);
    };
    weights("w1", {16, 8, 3, 3}, 910), weights("b1", {16}, 911);
    weights("w2", {16, 16, 3, 3}, 912), weights("b2", {16}, 913);
    std::string in = "x";
    if (half) attr_i(m.node("Cast", {"x"}, {"x16"}), "to", TP::FLOAT16), in = "x16";
    auto& c1 = m.node("Conv", {in, "w1", "b1"}, {"c1"});
    attr_ints(c1, "pads", {1, 1, 1, 1});
    m.node("Relu", {"c1"}, {"r1"});
    auto& c2 = m.node("Conv", {"r1", "w2", "b2"}, {"c2"});
    attr_ints(c2, "pads", {1, 1, 1, 1}), attr_ints(c2, "strides", {2, 2});
    m.node("Add", {"c2", "c2"}, {half ? "y16" : "y"});
    if (half) attr_i(m.node("Cast", {"y16"}, {"y"}), "to", TP::FLOAT);
    m.output("y");
    return m;
  };
  const Graph half = import(build(true)), full = import(build(false));
  const Value& in = half.value(half.inputs[0]);
  const Tensor x{in.shape, in.layout, rnd(num_elements(in.shape), 914)};
  const Tensor want = run_reference(full, {x})[0];
  ModelOptions o;
  o.generate_kernels = testing_util::test_generator();
  Model model(run_passes(half), o);
  ASSERT_TRUE(model.run({x}).is_ok());
  const TensorView out = model.output(0);
  const Tensor got =
      to_layout(Tensor{out.shape, out.layout,
                       std::vector<float>(out.data, out.data + num_elements(out.shape))},
                want.layout);
  onnx_test::expect_close(got, want, 1e-4, 1e-5);
}

}  // namespace
}  // namespace kiln::graph
