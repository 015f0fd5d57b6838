// The default schedules of direct convolutions (wide, deep, grouped, depthwise): the register
// tile each shape gets, its task split and staging (conv_params.h says what each default
// chooses). Validation, the Winograd and AMX defaults and the choice of Winograd:
// conv_params.cpp.
#include <algorithm>
#include <cmath>

#include "schedules/conv_params.h"
#include "schedules/conv_params_internal.h"
#include "schedules/conv_schedule.h"
#include "schedules/depthwise_schedule.h"
#include "schedules/weight_prefetch.h"

namespace kiln::schedules {

using namespace internal;

namespace {

// The first of the target's preferred tiles that fits the output (the lists end with 1x1).
RegisterBlock preferred_block(const ConvShape& s, const Halide::Target& t, int seven_wide) {
  const int vec = vector_lanes(t);
  // Fewer channels than a vector: one vector of them (masked) by as many pixels as a 1-vector
  // tile takes. An 8 -> 8 3x3 at 32x32 (AVX-512, 2 threads): 41.8 us with one pixel per tile,
  // 19.7 with 14 (321 us before the vector was computed whole).
  if (s.out_channels < vec) {
    for (const RegisterBlock& b : cpu_register_blocks(t, seven_wide))
      if (b.vectors == 1) return {0, std::min(b.pixels, s.out_width)};
    return {0, 1};
  }
  for (const RegisterBlock& b : cpu_register_blocks(t, seven_wide))
    if (b.vectors * vec <= tile_channels(s, vec) && b.pixels <= s.out_width) return b;
  return {1, 1};
}

// AVX-512, a pointwise (1x1, unpadded) layer with whole blocks of 4 output-channel vectors and
// output rows of 16 pixels or more (graph::PlanOptions::flat_pointwise makes a stride-1 layer's
// 14x14 image 2 rows of 98 pixels, 28x28 and 56x56 ones rows of 112): 4 vectors by 6, 5 or 4
// pixels, whichever computes the fewest columns past the row's end (the widest on a tie), where
// that is under 4% of the row; else `b`. Per reduction step a 4x6 tile loads 4 weight vectors
// and broadcasts 6 inputs for 24 multiply-adds, where 2x14 broadcasts 14 for 28: each
// broadcast input's cache line, a different pixel's, comes from L2, and 2x14 tiles needed twice
// as many of them per multiply-add. ResNet-50's 1x1 layers (2 threads, in the network, weights
// aligned, one run each): 2x14 -> 4x6 / 4x5 / 4x4 1.05-1.12x; 1 thread, layer3's 1024 -> 256 0.73
// -> 0.63 ms (4x6); its stride-2 256 -> 512 downsample (28-pixel rows) 4x4 1.07x twice (kiln tune
// --set). The spilling 4x7 (33 registers) measured 0.55-0.65x of 2x14 in a C++ copy of the loop.
// 3x3 layers, whose staged input strips stay in cache, measured 0.98x and 1.08x: not taken. A
// wide-family reduction whose 4-vector block of weights is over 32 KiB (more than 128 input
// channels; deep's chunks keep them in L1) reads them from L2 once per tile, 64 bytes per 4
// multiply-adds: it takes the widest of 6, 5 and 4 pixels that computes under 4% more columns than
// the row has, not the fewest columns. kiln tune --set, 2 threads, an Intel Xeon with 48 KiB of L1
// (two trials each, interleaved with the default): ResNet-50's 512 -> 128 on 112-pixel rows 4x4 ->
// 4x6 1.10x twice (2x14 1.14-1.15x), its 256 -> 64 4x4 -> 4x6 1.04-1.07x; its 1024 -> 256 on
// 98-pixel rows keeps 4x5 (4x6 computes 4.1% more columns there; it measured 1.01-1.03x, 2x14
// 1.09-1.11x); where the weights stay in L1 the fewest columns win: 128 -> 512 4x4 -> 4x6
// 0.97-0.99x (2x14 0.94-0.95x).
RegisterBlock pointwise_block(const ConvShape& s, const Halide::Target& t, RegisterBlock b,
                              bool chunked) {
  const int lanes = vector_lanes(t);
  if (!t.has_feature(Halide::Target::AVX512) || s.kernel_w != 1 || s.kernel_h != 1 || s.padded ||
      s.bf16 || s.grouped || s.depthwise || s.out_channels % (4 * lanes) != 0 || s.out_width < 16)
    return b;
  const auto columns = [&](int pixels) { return ceil_div(s.out_width, pixels) * pixels; };
  const auto close_fit = [&](int pixels) {
    return int64_t{columns(pixels)} * 100 < int64_t{s.out_width} * 104;
  };
  const bool weights_in_l1 = chunked || int64_t{s.reduction_channels} * 4 * lanes * 4 <= 32 * 1024;
  if (!weights_in_l1) {
    for (int pixels : {6, 5, 4})
      if (close_fit(pixels)) return {4, pixels};
    return b;
  }
  int best = 6;
  for (int pixels : {5, 4})
    if (columns(pixels) < columns(best)) best = pixels;
  if (!close_fit(best)) return b;
  return {4, best};
}

// A register tile for `s` that wastes less than `b` on the output's edges: `b` itself unless it
// computes over 10% more (padded columns x padded channels) than the output has, else the tile
// with the least work, each multiply-add costed at least (weight loads + broadcasts) / (0.75 x
// multiply-adds) (tiles of one vector load about one operand per multiply-add), among those
// that fit the output and the register file with their weight vectors and broadcast and hold at
// least half the register file in accumulators (fewer reload each weight vector for too few
// pixels); taken when it costs at most 0.9x `b`. AVX-512, 2 threads, kiln tune --set:
// Inception's 17x17x48 3x3/s2 layer, whose 2x14 tiles compute 28 columns and 64 channels per row
// (2.2x its work): 3x9 1.9-2.0x faster, 3x6 1.68x, 1x17 1.73x, 2x9 1.35x; MobileNetV2's 56x56x144
// 1x1 (2x14: 160 channels): 3x7 1.04x, 3x8 (chosen: equal cost, more accumulators) 1.02x, 3x4
// (12 accumulators) 0.97x. Whole models, 4 alternating runs: inception_tiny 0.80-0.83 ->
// 0.67-0.70 ms, ConvNeXt-tiny2 1.29-1.36 -> 1.17-1.22 ms, SqueezeNet and MobileNetV2 in noise.
RegisterBlock fitted_block(const ConvShape& s, const Halide::Target& t, RegisterBlock b) {
  const int vec = vector_lanes(t);
  const int registers = vector_registers(t);
  const auto cost = [&](RegisterBlock c) {
    const int64_t lanes = int64_t{c.vectors} * vec;
    const double columns = double(ceil_div(s.out_width, c.pixels) * c.pixels);
    const double channels = double(ceil_div(s.out_channels, lanes) * lanes);
    const double loads_per_fma = double(c.vectors + c.pixels) / (c.vectors * c.pixels);
    return columns * channels * std::max(1.0, loads_per_fma / 0.75);
  };
  if (b.vectors < 1 || cost(b) <= 1.1 * s.out_width * s.out_channels) return b;
  RegisterBlock best = b;
  for (int v = 1; v <= 4 && v * vec <= tile_channels(s, vec); ++v)
    for (int px = 1; px <= s.out_width; ++px)
      if (2 * v * px >= registers && v * px + v + 1 <= registers) {
        const double c = cost({v, px}), least = cost(best);  // ties: the most accumulators
        if (c < least || (c == least && v * px > best.vectors * best.pixels)) best = {v, px};
      }
  return cost(best) <= 0.9 * cost(b) ? best : b;
}

}  // namespace

ConvParams default_depthwise_params(const ConvShape& s) {
  ConvParams p;
  p.family = ConvFamily::depthwise;
  // 4 to 8 pixels: the tile that computes the fewest columns past the row's end (ShiftInwards
  // computes them twice), the widest of equals. 8 took 14% more columns on 28- and 14-wide rows;
  // MobileNetV2's 56x56 144-channel 3x3/s2 (28 wide), kiln tune --set, 2 threads: 1x8 28.1-28.8
  // us, 1x7 23.7, 1x4 23.8, 1x14 25.6.
  int pixels = s.out_width >= 4 ? 4 : 1;
  for (int px = 5; px <= std::min(8, s.out_width); ++px)
    if (ceil_div(s.out_width, px) * px <= ceil_div(s.out_width, pixels) * pixels) pixels = px;
  p.block = {1, pixels};
  // About 8 bands of at least 2 rows: 2 threads get 4 each, and a staged band re-reads Kh - 1
  // halo rows, so taller bands waste less (2-row bands re-read 2 of every 4 input rows of a 3x3
  // stride-1 layer). Then the band height whose tasks 2 and 4 threads share most evenly
  // (balanced_band_rows): a 28-row output in bands of 4 is 7 tasks, one thread's 4 against the
  // other's 3. MobileNetV2's 56x56 144-channel 3x3/s2 (28 rows; kiln tune --set, 2 threads,
  // two runs of 41 calls each against the default's 20.9-22.9 us): rows=7 18.8-19.1 us, 2
  // 19.0-19.2, 14 18.9-19.2, 1 19.4-19.7.
  const int preferred =
      std::min(s.out_height, std::max(2, static_cast<int>(ceil_div(s.out_height, 8))));
  const bool staged = !s.expanded && (s.computed_input || s.kernel_w > 7);
  p.rows =
      balanced_band_rows(s.out_height, s.batch, preferred, staged ? std::min(2, s.out_height) : 1);
  // In place, the channel loop inside the pixel-tile loop: MobileNetV2's 3x3 layers took
  // 0.50-0.81x the time of the staged band walked channel vector by channel vector (bench_conv,
  // AVX2, 2 threads; docs/benchmarks.md). Windows up to 7 wide as well, since a row's taps are
  // unrolled (depthwise_schedule.cpp): timed inside their models (kiln tune --set, 2 threads,
  // an Intel Xeon, AVX-512 / AVX2), EfficientNet's 5x5 1.22x / 1.10x, MobileNetV3's 5x5
  // 1.47x / 1.34x, ConvNeXt's 7x7 1.31x / 1.05x, GhostNet's 5x5 stride 2 1.68x / 1.41x (before
  // the taps were unrolled, ConvNeXt's 7x7 took 0.33 ms in place against 0.117 staged). Wider
  // windows keep the staged band.
  p.stage_input = staged;
  p.channels_inside = !p.stage_input;
  return p;
}

// Bytes of a direct convolution's weights.
static int64_t direct_weight_bytes(const ConvShape& s) {
  return int64_t{s.reduction_channels} * s.kernel_w * s.kernel_h * s.out_channels *
         (s.bf16 ? 2 : 4);
}

// The direct default chosen for the layer's shape, before the tile limits.
static ConvParams direct_params_for_shape(const ConvShape& s, const Halide::Target& t);

// Whether the deep schedule `p` prefetches its next chunk of weights by default
// (schedules/weight_prefetch.h): in a model whose weights do not stay in cache
// (ConvShape::cold_weights), where the layer's are over 2 MiB (a core's L2) and a task applies each
// weight to at most 128 output pixels (streaming them is then a large part of its time), with an
// accumulator within the pass's stack limit. Kernel medians in `kiln bench --per-layer` (2 threads,
// an Intel Xeon, 4 or 5 runs alternating with the binary before, five such comparisons):
// ResNet-50's 7x7 layers (4-9.4 MiB, 49 pixels a task) 1.06-1.19x and its 3x3/s2 to 14x14 (2.3 MiB,
// 98 pixels) 1.04-1.08x; not taken: its 14x14 1x1 layers (196 pixels; 0.88-1.00x in three trials,
// where one chunk serves 28 passes and the prefetch's address arithmetic costs more than the wait
// it hides), MobileNetV2's 7x7 layers of 0.4-1.6 MiB (0.85-0.94x) and, in models whose weights stay
// in cache, ResNet-18's 7x7 layers (0.97x) and a VGG's (0.91-0.96x). AVX-512 targets only: on an
// AMD Zen 4 (2 threads, `kiln tune --set prefetch=0`, in the network, interleaved) ResNet-50's
// stage-4 layers ran 1.09-1.10x faster with it on AVX-512 but 1.13-1.26x slower with it on AVX2
// (3x4 tiles: 12 multiply-adds per step where AVX-512's 4x7 has 28 to cover a step's prefetches).
static bool deep_prefetch_pays(const ConvShape& s, const ConvParams& p, const Halide::Target& t) {
  if (!s.cold_weights || s.bf16 || p.block.vectors < 1 || t.arch != Halide::Target::X86 ||
      t.has_gpu_feature() || !t.has_feature(Halide::Target::AVX512))
    return false;
  if (direct_weight_bytes(s) <= (int64_t{2} << 20)) return false;
  const int64_t channels = int64_t{p.block.vectors} * vector_lanes(p, t);
  const int64_t blocks = ceil_div(s.out_channels, channels);
  const int64_t bands = std::clamp<int64_t>(ceil_div(p.tasks, blocks), 1, s.out_height);
  const int64_t rows = ceil_div(s.out_height, bands);
  const int64_t columns = ceil_div(s.out_width, p.block.pixels) * p.block.pixels;
  return rows * s.out_width <= 128 && rows * columns * channels * 4 <= kMaxPrefetchAcc;
}

ConvParams default_direct_conv_params(const ConvShape& s, const Halide::Target& t) {
  ConvParams p = direct_params_for_shape(s, t);
  // Deep's tile over a whole reduction for outputs of at most 64 pixels whose weights are at
  // most 256 KiB: the wide family with that tile, 2 rows per task, no channel split, the input
  // staged. Timed inside their models (kiln tune --set, 2 threads, an Intel Xeon), 1.05-1.41x
  // the deep default on nine such layers of the families (7x7 and 8x8 outputs, 29-240 KiB), and
  // 1.2-1.35x on SKNet's 8x8 128 -> 256 1x1 in `kiln bench --per-layer` with it as a record.
  // Deep stays for larger weights: mixed at 360-600 KiB, and needed by ResNet's stage 4.
  if (p.family == ConvFamily::deep && int64_t{s.out_height} * s.out_width <= 64 &&
      direct_weight_bytes(s) <= (int64_t{256} << 10)) {
    p.family = ConvFamily::wide;
    p.rows = std::min(2, s.out_height);
    p.split_channels = false;
    p.stage_input = true;
  }
  // 16-register targets (AVX2), a stride-1, unpadded 1x1 layer of at most 64 output pixels and
  // at most 2 MiB of weights on deep's 3x4 tiles: the wide family with those tiles, 4 rows a
  // task, no channel split, the input read in place. On an AMD Zen 4 running AVX2 code (kiln
  // tune --set, 2 threads, in the network, interleaved) MobileNetV2's 7x7 layers 160 -> 960,
  // 960 -> 160, 960 -> 320, 576 -> 160 (after a stride-2 block) and 320 -> 1280 took 1.04-1.32x
  // less time; ResNet-50's 4 MiB stage-4 1x1 layers did not (0.54-1.01x) and keep deep.
  if (p.family == ConvFamily::deep && t.arch == Halide::Target::X86 && !t.has_gpu_feature() &&
      !t.has_feature(Halide::Target::AVX512) && s.kernel_h == 1 && s.kernel_w == 1 &&
      s.stride_h == 1 && s.stride_w == 1 && !s.padded && !s.bf16 && !s.grouped &&
      int64_t{s.out_height} * s.out_width <= 64 && direct_weight_bytes(s) <= (int64_t{2} << 20) &&
      p.block.vectors == 3 && p.block.pixels == 4) {
    p.family = ConvFamily::wide;
    p.rows = std::min(4, s.out_height);
    p.split_channels = false;
    p.stage_input = false;
  }
  if (p.family == ConvFamily::wide || p.family == ConvFamily::deep)
    p.block = limited_tile(s, t, p.block);
  if (p.family == ConvFamily::deep) p.prefetch = deep_prefetch_pays(s, p, t);
  return p;
}

ConvParams direct_params_for_shape(const ConvShape& s, const Halide::Target& t) {
  if (s.depthwise) {
    ConvParams p = default_depthwise_params(s);
    if (s.expanded) {
      p.rows = expansion_tasks(s.out_channels, s.out_height, s.batch, t).rows;
      // AVX-512, stride 1, rows of 9 to 14 pixels: the whole row per tile. MobileNetV2's
      // 14x14 expansions into their depthwise convolutions (64 -> 384 and 96 -> 576; kiln tune
      // --set, 2 threads, an Intel Xeon, two trials each interleaved with the default): 1x7
      // -> 1x14 1.25-1.31x, 1x4 1.17-1.20x; its stride-2 one onto a 14-wide output 1.02x, the
      // 28-wide ones 0.96-0.99x (kept).
      if (t.has_feature(Halide::Target::AVX512) && s.stride_w == 1 && s.out_width > 8 &&
          s.out_width <= 14)
        p.block = {1, s.out_width};
    }
    return p;
  }
  ConvParams p;
  if (s.narrow_groups) {
    // One vector by 8 pixels (the depthwise tile), or the whole row when it is narrower.
    // `kiln tune --set` on ResNeXt's 4-channel 3x3 (AVX2, 2 threads, interleaved, three runs
    // each): 1x8 1.11-1.22x and 1x7 1.06-1.17x the speed of 1x4, 1x6 0.99-1.04x. With
    // AVX-512's 32 registers, the widest tile of 8 to 14 pixels that computes the fewest columns
    // past the row's end (ShiftInwards computes them twice): ResNeXt's g16 layers (28 and 56
    // wide) took 1.07-1.16x less time with 1x14 than with 1x8, and 1x12 and 1x16 0.90-0.99x
    // (2 threads, interleaved with the default).
    p.family = ConvFamily::grouped;
    int pixels = std::clamp(s.out_width, 1, 8);
    if (t.has_feature(Halide::Target::AVX512) && s.out_width > 8) {
      const auto columns = [&](int px) { return (s.out_width + px - 1) / px * px; };
      for (int px = 9; px <= std::min(14, s.out_width); ++px)
        if (columns(px) <= columns(pixels)) pixels = px;
    }
    p.block = {1, pixels};
    return p;
  }
  const int64_t pixels = int64_t{s.out_height} * s.out_width;
  const int64_t taps = int64_t{s.kernel_h} * s.kernel_w;
  // Weights larger than a core's L2 on a small output: the wide schedule's row tasks each
  // stream all of them (SqueezeNet's 13x13 512 -> 1000 classifier: 13 tasks of 2 MB each),
  // where deep's channel-block tasks read each weight once. ResNet-50 in the network, wide
  // against deep, 3 alternating runs: layer3's 512 -> 1024 downsample 0.89-0.98 -> 0.85-0.87
  // ms, layer4.0's 1024 -> 512 1x1 0.85-0.94 -> 0.81-0.84 ms.
  const int64_t weight_bytes = direct_weight_bytes(s);
  const bool streamed = pixels <= 196 && weight_bytes > (int64_t{3} << 19);
  if (pixels == 1 && weight_bytes <= (int64_t{256} << 10)) {
    // One output pixel and at most 256 KiB of weights (the squeeze and excite 1x1s of SE blocks,
    // after a global pooling): the wide family in one task, since waking the other thread for
    // a few thousand multiply-adds costs more than they do. Timed inside their models (kiln
    // tune, 2 threads, an Intel Xeon), the tuner's single-task winners against the deep
    // default's channel-block tasks: MobileNetV3's and EfficientNet's 1.25-3.2x (0.4-1.9 us).
    p = default_wide_params(s, t);
    p.split_channels = false;
    // Up to 4 channel vectors per tile: a 1-pixel tile of one vector waits on the FMA latency
    // at every reduction step.
    const int vec = vector_lanes(t);
    if (s.out_channels >= vec)
      p.block = {static_cast<int>(std::min<int64_t>(4, tile_channels(s, vec) / vec)), 1};
    return p;
  }
  const bool deep = pixels <= 64 || streamed ||
                    (pixels <= 196 && taps > 1 && s.reduction_channels * taps >= 1024);
  if (deep) {
    p.family = ConvFamily::deep;
    // 7-wide outputs take 3x7 tiles (21 accumulators) on AVX-512, refined below.
    p.block = preferred_block(s, t, 3);
    if (streamed && taps == 1 && t.has_feature(Halide::Target::AVX512) && s.out_width >= 8 &&
        s.out_width <= 13 && tile_channels(s, vector_lanes(t)) >= 2 * vector_lanes(t)) {
      // A whole row per tile, as the wide default takes on such rows, and chunks of 144 steps
      // (18 KB of a 2-vector block's weights). SqueezeNet 1.1's classifier (13x13 512 -> 1000,
      // 1x1; wide 2x13 rows=1 before), kiln tune --set, 2 threads, AVX-512: 3x7 chunk=288
      // 0.81-0.90x, 3x7 chunk=144 1.05-1.06x, 2x13 chunk=144 1.04-1.17x, 2x13 chunk=288
      // 1.04-1.12x; the whole model with this schedule as a database record, 3 alternating
      // runs: 2.90 / 2.66 / 2.68 -> 2.52 / 2.50 / 2.45 ms; as the default, the binaries before
      // and after alternating 5 times, within the noise (2.62-2.99 against 2.61-3.18 ms).
      p.block = {2, s.out_width};
      p.chunk = 144;
      return p;
    }
    if (t.has_feature(Halide::Target::AVX512)) {
      // 4 vectors (4x7, though its 28 accumulators leave too few registers and one spills)
      // where the channels are whole blocks of 4: ResNet-18's 7x7 512 -> 512 layer 1.01-1.04x
      // warm, 1.15-1.19x with the caches evicted, against 3x7; kiln tune picked 4x7 on 5 of the
      // 7x7 layers of ResNet-18 and -50 (1.05-1.25x; 2 threads, an Intel Xeon; on a Zen 5, 1
      // thread, 3x7 had measured 226 GFLOP/s against 217). Else 2 vectors where 3 would
      // compute over 10% more channels than the layer has and 2 fit it exactly: MobileNetV2's
      // 7x7 960 -> 160 layer (10 vectors; 3x7 computes 12) took 39.5 us with 3x7 and 33.6
      // with 2x7.
      const int64_t lanes = vector_lanes(t), vectors = ceil_div(s.out_channels, lanes);
      if (p.block.vectors == 3 && s.out_channels % (4 * lanes) == 0)
        p.block.vectors = 4;
      else if (p.block.vectors == 3 && ceil_div(vectors, 3) * 3 * 10 > vectors * 11 &&
               s.out_channels % (2 * lanes) == 0)
        p.block.vectors = 2;
      // Outputs narrower than 7 pixels (one pixel per tile: the list's tiles all need 7) or that
      // 7-pixel tiles cover badly (an 8-wide row computes 14 columns, the update rounding its
      // last tile up): the fitted tile. kiln tune --set, 2 threads: a VGG-11 6x6 256 -> 256 3x3
      // 714 -> 207 us (1x1 -> 4x6); a RepVGG 8x8 192 -> 192 3x3 240 -> 161 us (4x7 -> 3x8).
      if (p.block.pixels == 1 ||
          ceil_div(s.out_width, p.block.pixels) * p.block.pixels * 10 > int64_t{s.out_width} * 11)
        p.block = fitted_block(s, t, p.block);
      // Only tiles that divide the row: deep rounds its last tile up, so any other would need
      // the input staged (ResNet-50's 14x14 1024 -> 512 keeps 2x14 on its 98-pixel rows).
      if (const RegisterBlock b = pointwise_block(s, t, p.block, /*chunked=*/true);
          s.out_width % b.pixels == 0)
        p.block = b;
      if (p.block.vectors == 4) {
        // A chunk of 4 vectors' weights in L1 (144 steps: 36 KB, as 288 are for 2 vectors), and
        // with 8 or more channel blocks no bands of rows (each block's weights read once per
        // call, not once per band). In ResNet-50 (2 threads, 2 alternating runs, kernel
        // medians): its 7x7 3x3 layers 1.10-1.15 -> 0.98-0.99 ms and 0.91-1.00 -> 0.81-0.84,
        // its 2048 -> 512 1x1 0.43-0.44 -> 0.40-0.43; kiln tune had found chunk=144 tasks=8 on
        // those three (1.03-1.11x alone).
        // An odd count of blocks under 16 keeps 16 tasks (2 bands of rows per block): as many
        // tasks as blocks would leave one of 2 threads a block more. MobileNetV2's 7x7 160 ->
        // 960 (15 blocks; kiln tune --set tasks=16, 2 threads, three runs against 15 tasks)
        // 1.04-1.11x, its 20-block 320 -> 1280 1.01x; in the network (six alternating runs,
        // kernel medians) the second and third of those layers 0.0610-0.0618 -> 0.0593-0.0601
        // ms, the first unchanged (0.0610-0.0625 both).
        p.chunk = 144;
        const int64_t blocks = ceil_div(s.out_channels, 4 * lanes);
        if (blocks >= 8 && (blocks % 2 == 0 || blocks >= 16)) p.tasks = 8;
      }
      return p;
    }
    if (p.block.vectors < 1) return p;
    // 16-register targets: 3x4 tiles (12 accumulators) where they fit and compute no more
    // columns than the preferred tile (a 2x6 row computes 12 columns for 7: its second tile
    // shifts inwards onto the first; 3x4 computes 8, and 16 for 14 against 18). kiln tune
    // --set, 2 threads, AVX2, against the 1x7 tiles 7-wide layers had: ResNet-18's and -50's
    // and MobileNetV2's 7x7 layers 1.12-1.48x warm and 1.07-1.26x with the caches evicted;
    // ResNet-50's 14-wide 3x3/s2 layer 1.09x against 2x6. (The wide family measured 0.96-1.08x
    // with 3x4 on ResNet-50's 1x1 layers and keeps 2x6.)
    const auto columns = [&](int pixels) { return ceil_div(s.out_width, pixels) * pixels; };
    if (tile_channels(s, vector_lanes(t)) >= 3 * vector_lanes(t) && s.out_width >= 4 &&
        columns(4) <= columns(p.block.pixels))
      p.block = {3, 4};
    else if (s.out_width == 7)  // too few channels for 3 vectors: 1x7 computes no column twice
      p.block = {1, 7};
    return p;
  }
  return default_wide_params(s, t);
}

ConvParams default_wide_params(const ConvShape& s, const Halide::Target& t) {
  ConvParams p;
  const int64_t taps = int64_t{s.kernel_h} * s.kernel_w;
  p.family = ConvFamily::wide;
  // Measured on the reference layer (1 thread): 2x14 and 4x7 are equal there, but 4x7 needs 33
  // registers (LLVM spills one accumulator) and streams twice the weight bytes per FMA: 64% vs
  // 78% of peak on a 256->256 channel 3x3 layer. 4x7 stays for 7..13 pixel wide outputs.
  p.block = preferred_block(s, t, 4);
  // AVX-512, outputs 8..13 pixels wide: a whole row per tile, 2 (or 1) vectors by the width,
  // instead of two overlapping 7-pixel tiles of 4x7 (33 registers: one spills) or 2x7. kiln
  // tune --set, 2 threads, 13x13 outputs (SqueezeNet 1.1): the 512 -> 1000 classifier 982 ->
  // 732 us, a 1x1 384 -> 64 38 -> 28 us, a 3x3 64 -> 256 1.04x.
  if (t.has_feature(Halide::Target::AVX512) && s.out_width >= 8 && s.out_width <= 13 &&
      s.out_channels >= vector_lanes(t))
    p.block = {tile_channels(s, vector_lanes(t)) >= 2 * vector_lanes(t) ? 2 : 1, s.out_width};
  p.block = fitted_block(s, t, p.block);
  p.block = pointwise_block(s, t, p.block, /*chunked=*/false);
  // Short outputs have too few row strips to keep 2 threads busy: split channel blocks too.
  p.split_channels = p.block.vectors > 0 && s.out_height < 10;
  // 1x1 kernels have no halo rows to amortize: a row a strip. Larger windows: strips of 2 rows
  // (a staged strip re-reads Kh - 1 halo rows), or without a channel split, of 2 to 4 rows
  // whose tasks 2 and 4 threads share most evenly: Inception's 17-row outputs in 6 strips of 3,
  // not 9 of 2 (one of 2 threads ran 5 of the 9; 4 threads run 2 of 6 or 3 of 9 strips, 6 rows
  // either way). Its 36x36 64 -> 48 3x3/s2 (kiln tune --set, 2 threads, 41 calls): 61.5-62 ->
  // 59.0 us.
  if (taps == 1 || s.out_height < 2)
    p.rows = 1;
  else
    p.rows = p.split_channels ? 2 : balanced_band_rows(s.out_height, s.batch, 2, 2, 0, 4);
  p.stage_input = s.bf16 || !(taps == 1 && !s.padded);
  return p;
}

}  // namespace kiln::schedules
