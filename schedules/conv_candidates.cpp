// The tuner's candidate schedules for a convolution and the cost model that ranks them
// (schedules/conv_params.h).
#include "schedules/conv_params.h"
#include "schedules/conv_params_internal.h"

#include <algorithm>

namespace kiln::schedules {

using namespace internal;

namespace {

// Cycles of one reduction step of a register tile of `vectors` x `pixels` accumulators: its
// multiply-adds on two FMA ports, its loads (a weight vector per vector, a broadcast per pixel)
// on two load ports, and at least the FMA latency (4 cycles), since each accumulator takes one
// multiply-add per step: a tile of fewer than 8 accumulators leaves the ports idle. Without
// the latency bound, 1x2 and 3x1 tiles ranked with 2x14 ones and filled the candidate lists.
double step_cycles(int vectors, int pixels) {
  const double fmas = double(std::max(1, vectors)) * pixels;
  const double loads = double(std::max(1, vectors)) + pixels;
  return std::max({fmas / 2, loads / 2, 4.0});
}

// Bytes of weights a core's L2 holds (1 MiB and up on the AVX-512 and Zen CPUs Kiln targets) and
// the bytes per cycle a core streams from beyond it (memory: about 22 GB/s for 2 cores of
// the AVX-512 Xeon VMs, the weights' first pass in a network).
constexpr double kL2Bytes = 1 << 20;
constexpr double kStreamBytesPerCycle = 4;

// The Winograd schedule's cycles: the batched matrix multiply (alpha^2 products of a task's
// tiles by Ci x Co, blocks repeating the overlap of the last one like the direct tiles), the
// two transforms, about 2 alpha^3 vector operations per tile and vector of channels, and the
// transformed weights each task reads (all of them per task of tile rows, its channels' with
// split=1) at 16 bytes a cycle: a row task of a small image streams megabytes per call.
double winograd_cycles(const ConvParams& p, const ConvShape& s, const Halide::Target& t) {
  const int vec = vector_lanes(p, t);
  const int alpha = winograd_positions(p, s);
  const int64_t channels = int64_t{p.block.vectors} * vec;
  const int64_t task_channels = p.split_channels ? channels : s.out_channels;
  const double tasks = double(task_count(p, s, t));
  const double task_tiles = double(winograd_tiles_x(s, p.tile)) * p.rows;
  const double blocks = double(ceil_div(task_channels, channels)) *
                        double(ceil_div(int64_t(task_tiles), p.block.pixels));
  const double steps = double(alpha) * alpha * s.reduction_channels * blocks * tasks;
  const double tiles = double(winograd_tiles_x(s, p.tile)) * winograd_tiles_y(s, p.tile) * s.batch;
  const double transforms =
      2.0 * alpha * alpha * alpha * tiles * double(ceil_div(s.reduction_channels + s.out_channels, vec));
  const double weight_bytes = 4.0 * alpha * alpha * s.reduction_channels * task_channels * tasks;
  return steps * step_cycles(p.block.vectors, p.block.pixels) + transforms / 2 +
         weight_bytes / 16;
}

}  // namespace

ConvParams other_lanes(const ConvParams& p, const ConvShape& s, const Halide::Target& t) {
  const int natural = vector_lanes(t);
  ConvParams q = p;
  if (natural < 8 || p.block.vectors < 1) return q;
  q.lanes = p.lanes == 0 || p.lanes == natural ? natural / 2 : 0;
  const int64_t to = vector_lanes(q, t);
  const int64_t channels = std::min<int64_t>(int64_t{p.block.vectors} * vector_lanes(p, t),
                                             tile_channels(s, static_cast<int>(to)));
  q.block.vectors = static_cast<int>(std::max<int64_t>(1, ceil_div(channels, to)));
  const int fit = (vector_registers(t) - 1 - q.block.vectors) / q.block.vectors;
  q.block.pixels = std::max(1, std::min(q.block.pixels, fit));
  return q;
}

std::optional<ConvParams> half_width_params(const ConvShape& s, const Halide::Target& t) {
  constexpr int kWide = 16;  // AVX-512's floats
  if (t.has_gpu_feature() || vector_lanes(t) != kWide || s.bf16 || s.out_channels % kWide == 0 ||
      s.out_channels % (kWide / 2) != 0)
    return std::nullopt;
  const ConvParams p = default_conv_params(s, t);
  if (p.family != ConvFamily::wide && p.family != ConvFamily::deep &&
      p.family != ConvFamily::winograd)
    return std::nullopt;
  // The tile of 2 to 5 half-width vectors (up to twice the default's count) that computes the
  // fewest channels past the output's, the most vectors among equals: 24 channels take 3
  // vectors (the default's 2 of 16 compute 32), 40 take 5 (48), 72 take 3 (96).
  ConvParams q = p;
  q.lanes = kWide / 2;
  int64_t computed = 0;
  // 8 channels (a 16-lane default computes one vector, 0xP): one vector of 8.
  for (int v = s.out_channels < kWide ? 1 : 2; v <= std::max(5, 2 * p.block.vectors); ++v) {
    const int64_t c = ceil_div(int64_t{s.out_channels}, int64_t{8} * v) * 8 * v;
    if (computed == 0 || c <= computed) q.block.vectors = v, computed = c;
  }
  // Only where that saves a tenth of the default's multiply-adds: the 16-lane tile of
  // SqueezeNet's 1000-channel classifier computes 1024 channels, and 5 x 5 tiles of 8 lanes
  // ran it 0.80-0.90x as fast as the default's 2 x 13 of 16 (Zen 4).
  const int64_t full_lanes = int64_t{kWide} * std::max(1, p.block.vectors);
  const int64_t full = ceil_div(int64_t{s.out_channels}, full_lanes) * full_lanes;
  if (computed * 10 > full * 9) return std::nullopt;
  const int fit = (vector_registers(t) - 1 - q.block.vectors) / q.block.vectors;
  q.block.pixels = std::max(1, std::min(p.block.pixels, fit));
  if (conv_params_error(q, s, t).empty()) return q;
  q = other_lanes(p, s, t);
  if (q == p || !conv_params_error(q, s, t).empty()) return std::nullopt;
  return q;
}

double conv_cost_estimate(const ConvParams& p, const ConvShape& s, const Halide::Target& t,
                          int threads) {
  const int vec = vector_lanes(p, t);
  const int64_t channels = p.block.vectors ? int64_t{p.block.vectors} * vec : 1;
  const double steps = double(s.reduction_channels) * s.kernel_w * s.kernel_h;
  // Register tiles, with the edge tiles' overlap (ShiftInwards recomputes it), each storing
  // its accumulators once.
  const double tiles = double(ceil_div(s.out_channels, channels)) *
                       double(ceil_div(s.out_width, p.block.pixels)) * s.out_height * s.batch;
  const double accumulators = double(std::max(1, p.block.vectors)) * p.block.pixels;
  double step = step_cycles(p.block.vectors, p.block.pixels);
  double passes = 1;  // over each tile's accumulators: initialized, stored
  if (p.family == ConvFamily::deep) {
    // Deep tiles reload and store their sums once per chunk of the reduction, and a chunk's
    // weights read from L2 rather than L1 (more than 48 KB of them) slow every step.
    const int64_t chunk = std::min<int64_t>(p.chunk, s.reduction_channels);
    passes = double(ceil_div(s.reduction_channels, chunk)) * s.kernel_w * s.kernel_h;
    if (double(chunk) * channels * (s.bf16 ? 2 : 4) > 48 * 1024) step *= 1.15;
  }
  double cycles = p.family == ConvFamily::winograd
                      ? winograd_cycles(p, s, t)
                      : tiles * (steps * step + 2 * passes * accumulators);
  if (p.family == ConvFamily::wide && p.stage_input) {
    // Each task stages its input rows (and the halo) once per channel block it covers.
    const double copies = p.split_channels ? double(ceil_div(s.out_channels, channels)) : 1;
    const double halo = double(p.rows + s.kernel_h - 1) / p.rows;
    cycles += copies * halo * s.out_height * s.out_width * s.batch * s.reduction_channels / vec;
  }
  const int64_t tasks = task_count(p, s, t);
  const double rounds = double(ceil_div(tasks, threads));
  const double balance = double(tasks) / (rounds * threads);
  cycles /= balance;
  // Weights that do not stay in L2 come from beyond it on every pass over them, and the
  // streams overlap the arithmetic: the wide family passes over all of them once per row strip
  // (its row tasks each take every channel block; with split=1 consecutive tasks take different
  // blocks of one strip), deep once per band of rows (a task per channel block and band).
  const double weight_bytes = steps * s.out_channels * (s.bf16 ? 2 : 4);
  if (p.family != ConvFamily::winograd && weight_bytes > kL2Bytes) {
    const int64_t bands = p.family == ConvFamily::deep
                              ? ceil_div(tasks, ceil_div(s.out_channels, channels) * s.batch)
                              : ceil_div(s.out_height, p.rows) * s.batch;
    cycles = std::max(cycles, double(bands) * weight_bytes / (kStreamBytesPerCycle * threads));
  }
  return cycles + 2000.0 * rounds;  // and a fixed cost per task
}

std::vector<ConvParams> conv_candidates(const ConvShape& s, const Halide::Target& t, int threads,
                                        size_t limit) {
  const ConvParams chosen = default_conv_params(s, t);
  // The direct families' candidates vary the direct default (also measured when Winograd is
  // the default).
  const ConvParams base = default_direct_conv_params(s, t);
  std::vector<ConvParams> out = {chosen};
  if (!(base == chosen) && limit > 1) out.push_back(base);
  if (t.has_gpu_feature()) return out;
  // Channel counts that are not whole vectors (24, 40, 120 on AVX-512) also try the defaults at
  // half the vector width, which the cost model (a multiply-add per vector, as on two 512-bit
  // ports) ranks below them, though half-width vectors waste no lanes there and CPUs that split
  // a 512-bit multiply-add in two run as many lanes a cycle: MobileNetV2's 1x1 projections to
  // 24 channels ran 0.78x as fast with AVX-512 as with AVX2's 8-lane vectors (Zen 4).
  if (s.out_channels % vector_lanes(t) != 0)
    for (const ConvParams& p : std::vector<ConvParams>(out)) {
      const bool direct = p.family == ConvFamily::wide || p.family == ConvFamily::deep ||
                          p.family == ConvFamily::winograd;
      const ConvParams q = other_lanes(p, s, t);
      if (direct && out.size() < limit && std::find(out.begin(), out.end(), q) == out.end() &&
          conv_params_error(q, s, t).empty())
        out.push_back(q);
    }
  if (base.family == ConvFamily::depthwise) {
    // No cost model (the kernel is bound by memory traffic the model does not see): each knob
    // varied alone, then the tile widths with the other loop order and staging.
    const auto add = [&](const ConvParams& p) {
      if (out.size() < limit && std::find(out.begin(), out.end(), p) == out.end() &&
          conv_params_error(p, s, t).empty())
        out.push_back(p);
    };
    ConvParams p = base;
    p.stage_input = !base.stage_input, p.channels_inside = !p.stage_input;
    add(p);
    p = base;
    p.channels_inside = !base.channels_inside;
    add(p);
    for (int rows : {1, 2, 4, 8}) {
      p = base;
      p.rows = rows;
      add(p);
    }
    for (int px : {4, 6, 8, 12, 16, 2})
      for (bool stage : {base.stage_input, !base.stage_input}) {
        p = base;
        p.block = {1, px};
        p.stage_input = stage, p.channels_inside = !stage;
        add(p);
      }
    return out;
  }
  if (base.family == ConvFamily::grouped) {  // no cost model: the widths in order
    for (int px : {2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16}) {
      ConvParams p = base;
      p.block = {1, px};
      if (out.size() < limit && std::find(out.begin(), out.end(), p) == out.end() &&
          px <= std::max(s.out_width, 1) && conv_params_error(p, s, t).empty())
        out.push_back(p);
    }
    return out;
  }
  const int vec = vector_lanes(t);
  std::vector<RegisterBlock> blocks;
  if (s.out_channels < vec) {
    blocks.push_back({0, 1});
  } else {
    for (int v = 1; v <= 4 && v * vec <= tile_channels(s, vec); ++v)
      for (int px : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 28,
                     // whole rows in 2..4 equal tiles: no column computed twice
                     static_cast<int>(ceil_div(s.out_width, 2)),
                     static_cast<int>(ceil_div(s.out_width, 3)),
                     static_cast<int>(ceil_div(s.out_width, 4))})
        if (px <= s.out_width && v * px <= accumulator_registers(t) &&
            std::find_if(blocks.begin(), blocks.end(), [&](const RegisterBlock& b) {
              return b.vectors == v && b.pixels == px;
            }) == blocks.end())
          blocks.push_back({v, px});
  }
  std::vector<ConvParams> wide, deep, winograd;
  for (const RegisterBlock& b : blocks) {
    ConvParams p = base;
    p.block = b;
    p.family = ConvFamily::wide;
    for (int rows : {1, 2, 4})
      for (bool split : {false, true})
        for (bool stage : {true, false}) {
          p.rows = rows, p.split_channels = split, p.stage_input = stage;
          if (conv_params_error(p, s, t).empty()) wide.push_back(p);
        }
    p = base;
    p.block = b;
    p.family = ConvFamily::deep;
    for (int chunk : {144, 288, 576})
      for (int tasks : {8, 16, 32}) {
        p.chunk = chunk, p.tasks = tasks;
        if (conv_params_error(p, s, t).empty()) deep.push_back(p);
      }
    p = default_winograd_params(s, t);
    p.block = b;
    for (int tile : {2, 4})
      for (int rows : {1, 2, 1 << 12})
        for (bool split : {false, true}) {
          p.tile = tile, p.split_channels = split;
          p.rows = std::min(rows, winograd_tiles_y(s, tile));  // 1 << 12: the whole image
          if (conv_params_error(p, s, t).empty() &&
              std::find(winograd.begin(), winograd.end(), p) == winograd.end())
            winograd.push_back(p);
        }
  }
  // Each family ranked on its own: the model sees neither cache misses nor the reduction
  // chunk, which is what separates the families, so the measurement chooses between them.
  for (std::vector<ConvParams>* family : {&wide, &deep, &winograd}) {
    std::stable_sort(family->begin(), family->end(), [&](const ConvParams& a, const ConvParams& b) {
      return conv_cost_estimate(a, s, t, threads) < conv_cost_estimate(b, s, t, threads);
    });
  }
  for (size_t i = 0;
       out.size() < limit && (i < wide.size() || i < deep.size() || i < winograd.size()); ++i)
    for (const std::vector<ConvParams>* family : {&wide, &deep, &winograd})
      if (i < family->size() && out.size() < limit &&
          std::find(out.begin(), out.end(), (*family)[i]) == out.end())
        out.push_back((*family)[i]);
  return out;
}

