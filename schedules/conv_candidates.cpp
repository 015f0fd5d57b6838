// The tuner's candidate schedules for a convolution and the cost model that ranks them
// (schedules/conv_params.h).
#include "schedules/conv_params.h"
#include "schedules/conv_params_internal.h"

#include <algorithm>

namespace kiln::schedules {

using namespace internal;

namespace {

// The Winograd schedule's cycles: the batched matrix multiply (alpha^2 products of a task's
// tiles by Ci x Co, blocks repeating the overlap of the last one like the direct tiles), the
// two transforms, about 2 alpha^3 vector operations per tile and vector of channels, and the
// transformed weights each task reads (all of them per task of tile rows, its channels' with
// split=1) at 16 bytes a cycle: a row task of a small image streams megabytes per call.
double winograd_cycles(const ConvParams& p, const ConvShape& s, const Halide::Target& t) {
  const int vec = vector_lanes(t);
  const int alpha = p.tile + 2;
  const int64_t channels = int64_t{p.block.vectors} * vec;
  const int64_t task_channels = p.split_channels ? channels : s.out_channels;
  const double tasks = double(task_count(p, s, t));
  const double task_tiles = double(winograd_tiles_x(s, p.tile)) * p.rows;
  const double blocks = double(ceil_div(task_channels, channels)) *
                        double(ceil_div(int64_t(task_tiles), p.block.pixels));
  const double steps = double(alpha) * alpha * s.reduction_channels * blocks * tasks;
  const double fmas = steps * p.block.vectors * p.block.pixels;
  const double loads = steps * (p.block.vectors + p.block.pixels);
  const double tiles = double(winograd_tiles_x(s, p.tile)) * winograd_tiles_y(s, p.tile) * s.batch;
  const double transforms =
      2.0 * alpha * alpha * alpha * tiles * double(ceil_div(s.reduction_channels + s.out_channels, vec));
  const double weight_bytes = 4.0 * alpha * alpha * s.reduction_channels * task_channels * tasks;
  return std::max(fmas / 2, loads / 3) + transforms / 2 + weight_bytes / 16;
}

}  // namespace

double conv_cost_estimate(const ConvParams& p, const ConvShape& s, const Halide::Target& t,
                          int threads) {
  const int vec = vector_lanes(t);
  const int64_t channels = p.block.vectors ? int64_t{p.block.vectors} * vec : 1;
  const double steps = double(s.reduction_channels) * s.kernel_w * s.kernel_h;
  // Vector multiply-adds, with the edge tiles' overlap (ShiftInwards recomputes it).
  const double tiles = double(ceil_div(s.out_channels, channels)) *
                       double(ceil_div(s.out_width, p.block.pixels)) * s.out_height * s.batch;
  const double fmas = tiles * std::max(1, p.block.vectors) * p.block.pixels * steps;
  // Two multiply-adds and three loads per cycle; each step loads the tile's weight vectors and
  // broadcasts one input per pixel.
  const double loads = tiles * (std::max(1, p.block.vectors) + p.block.pixels) * steps;
  double cycles = p.family == ConvFamily::winograd ? winograd_cycles(p, s, t)
                                                    : std::max(fmas / 2, loads / 3);
  if (p.family == ConvFamily::wide && p.stage_input) {
    // Each task stages its input rows (and the halo) once per channel block it covers.
    const double copies = p.split_channels ? double(ceil_div(s.out_channels, channels)) : 1;
    const double halo = double(p.rows + s.kernel_h - 1) / p.rows;
    cycles += copies * halo * s.out_height * s.out_width * s.batch * s.reduction_channels / vec;
  }
  const int64_t tasks = task_count(p, s, t);
  const double rounds = double(ceil_div(tasks, threads));
  const double balance = double(tasks) / (rounds * threads);
  return cycles / balance + 2000.0 * rounds;  // and a fixed cost per task
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
    for (int v = 1; v <= 4 && v * vec <= s.out_channels; ++v)
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

}  // namespace kiln::schedules
