// Limits the default direct schedules put on a register tile last, after choosing it for the
// layer's shape: what the epilogue and the L1 cache leave room for.
#include <algorithm>

#include "schedules/conv_params_internal.h"

namespace kiln::schedules::internal {
namespace {

// The L1 data cache: 64-byte lines in 64 sets (32 KB of 8 ways on Zen 4; 48 KB of 12 on Ice Lake,
// Sapphire Rapids and Zen 5), of which the smallest associativity is assumed.
constexpr int64_t kLineBytes = 64, kSets = 64, kWays = 8;

int64_t gcd(int64_t a, int64_t b) { return b == 0 ? a : gcd(b, a % b); }

// The most tile pixels whose input lines fit in the L1 sets they map to. One reduction step of
// a tile broadcasts one input element per pixel, `stride` bytes apart; the lines of pixels a
// multiple of 4 KB apart share a set, and more of them than the set's ways evict each other on
// every step.
int64_t l1_pixel_limit(int64_t stride) {
  const int64_t lines = std::max<int64_t>(1, stride / kLineBytes);
  const int64_t sets = stride % kLineBytes ? kSets : kSets / gcd(lines, kSets);  // pixels' sets
  return kWays * sets;
}

}  // namespace

RegisterBlock limited_tile(const ConvShape& s, const Halide::Target& t, RegisterBlock b) {
  if (b.vectors < 1 || s.grouped || s.depthwise) return b;
  // A costly epilogue (graph::costly_step) after a reduction of at most 128 multiply-adds per
  // output: at most 16 accumulators. With 28, LLVM spills them to make room for the
  // epilogue's constants and temporaries, and the epilogue took 41% of a 3x3/s2 RGB stem's
  // cycles (perf) against its loop's 52%. SiLU, AVX-512, 2 threads, kiln tune --set, 2x14 ->
  // 2x8 (the reduction's length): 1x1 16 -> 96 at 112x112 1.16-1.21x (16), 3x3/s2 RGB stems
  // 1.09-1.10x (27), 1x1 32 -> 96 1.19x (32), 64 -> 96 1.05x (64), 96 -> 32 1.05x (96), 3x3/s2
  // 16 -> 32 1.02x (144), 3x3/s2 64 -> 64 0.90x (576). AVX2's 2x6 tiles keep 12 (2x4: 0.93x).
  const int64_t reduction = int64_t{s.kernel_w} * s.kernel_h * s.reduction_channels;
  if (s.costly_epilogue && reduction <= 128 && t.has_feature(Halide::Target::AVX512) &&
      b.vectors * b.pixels > 16)
    b.pixels = std::max(1, 16 / b.vectors);
  // Pixels whose inputs alias in L1: 1024 input channels (4 KB per pixel), or 512 read at
  // stride 2, put every pixel of a tile in one set. ResNet-50's 14x14 1024 -> 512 1x1 and its
  // 512 -> 1024 1x1/s2 downsample (deep, 2x14) took 1.45 and 1.17 ms; 2x7 0.95-0.99 and 0.98,
  // 4x7 0.91-0.96 and 0.92-0.96 (kiln tune --set, 2 threads, Zen 4, interleaved). The tile
  // takes the widest divisor of the row within the limit, if one reaches half of it.
  const int64_t stride = int64_t{s.reduction_channels} * s.stride_w * (s.bf16 ? 2 : 4);
  const int64_t limit = l1_pixel_limit(stride);
  if (b.pixels > limit) {
    int pixels = static_cast<int>(limit);
    for (int64_t p = limit; p * 2 >= limit; --p)
      if (s.out_width % p == 0) {
        pixels = static_cast<int>(p);
        break;
      }
    b.pixels = pixels;
  }
  return b;
}

}  // namespace kiln::schedules::internal
