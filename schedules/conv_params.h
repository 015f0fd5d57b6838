// Convolution schedules as data. A schedule is a family and the values of its knobs, with a
// one-line text form ("wide block=2x14 rows=2 split=0 stage=copy") that `kiln tune` searches,
// the schedule database stores and ConvKernelSpec::schedule and `--set` take. The default
// choice for a layer is the heuristic the families' comments measured; the tuner starts there.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "Halide.h"
#include "schedules/conv_schedule.h"

namespace kiln::schedules {

// What a convolution schedule is chosen for: the generated kernel's constant shapes.
struct ConvShape {
  int out_channels = 1, out_width = 1, out_height = 1, batch = 1;
  int reduction_channels = 1;  // input channels one output reads (its group block's, if grouped)
  int kernel_w = 1, kernel_h = 1;
  bool padded = false;
  // Groups with fewer output channels than a vector: only `grouped` (and `naive`) apply.
  bool narrow_groups = false;
  bool grouped = false;  // groups > 1 (Winograd takes dense convolutions only)
  // One input channel per output channel (ConvKernelSpec::depthwise): only `depthwise` (and
  // `naive`) apply. `computed_input`: its input is computed (a prologue, or NCHW read in
  // place), which the depthwise default stages once per task rather than recomputing per tap.
  bool depthwise = false;
  bool computed_input = false;
  // A depthwise convolution whose input its kernel computes by an expansion (Conv2d::expand):
  // tasks of channel blocks by bands of p.rows rows (schedules::expansion_tasks), the input
  // read where the expansion leaves it, the channel loop inside: only `block` and `rows` vary.
  bool expanded = false;
  bool constant_weights = true;  // Winograd transforms them once, when the model binds them
  // The weights are blocked and zero-padded to whole blocks of 16 output channels
  // (runtime::blocks_conv_weights) and out_channels is not a multiple of 16: the wide and deep
  // tiles may then cover channels up to the next whole vector (tile_channels), computed and
  // not stored. A 24-channel layer takes 2x14 tiles instead of 1x14 ones.
  bool whole_channel_blocks = false;
  // bfloat16 multiply-adds (ConvKernelSpec::bf16): only the wide, deep and naive schedules,
  // which take the reduction in pairs of input channels, and the input is always staged.
  bool bf16 = false;
  // The epilogue has a costly step (graph::costly_step: SiLU, sigmoid, GELU, ...): register
  // tiles of a short reduction are kept to 16 accumulators (internal::limited_tile).
  bool costly_epilogue = false;
  // The layer's weights come from memory on every call (graph::ConvKernelSpec::cold_weights):
  // the deep default prefetches them where that pays (ConvParams::prefetch).
  bool cold_weights = false;
  int stride_w = 1, stride_h = 1, dilation_w = 1, dilation_h = 1;
  // The largest Winograd tile the model's output check leaves this layer
  // (ConvKernelSpec::max_winograd_tile): 4, 2, or 0 for direct schedules only.
  int max_winograd_tile = 4;
};

// naive: Halide's default (a baseline). wide: register tiles, parallel over row strips
// (conv_schedule_cpu.cpp). deep: register tiles over a chunked reduction, parallel over channel
// blocks (conv_schedule_cpu_deep.cpp). grouped: vectors spanning groups, for narrow groups
// (conv_schedule_cpu_grouped.cpp). winograd: Winograd F(2x2, 3x3) or F(4x4, 3x3) for dense 3x3
// stride-1 layers, F(2x2, 3x3) for stride-2 ones, a batched matrix multiply over tiles
// (conv_schedule_cpu_winograd.cpp).
// depthwise: one channel vector by a row of pixels over the taps, bands of rows in parallel
// (depthwise_schedule.cpp). amx: bf16 convolutions as matrix multiplies on Intel's AMX tiles,
// the input's windows gathered per band of rows (conv_schedule_cpu_amx.cpp); only the kernels'
// AMX entry points take it (codegen/kernel_library.h). GPU targets have one schedule: only
// `naive` changes them.
enum class ConvFamily { naive, wide, deep, grouped, winograd, depthwise, amx };

struct ConvParams {
  ConvFamily family = ConvFamily::wide;
  // wide, deep, grouped, depthwise: the register tile, output-channel vectors x output pixels
  // along x (grouped, depthwise: one vector; an output narrower than the tile goes one pixel at
  // a time). 0 vectors: one output channel per tile, not vectorized (layers with fewer channels
  // than a vector).
  RegisterBlock block{1, 1};
  int rows = 2;                 // wide, depthwise, amx: output rows per parallel task
  // wide: one task per (channel block, row strip), not per strip; winograd: one task per
  // (register block of channels, `rows` tile rows), the input transformed once for all tasks.
  bool split_channels = false;
  // wide, depthwise: each task stages a zero-padded copy of its input rows; false reads the
  // input in place, which wide allows only for unpadded 1x1 windows (depthwise reads the zero
  // padding through a boundary condition).
  bool stage_input = true;
  // depthwise: the channel-vector loop inside the pixel-tile loop (a tile's input pixels
  // reused by every channel vector from L1), or outside it (each channel vector walks the row).
  bool channels_inside = true;
  // deep: reduction steps per chunk of weights: input channels of one kernel tap (bf16:
  // input channel x tap steps)
  int chunk = 288;
  // amx: output channels per parallel task (a multiple of 16; 0: all of them), and whether each
  // task gathers the windows of its rows (true) or the whole input's are gathered first, in
  // parallel, and shared by the tasks (small images split by channels).
  int columns = 0;
  bool windows_per_task = true;
  int tasks = 16;   // deep: parallel tasks to aim for (row bands split channel blocks)
  // deep, winograd: software prefetch of the next chunk of weights (winograd: the next
  // position's), spread over the current chunk's passes (schedules/weight_prefetch.h); float32
  // on x86 only.
  bool prefetch = false;
  // winograd: output tile side m of F(m x m, 3 x 3), 2 or 4. `block` is then output-channel
  // vectors x tiles of the batched matrix multiply, and `rows` the tile rows per task.
  int tile = 4;
  // wide, deep, winograd: float lanes per vector of output channels; 0 is the target's own
  // width (16 on AVX-512, 8 on AVX2 and SSE targets), and half of it the one other choice.
  // AVX-512 halves fit channel counts that are odd multiples of 8 (24, 40, 72, 120) without
  // the wasted lanes of a 16-lane tile, and CPUs that run a 512-bit multiply-add as two 256-bit
  // halves (Zen 4) do as many float multiply-adds a cycle with either width.
  int lanes = 0;

