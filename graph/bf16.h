// 16-bit floats. bfloat16: the upper 16 bits of a float32 (8 exponent bits, 7 stored mantissa
// bits), what the bf16 convolutions (Conv2d::bf16) round their operands to, here for the
// reference interpreter and for the runtime's weight packing; the generated kernels round with
// Halide expressions of their own. IEEE binary16 (float16): read from half-precision ONNX
// tensors and .npy files.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln::graph {

// The bfloat16 nearest to f, ties to even; a NaN stays a (quiet) NaN.
inline uint16_t to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float from_bf16_bits(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// f rounded to the nearest bfloat16, as a float.
inline float round_to_bf16(float f) { return from_bf16_bits(to_bf16_bits(f)); }

// The float of IEEE binary16 bits (exact: every float16 is a float32).
inline float from_half_bits(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  const float v = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -24)  // 0, subnormal
                  : exponent == 31
                      ? (mantissa ? NAN : INFINITY)
                      : std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  return bits & 0x8000 ? -v : v;
}

}  // namespace kiln::graph