std::vector<ConvParams> conv_neighbors(const ConvParams& p, const ConvShape& s,
                                       const Halide::Target& t, int threads) {
  std::vector<ConvParams> out;
  const auto add = [&](ConvParams q) {
    if (!(q == p) && std::find(out.begin(), out.end(), q) == out.end() &&
        conv_params_error(q, s, t).empty())
      out.push_back(q);
  };
  // The register tile: a pixel or two more or fewer, a vector more or fewer (the pixels cut to
  // what the accumulators allow).
  for (int dp : {-2, -1, 1, 2}) {
    ConvParams q = p;
    q.block.pixels = p.block.pixels + dp;
    if (q.block.pixels >= 1) add(q);
  }
  if (p.family == ConvFamily::wide || p.family == ConvFamily::deep ||
      p.family == ConvFamily::winograd) {
    for (int dv : {-1, 1}) {
      ConvParams q = p;
      q.block.vectors = p.block.vectors + dv;
      if (q.block.vectors < 1) continue;
      q.block.pixels = std::min(q.block.pixels, accumulator_registers(t) / q.block.vectors);
      add(q);
    }
  }
  // Rows per task (tile rows for Winograd): halved, one fewer or more, doubled.
  if (p.family != ConvFamily::deep && p.family != ConvFamily::grouped) {
    for (int rows : {p.rows / 2, p.rows - 1, p.rows + 1, p.rows * 2}) {
      ConvParams q = p;
      q.rows = rows;
      if (rows >= 1) add(q);
    }
  }
  // The family's own switches and chunks, and the neighbouring families.
  ConvParams q = p;
  switch (p.family) {
    case ConvFamily::wide:
      q = other_lanes(p, s, t), add(q);
      q = p, q.split_channels = !p.split_channels, add(q);
      q = p, q.stage_input = !p.stage_input, add(q);
      q = p, q.family = ConvFamily::deep, add(q);  // the same tile over a chunked reduction
      break;
    case ConvFamily::deep:
      q = other_lanes(p, s, t), add(q);
      for (int chunk : {p.chunk / 2, p.chunk * 2}) q = p, q.chunk = chunk, add(q);
      for (int tasks : {p.tasks / 2, p.tasks * 2}) q = p, q.tasks = std::max(1, tasks), add(q);
      if (!s.bf16) q = p, q.prefetch = !p.prefetch, add(q);
      q = p, q.family = ConvFamily::wide, q.stage_input = true, add(q);
      break;
    case ConvFamily::winograd:
      q = other_lanes(p, s, t), add(q);
      q = p, q.split_channels = !p.split_channels, add(q);
      q = p, q.prefetch = !p.prefetch, add(q);
      // The other tile with its own default block (a block counts tiles of the tile's size).
      q = default_winograd_params(s, t, p.tile == 2 ? 4 : 2), add(q);
      q = default_direct_conv_params(s, t), add(q);
      break;
    case ConvFamily::depthwise:
      q.channels_inside = !p.channels_inside, add(q);
      q = p, q.stage_input = !p.stage_input, add(q);
      break;
    default:
      break;
  }
  if (p.family == ConvFamily::wide || p.family == ConvFamily::deep ||
      p.family == ConvFamily::winograd)
    std::stable_sort(out.begin(), out.end(), [&](const ConvParams& a, const ConvParams& b) {
      return conv_cost_estimate(a, s, t, threads) < conv_cost_estimate(b, s, t, threads);
    });
  return out;
}

}  // namespace kiln::schedules
