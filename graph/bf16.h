// bfloat16: the upper 16 bits of a float32 (8 exponent bits, 7 stored mantissa bits). What the
// bf16 convolutions (Conv2d::bf16) round their operands to, here for the reference interpreter
// and for the runtime's weight packing; the generated kernels round with Halide expressions of
// their own.
#pragma once

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

}  // namespace kiln::graph
