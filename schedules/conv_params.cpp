// Convolution schedule parameters: validation, the Winograd and AMX defaults and the choice
// between Winograd and the direct families (the direct families' defaults:
// conv_params_direct.cpp; the text form: conv_params_text.cpp; the tuner's candidates and cost
// model: conv_candidates.cpp; the tile limits the defaults apply last: conv_tile_limits.cpp).
#include "schedules/conv_params.h"

#include <algorithm>
#include <cmath>

#include "runtime/conv_weights.h"
#include "schedules/conv_params_internal.h"

namespace kiln::schedules {
namespace internal {

int vector_lanes(const Halide::Target& t) { return t.natural_vector_size<float>(); }

// Vector registers the accumulators of a register tile may take: the file less two. A tile
// also needs one register per weight vector and one broadcast, so wide tiles such as 4x7 on
// AVX-512 (28 + 4 + 1 = 33) spill one accumulator; the bound still admits them because the
// measurements in the schedules' comments found them worth it on 7..13-pixel-wide outputs.
int vector_registers(const Halide::Target& t) {
  return t.has_feature(Halide::Target::AVX512) ? 32 : 16;
}

int accumulator_registers(const Halide::Target& t) { return vector_registers(t) - 2; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t tile_channels(const ConvShape& s, int vec) {
  return s.whole_channel_blocks ? ceil_div(s.out_channels, vec) * vec : s.out_channels;
}

// Parallel tasks of a schedule (as the schedule files split the loops).
int64_t task_count(const ConvParams& p, const ConvShape& s, const Halide::Target& t) {
  const int64_t channels = p.block.vectors ? int64_t{p.block.vectors} * vector_lanes(p, t) : 1;
  const int64_t channel_blocks = ceil_div(s.out_channels, channels);
  if (p.family == ConvFamily::deep) {
    const int64_t bands = std::clamp<int64_t>(ceil_div(p.tasks, channel_blocks), 1, s.out_height);
    return channel_blocks * ceil_div(s.out_height, ceil_div(s.out_height, bands)) * s.batch;
  }
  if (p.family == ConvFamily::winograd)
    return ceil_div(winograd_tiles_y(s, p.tile), p.rows) * s.batch *
           (p.split_channels ? channel_blocks : 1);
  const int64_t strips = ceil_div(s.out_height, p.rows) * s.batch;
  return p.split_channels ? strips * channel_blocks : strips;
}

int balanced_band_rows(int height, int batch, int preferred, int min_rows, double halo,
                       int max_rows) {
  // Makespan of `rows`-row bands on t threads, in rows, over the ideal height * batch / t: a
  // thread runs at most ceil(tasks / t) tasks of `rows` + `halo` rows each.
  const auto cost = [&](int rows) {
    const int64_t tasks = ceil_div(height, rows) * std::max(1, batch);
    double c = 0;
    for (int t : {2, 4})
      c += static_cast<double>(ceil_div(tasks, t) * t) * (rows + halo) /
           static_cast<double>(int64_t{height} * std::max(1, batch));
    return c;
  };
  int best = preferred;
  const int most = std::min(height, max_rows > 0 ? max_rows : 2 * preferred);
  for (int rows = std::max(1, min_rows); rows <= most; ++rows) {
    const double a = cost(rows), b = cost(best);
    const int da = std::abs(rows - preferred), db = std::abs(best - preferred);
    if (a < b - 1e-9 || (a < b + 1e-9 && (da < db || (da == db && rows > best)))) best = rows;
  }
  return best;
}

}  // namespace internal

using namespace internal;

int vector_lanes(const ConvParams& p, const Halide::Target& t) {
  return p.lanes > 0 ? p.lanes : internal::vector_lanes(t);
}

int winograd_positions(const ConvParams& p, const ConvShape& s) {
  return runtime::winograd_supported(p.tile, s.stride_w)
             ? runtime::winograd_alpha(p.tile, s.stride_w)
             : p.tile + 2;
}

int winograd_tiles_x(const ConvShape& s, int tile) {
  return static_cast<int>(ceil_div(s.out_width, tile));
}
int winograd_tiles_y(const ConvShape& s, int tile) {
  return static_cast<int>(ceil_div(s.out_height, tile));
}

int winograd_min_task_tiles(const ConvShape& s, int tile, int rows) {
  const int tiles_y = winograd_tiles_y(s, tile);
  const int last_rows = tiles_y % rows == 0 ? rows : tiles_y % rows;
  return winograd_tiles_x(s, tile) * std::min(rows, last_rows);
}

std::string winograd_tile_error(int tile, const ConvShape& s) {
  if (tile > s.max_winograd_tile)
    return s.max_winograd_tile == 0
               ? "winograd is off for this layer: the model's output check measured it out of "
                 "tolerance (direct schedules apply)"
               : "winograd tile=" + std::to_string(tile) +
                     " is over this layer's cap of tile=" + std::to_string(s.max_winograd_tile) +
                     ", set by the model's output check";
  if (tile == 4 && s.reduction_channels > kWinograd4MaxChannels)
    return "winograd tile=4 loses too much precision over " +
           std::to_string(s.reduction_channels) + " input channels (at most " +
           std::to_string(kWinograd4MaxChannels) + "; tile=2 applies)";
  return "";
}

namespace {

// Why the Winograd schedule cannot run `s`: what the algorithm needs of the layer, then the
// knobs against the layer and the register file.
std::string winograd_error(const ConvParams& p, const ConvShape& s, const Halide::Target& t) {
  if (t.has_gpu_feature()) return "winograd has no GPU schedule";
  if (s.kernel_w != 3 || s.kernel_h != 3)
    return "winograd takes 3x3 windows only, not " + std::to_string(s.kernel_h) + "x" +
           std::to_string(s.kernel_w);
  if (s.stride_w != s.stride_h || s.stride_w > 2)
    return "winograd takes stride 1 or 2 (the same along both axes), not " +
           std::to_string(s.stride_h) + "x" + std::to_string(s.stride_w);
  if (!runtime::winograd_supported(p.tile, s.stride_w))
    return "winograd tile=" + std::to_string(p.tile) +
           " takes stride 1 only; stride 2 takes tile=2";
  if (s.dilation_w != 1 || s.dilation_h != 1) return "winograd takes dilation 1 only";
  if (s.grouped) return "winograd takes dense (ungrouped) convolutions only";
  if (!s.constant_weights)
    return "winograd needs constant weights (the model transforms them once, when it loads)";
  const int vec = vector_lanes(p, t);
  if (s.out_channels < vec)
    return "winograd needs at least one vector of output channels (" + std::to_string(vec) +
           "), not " + std::to_string(s.out_channels);
  const std::string accuracy = winograd_tile_error(p.tile, s);
  if (!accuracy.empty()) return accuracy;
  if (p.rows > winograd_tiles_y(s, p.tile))
    return "rows=" + std::to_string(p.rows) + " is more than the output's " +
           std::to_string(winograd_tiles_y(s, p.tile)) + " tile rows";
  const RegisterBlock& b = p.block;
  const std::string tile = std::to_string(b.vectors) + "x" + std::to_string(b.pixels);
  const int task_tiles = winograd_min_task_tiles(s, p.tile, p.rows);
  if (b.vectors == 0 || b.vectors * vec > s.out_channels || b.pixels > task_tiles)
    return "block " + tile + " (" + std::to_string(b.vectors * vec) + " channels x " +
           std::to_string(b.pixels) + " tiles) does not fit the output (" +
           std::to_string(s.out_channels) + " channels, " + std::to_string(task_tiles) +
           " tiles of " + std::to_string(p.tile) + " in the smallest task)";
  if (b.vectors * b.pixels > accumulator_registers(t))
    return "block " + tile + " needs " + std::to_string(b.vectors * b.pixels) +
           " accumulator registers; the target has " + std::to_string(accumulator_registers(t));
  return "";
}

}  // namespace

ConvParams default_winograd_params(const ConvShape& s, const Halide::Target& t, int tile) {
  ConvParams p;
  p.family = ConvFamily::winograd;
  // F(4x4) where it is accurate enough and the output is at least 28 pixels wide: on 14x14
  // outputs F(2x2) measured as fast or faster (docs/benchmarks.md).
  // Stride 2 has F(2x2) only (runtime::winograd_matrices).
  p.tile = tile > 0                                                                    ? tile
           : s.stride_w == 1 && winograd_tile_error(4, s).empty() && s.out_width >= 28 ? 4
                                                                                       : 2;
  const int lanes = vector_lanes(t);
  const bool avx512 = t.has_feature(Halide::Target::AVX512);
  const int tiles_x = winograd_tiles_x(s, p.tile), tiles_y = winograd_tiles_y(s, p.tile);
  // Layers with 2 MiB or more of transformed weights and more output channels than tiles
  // (ResNet's 14x14 stages at F(2x2): 49 tiles, 256 channels, 4 MiB; its 28x28 ones at F(4x4):
  // 49 tiles, 128 channels, 2.25 MiB) take a task per block of channels over the whole image
  // (split=1), the input transformed once: a task per tile row read all of the weights, and
  // ResNet-50's 14x14 layers took 1.4-1.8 ms at 28-37% of the FMA peak.
  // kiln tune --set, 2 threads, AVX-512, 4x7 blocks, split against not, F(2x2), warm / caches
  // evicted: 4 MiB 1.37-1.56x / 1.09-1.19x, 8 MiB 1.52x / 1.43x, 2 MiB 1.05x / 1.18x; 1 MiB
  // (128 -> 128, 256 -> 64 channels) lost, 0.6-0.8x. AVX2, 4 MiB, 3x4 blocks: 1.20x evicted.
  // F(4x4), 28x28 128 -> 128, timed inside ResNet-50 (kiln tune, 2 threads, an Intel Xeon):
  // 1.22x (4x7), 1.25x (4x5); found by the tuner's search in the network.
  const double weight_bytes =
      4.0 * std::pow(winograd_positions(p, s), 2) * s.reduction_channels * s.out_channels;
  p.split_channels = s.out_channels > int64_t{tiles_x} * tiles_y && weight_bytes >= 2 << 20;
  p.rows = p.split_channels ? tiles_y : 1;
  // Vectors of output channels: 2 (1 below 2 vectors). On AVX-512, 4 where a tile row has
  // fewer tiles than the 2 x 14 block has columns, so that the block's 28 accumulators are
  // all used (2x7 uses 14): 4x7 against 2x7, same runs, F(2x2) 14x14 128 -> 128 1.17-1.40x,
  // 256 -> 64 1.47-1.94x, F(4x4) 28x28 128 -> 128 1.06-1.15x; 56x56 rows (14 tiles) keep 2x14
  // (4x7 0.84-1.04x). With split=1, at most what leaves 2 blocks of channels (tasks) to share
  // out, and 3 on 16-register targets (the 3x4 block below).
  int vectors = std::clamp(s.out_channels / lanes, 1, 2);
  const int most = avx512 && tiles_x < 14 ? 4 : p.split_channels && !avx512 ? 3 : 2;
  while (vectors < most && ceil_div(s.out_channels, int64_t{vectors + 1} * lanes) >=
                               (p.split_channels ? 2 : 1) &&
         (vectors + 1) * lanes <= s.out_channels)
    ++vectors;
  // By up to the direct schedules' widest tile of accumulators (12 on AVX2, 28 on AVX-512)
  // over `vectors` of tiles, a task's tiles split into equal blocks: a partial last block
  // repeats its overlap with the one before (ShiftInwards). Equal blocks measured 1.0-3.0x the
  // widest ones (2x4 against 2x6 on 7-tile rows, 2x5 against 2x6 on 14-tile rows, AVX2;
  // docs/benchmarks.md).
  const int task_tiles = tiles_x * p.rows;
  const auto block_of = [&](int v) {
    const int widest = std::max(1, cpu_register_blocks(t, 2).front().pixels * 2 / v);
    const int blocks = (task_tiles + widest - 1) / widest;
    return RegisterBlock{v, std::max(1, (task_tiles + blocks - 1) / blocks)};
  };
  // F(2x2) on AVX-512: another count of vectors where the one above computes many channels
  // twice (the last block shifted onto the one before) and another keeps more accumulators busy
  // on whole channels: useful accumulators = block vectors x tiles x the share of the computed
  // channels that are outputs, at least 1.25x the rule's. 48 channels on 16-tile rows: 3x8 (24,
  // none wasted) over 2x8 (16, 12 useful); 96 on 8-tile rows: 3x8 over 4x4. 2 threads, Zen 4:
  // RepVGG's 96 -> 96 at 16x16 in the network (`kiln bench --per-layer`, 3 runs alternating
  // with the rule alone, medians) 3x8 1.30x over 4x4; its stride-2 32 -> 48 and 48 -> 96
  // (`kiln tune`) 3x4 1.26x over 2x8 and 3x4 split=1 1.16x over 4x4. Not F(4x4): the three
  // layers it would change (32 -> 128 at 32x32 to 3x8, 32 -> 64 and 64 -> 64 on 16-tile rows
  // to 4x6) measured 0.89-0.96x in the network.
  const auto useful = [&](const RegisterBlock& b) {
    const int64_t computed =
        ceil_div(s.out_channels, int64_t{b.vectors} * lanes) * b.vectors * lanes;
    return double(b.vectors) * b.pixels * double(s.out_channels) / double(computed);
  };
  RegisterBlock block = block_of(vectors);
  if (avx512 && p.tile == 2)
    for (int v = 1; v <= 4 && v * lanes <= s.out_channels; ++v) {
      const RegisterBlock b = block_of(v);
      if ((!p.split_channels || ceil_div(s.out_channels, int64_t{v} * lanes) >= 2) &&
          useful(b) >= 1.25 * useful(block))
        block = b;
    }
  p.block = block;
  // F(2x2) on 16-register targets: 3 vectors by up to 4 tiles (12 accumulators). kiln tune
  // --set, 2 threads, AVX2, 7-tile rows (14x14 outputs, ResNet-18's and -50's stage 3):
  // 1.09-1.16x warm and 1.20x with the caches evicted against 2x4. Not F(4x4): 0.91x on 28x28
  // and 56x56 layers.
  if (p.tile == 2 && !avx512 && !p.split_channels && p.block.pixels <= 4 &&
      s.out_channels >= 3 * lanes)
    p.block.vectors = 3;
  // The next position's transformed weights prefetched (schedules/weight_prefetch.h) where a
  // task per block of channels streams over 2 MiB of them (a core's L2) on every call: a
  // position's weights are read a row of input channels at a time, Co floats apart, which the
  // hardware prefetchers follow worse than deep's contiguous chunks, so this pays even where
  // the model's weights stay in the last-level cache (unlike deep's, deep_prefetch_pays).
  // Kernel medians in `kiln bench --per-layer` (2 threads, an Intel Xeon, 4 runs alternating
  // with the binary before): ResNet-18's six such layers (F(4x4) 28x28 128 -> 128, F(2x2)
  // 14x14 256 -> 256) 1.07-1.20x, ResNet-50's eight 1.09-1.31x.
  p.prefetch = p.split_channels && weight_bytes > double(2 << 20) && !s.bf16 &&
               t.arch == Halide::Target::X86 && !t.has_gpu_feature();
  return p;
}

std::string conv_params_error(const ConvParams& p, const ConvShape& s, const Halide::Target& t) {
  if (p.family == ConvFamily::naive) return "";
  if (p.family == ConvFamily::amx) {
    if (!s.bf16) return "the amx schedule is for bf16 convolutions (--precision bf16)";
    if (!t.has_feature(Halide::Target::AVX512_SapphireRapids))
      return "the amx schedule needs a target with avx512_sapphirerapids (AMX)";
    if (p.rows < 1 || p.rows > s.out_height)
      return "rows=" + std::to_string(p.rows) + " is not within the output's 1.." +
             std::to_string(s.out_height) + " rows";
    if (p.columns > 0 && p.windows_per_task && p.columns < s.out_channels)
      return "cols=" + std::to_string(p.columns) +
             " with windows=task would gather each task's windows once per column block";
    return "";
  }
  if (s.bf16 && p.family != ConvFamily::wide && p.family != ConvFamily::deep)
    return "a bf16 convolution takes the wide, deep, amx or naive schedule";
  if (t.has_gpu_feature()) return p.family == ConvFamily::winograd ? winograd_error(p, s, t) : "";
  if (p.lanes != 0) {
    const int natural = vector_lanes(t);
    if (p.family != ConvFamily::wide && p.family != ConvFamily::deep &&
        p.family != ConvFamily::winograd)
      return "lanes=" + std::to_string(p.lanes) +
             ": only the wide, deep and winograd schedules take a vector width";
    if (p.lanes != natural && (p.lanes * 2 != natural || p.lanes < 4))
      return "lanes=" + std::to_string(p.lanes) + " is neither the target's vector of " +
             std::to_string(natural) + " floats nor half of it" +
             (natural >= 8 ? " (" + std::to_string(natural / 2) + ")" : "");
    if (s.bf16 && p.lanes != natural)
      return "lanes=" + std::to_string(p.lanes) +
             ": a bf16 convolution takes the target's vector of " + std::to_string(natural) +
             " floats";
  }
  if (p.family == ConvFamily::winograd) return winograd_error(p, s, t);
  if (s.depthwise != (p.family == ConvFamily::depthwise))
    return s.depthwise ? "a depthwise convolution takes the depthwise (or naive) schedule"
                       : "the depthwise schedule is for depthwise convolutions";
  if (s.narrow_groups != (p.family == ConvFamily::grouped))
    return s.narrow_groups ? "groups narrower than a vector take the grouped (or naive) schedule"
                           : "the grouped schedule is for groups narrower than a vector";
  const int vec = vector_lanes(p, t);
  const RegisterBlock& b = p.block;
  const std::string tile = std::to_string(b.vectors) + "x" + std::to_string(b.pixels);
  // The grouped and depthwise schedules' tile is one vector of output channels (the grouped
  // one permutes its inputs per vector) by `pixels`; narrower outputs than the tile take one
  // output at a time.
  if (p.family == ConvFamily::grouped || p.family == ConvFamily::depthwise) {
    const std::string family = family_name(p.family);
    if (b.vectors != 1)
      return "the " + family + " schedule's block is 1xP (one vector by P pixels), not " + tile;
    if (p.family == ConvFamily::depthwise && b.pixels > s.out_width)
      return "block " + tile + " is wider than the output (" + std::to_string(s.out_width) +
             " pixels)";
    if (p.family == ConvFamily::depthwise && s.expanded && (p.stage_input || !p.channels_inside))
      return "a depthwise convolution with an expansion reads its rows where the expansion "
             "leaves them, with the channel loop inside (stage=in_place inner=channels)";
    if (p.family == ConvFamily::depthwise && p.rows > s.out_height)
      return "rows=" + std::to_string(p.rows) + " is more than the output's " +
             std::to_string(s.out_height) + " rows";
    if (b.pixels > accumulator_registers(t))
      return "block " + tile + " needs " + std::to_string(b.pixels) +
             " accumulator registers; the target has " + std::to_string(accumulator_registers(t));
    return "";
  }
  if (b.vectors == 0 && s.out_channels >= vec)
    return "block " + tile + " leaves the output channels unvectorized";
  if (b.vectors * vec > tile_channels(s, vec) || b.pixels > s.out_width)
    return "block " + tile + " (" + std::to_string(b.vectors * vec) + " channels x " +
           std::to_string(b.pixels) + " pixels) is larger than the output (" +
           std::to_string(s.out_channels) + " x " + std::to_string(s.out_width) + ")";
  if (b.vectors * b.pixels > accumulator_registers(t))
    return "block " + tile + " needs " + std::to_string(b.vectors * b.pixels) +
           " accumulator registers; the target has " + std::to_string(accumulator_registers(t));
  if (p.family == ConvFamily::deep && p.prefetch && s.bf16)
    return "prefetch=1: the deep schedule prefetches float32 weights only";
  if (p.family == ConvFamily::wide) {
    if (!p.stage_input && (s.kernel_w != 1 || s.kernel_h != 1 || s.padded))
      return "stage=in_place takes only 1x1 windows without padding";
    if (!p.stage_input && s.bf16)
      return "stage=in_place: a bf16 convolution stages its input (rounded to bf16 once)";
  }
  return "";
}

ConvParams default_conv_params(const ConvShape& s, const Halide::Target& t) {
  // Winograd where it measured faster in every run: dense 3x3 stride-1 layers with at least 16
  // input channels, a vector of output channels and outputs of at least 13x13. ResNet-18's
  // layers 1-3 (64-256 channels): 1.3-3.5x the direct schedule (AVX2, 2 threads); narrower
  // layers, AVX-512, 2 threads, kiln tune: 32 -> 16 at 112x112 2.21x, 16 -> 64 at 55x55 2.08x,
  // 16 -> 16 at 147x147 2.0x, 24 -> 24 at 17x17 1.69x, 32 -> 128 at 27x27 1.46x, 48 -> 192 at
  // 13x13 1.22x (docs/benchmarks.md). Not on 7x7 outputs (F(4x4) 0.7-0.9x, F(2x2) 1.0-1.2x).
  // Stride 2 (F(2x2) at stride 2, 1.44x fewer multiply-adds) by the same rule: in the network
  // (AVX-512, Zen 4, 2 threads, `kiln bench --per-layer`, 3 runs alternating with the direct
  // default, medians) all 28 such layers of the zoo and 10 family models 1.01-1.43x, from
  // 16 -> 24 at 32x32 (1.01x) to ResNet-50's 128 -> 128 at 28x28 and 256 -> 256 at 14x14 (1.24x
  // each); AVX2: docs/benchmarks.md.
  const ConvParams winograd = default_winograd_params(s, t);
  if (!t.has_gpu_feature() && !s.bf16 && s.reduction_channels >= 16 &&
      s.out_channels >= vector_lanes(t) && s.out_width >= 13 && s.out_height >= 13 &&
      winograd_error(winograd, s, t).empty())
    return winograd;
  return default_direct_conv_params(s, t);
}

ConvParams default_amx_params(const ConvShape& s) {
  ConvParams p;
  p.family = ConvFamily::amx;
  if (int64_t{s.out_height} * s.out_width > 196) {
    p.rows = std::max(1, static_cast<int>(ceil_div(s.out_height, 16)));
    return p;
  }
  p.rows = s.out_height;
  p.windows_per_task = false;
  const int64_t tiles = ceil_div(s.out_channels, 16);
  p.columns = static_cast<int>(16 * std::max<int64_t>(1, ceil_div(tiles * s.batch, 16)));
  if (p.columns >= s.out_channels) p.columns = 0;
  return p;
}

bool amx_by_default(const ConvShape& s) {
  return s.kernel_w * s.kernel_h == 1 || int64_t{s.out_width} * s.out_height > 64;
}

}  // namespace kiln::schedules