  friend bool operator==(const ConvParams& a, const ConvParams& b);
};

// The lanes of `p`'s vectors of output channels on `target`: p.lanes, or the target's width.
int vector_lanes(const ConvParams& p, const Halide::Target& target);

// `p` (wide, deep or winograd) with the other vector width, 0 (the target's) <-> half of it:
// its tile covers the same channels (at most the output's, rounded up to a vector of the new
// width) and, with more vectors, only the pixels whose accumulators, weight vectors and
// broadcast still fit the register file. Unchanged if the target has no half (SSE: 4 lanes).
ConvParams other_lanes(const ConvParams& p, const ConvShape& s, const Halide::Target& target);

// The schedule of a convolution's half-width kernel (codegen's GeneratedKernel::half_fn, which
// the runtime calls on CPUs that run a 512-bit multiply-add at half the rate of a 256-bit one:
// Zen 4 splits it in two), for float32 layers whose default is wide, deep or Winograd on a
// 16-lane (AVX-512) target and whose output channels are an odd multiple of 8 (8, 24, 40, 72:
// a 16-lane tile computes lanes it discards): the default with 8-lane vectors, as many (2 to 5,
// or up to twice the default's; 1 for 8 channels) as compute the fewest channels past the
// output's, and the default's pixels where they fit the registers (else other_lanes of the
// default), where that computes at least a tenth fewer channels than the default's tile (not
// 120: 128 against 120). Nothing for other layers and targets.
std::optional<ConvParams> half_width_params(const ConvShape& s, const Halide::Target& target);

// The canonical text: the family, then its own knobs in a fixed order (`lanes` only where it
// is not 0).
std::string to_string(const ConvParams& p);
// Reads "family key=value ..." or "key=value ..." into *p: knobs not named keep *p's values,
// and a family named anywhere switches to it, keeping the values of the knobs it shares (the
// knobs after it are the new family's). Returns why the text is
// not a schedule, or "" (and *p is then changed).
std::string parse_conv_params(const std::string& text, ConvParams* p);
// Why `p` cannot schedule a layer of shape `s` on `target`, or "". Register tiles must fit the
// output (a tile is never clipped) and the register file. Winograd takes dense 3x3, undilated
// layers of stride 1 (tile 2 or 4) or 2 (tile 2) with at least one vector of output channels,
// on CPU targets; F(4x4) only where its rounding error stays within the model tolerance
// (winograd_tile_error).
std::string conv_params_error(const ConvParams& p, const ConvShape& s, const Halide::Target& target);

// Why Winograd F(tile x tile, 3x3) is not accurate enough for `s`, or "": a tile over the
// layer's cap (ConvShape::max_winograd_tile), or F(4x4) over a long reduction. F(4x4)'s
// transforms multiply by up to 8 and 1/24 and lose more of fp32's precision, measured on every
// 3x3 stride-1 layer of the zoo (docs/tuning.md): it is refused for reductions longer than
// kWinograd4MaxChannels input channels.
std::string winograd_tile_error(int tile, const ConvShape& s);
inline constexpr int kWinograd4MaxChannels = 512;

// The Winograd schedule for `s` on `target` with its default knobs: tile 4 where
// winograd_tile_error allows it, the stride is 1 and the output is at least 28 pixels wide
// (else 2); one tile
// row per task, or with more output channels than tiles and 2 MiB or more of
// transformed weights, a task per block of channels over the whole image (split=1); a
// register block of 2 vectors (1 below two; on AVX-512 up to 4 where a tile row has fewer
// than 14 tiles; with split=1 up to 4 on AVX-512 and 3 elsewhere, while 2 channel blocks
// remain) by the task's tiles split into equal blocks of at most the direct schedule's
// accumulators (12 on AVX2, 28 on AVX-512) over the vectors.
// tile > 0: that tile, whatever the error rule says (conv_params_error still checks it).
ConvParams default_winograd_params(const ConvShape& s, const Halide::Target& target,
                                   int tile = 0);

// Positions per tile side of `p`'s Winograd tile at `s`'s stride (runtime::winograd_matrices'
// alpha: tile + 2 at stride 1, 2 tile + 1 at stride 2); the transformed weights are positions^2
// x Ci x Co floats.
int winograd_positions(const ConvParams& p, const ConvShape& s);
// Tiles of F(tile x tile) along x and y of an output of `s`, overhanging edges included.
int winograd_tiles_x(const ConvShape& s, int tile);
int winograd_tiles_y(const ConvShape& s, int tile);
// Tiles in the smallest task of `rows` tile rows (the last task may have fewer rows): the
// widest register block of tiles that never runs past a task.
int winograd_min_task_tiles(const ConvShape& s, int tile, int rows);

// The default choice: winograd (default_winograd_params) for dense 3x3 stride-1 layers with
// constant weights, at least 16 input channels, a vector of output channels and outputs of at
// least 13x13, on CPU targets (measured 1.2-3.5x the direct schedule on ResNet-18's, AVX2, and
// on narrower layers of the zoo, AVX-512; docs/benchmarks.md); otherwise
// default_direct_conv_params.
ConvParams default_conv_params(const ConvShape& s, const Halide::Target& target);

// The AMX schedule of a bf16 convolution: for outputs of more than 196 pixels, bands of about
// 1/16 of the output rows (at least one) per parallel task, each gathering its own windows; for
// smaller ones, the windows gathered once and tasks of one image by 16 columns of output
// channels or more (about 16 tasks), whose weights, not the windows, are what each task reads.
ConvParams default_amx_params(const ConvShape& s);
// Whether a bf16 convolution gets an AMX kernel by default: not for windows larger than 1x1 on
// outputs of 64 pixels or fewer, which the AMX kernel ran 0.49-0.71x as fast as the float32
// deep schedule (ResNet-18's and ResNet-50's 7x7 3x3 layers, Sapphire Rapids), while the
// AVX512_BF16 dot-product kernel ran them 1.5x as fast as float32 (Zen 4).
bool amx_by_default(const ConvShape& s);

// The depthwise default (the heuristic schedule_depthwise_cpu measured): one vector by 8
// pixels (4 or 1 on narrower rows), about 8 bands of rows; windows up to 7 wide with an input
// that is read, not computed, read it in place with the channel loop inside the pixel-tile
// loop, others stage the padded band and walk each channel vector along the rows.
ConvParams default_depthwise_params(const ConvShape& s);

// The direct convolution's default: wide in one task, up to 4 channel vectors by 1 pixel, for
// one output pixel with at most 256 KiB of weights (SE blocks); deep for outputs of at most 64
// pixels, or at most 196 pixels (14x14) from a spatial kernel with at least 1024 (input channel
// x tap) steps or with more than 1.5 MiB of weights (on AVX-512 a 1x1 of those with an
// 8..13-wide output takes a whole row per tile, 2 vectors, and chunks of 144 steps), except
// that outputs of at most 64 pixels with at most 256 KiB of weights run deep's tile in the wide
// family (2 rows per task, staged); grouped for narrow groups; wide otherwise, reading unpadded
// 1x1 inputs in place. The register tile is the target's preferred one that fits. Measured,
// deep against wide (1 thread, weights evicted between calls): 7x7 outputs of 512..2048 channels 1.25-1.30x, the stride-2 1x1 14x14 -> 7x7
// 1024 -> 2048 1.77x, 3x3 14x14 256 -> 256 1.12x, but 1x1 14x14 0.90-0.97x and 28x28 layers
// equal. In place against staged 1x1 inputs (same run, 2 threads): 1.01-1.28x, most on thin
// layers where the staged copy was a large share; in place inside deep measured 0.44-1.01x, so
// deep 1x1 layers keep their copy.
ConvParams default_direct_conv_params(const ConvShape& s, const Halide::Target& target);
// The wide family's default for `s` (what default_direct_conv_params picks for outputs of more
// than 196 pixels): the target's preferred register tile that fits, a whole row per tile for
// 8..13-pixel rows on AVX-512, rows of 1 (1x1) or 2, inputs read in place where unpadded 1x1.
ConvParams default_wide_params(const ConvShape& s, const Halide::Target& target);

// The tuner's search space for `s`: every valid schedule of the families that apply, ranked by
// estimated cost (conv_cost_estimate, best first) and cut to `limit`. The default is always
// among them.
std::vector<ConvParams> conv_candidates(const ConvShape& s, const Halide::Target& target,
                                        int threads, size_t limit);
// The schedules one step from `p` for `s` (`kiln tune`'s local search after its ranked list):
// each knob of p's family moved alone (the tile a pixel or two or a vector either way, rows
// halved, doubled or one off, the chunk and task count halved or doubled, the other staging,
// split or loop order), and the neighbouring families (wide <-> deep at the same tile;
// Winograd's other tile and the direct default). Only valid schedules, never `p`; the dense
// families ranked by conv_cost_estimate.
std::vector<ConvParams> conv_neighbors(const ConvParams& p, const ConvShape& s,
                                       const Halide::Target& target, int threads);
// A relative cost (lower is better) from a simple model: multiply-adds including those the
// overlapping edge tiles repeat, each reduction step of a register tile bound by its FMAs, its
// loads or the FMA latency (tiles of fewer than 8 accumulators wait on it), deep chunks, weights
// over L2's size streamed from memory once per pass, and idle threads on the last round of
// tasks. For pruning, not for choosing: candidates are measured (conv_candidates.cpp).
double conv_cost_estimate(const ConvParams& p, const ConvShape& s, const Halide::Target& target,
                          int threads);

}  // namespace kiln::schedules
