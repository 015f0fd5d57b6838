// The contract between the convolution algorithm (generators/conv_generator.cpp) and its
// schedules: the Funcs and loop variables a schedule may touch. Nothing here computes anything.
#pragma once

#include <vector>

#include "Halide.h"
#include "generators/ops/winograd.h"

namespace kiln::schedules {

// Whether bf16 pairs times bf16 pairs summed into float32 lanes is one instruction on `target`
// (vdpbf16ps, AVX512_BF16: Halide's avx512_zen4 feature, which avx512_sapphirerapids implies).
inline bool bf16_dot_products(const Halide::Target& target) {
  return target.has_feature(Halide::Target::AVX512_Zen4) ||
         target.has_feature(Halide::Target::AVX512_SapphireRapids);
}

struct ConvParams;  // schedules/conv_params.h: a schedule's family and knobs

struct ConvFuncs {
  Halide::Func input_padded;  // zero-padded NHWC input, (c, x, y, n)
  Halide::Func acc;           // bias + sum over (ci, kx, ky), (co, x, y, n); has one update
  Halide::Func output;        // epilogue(acc), the pipeline output, (co, x, y, n)
  Halide::Var co, x, y, n;
  Halide::Var c;              // channel variable of input_padded
  Halide::RDom r;             // r.x = ci (of the group), r.y = kx, r.z = ky
  Halide::Expr out_channels, out_width, out_height;
  Halide::Expr in_channels;   // all of the input's channels (more than r.x covers when grouped)
  Halide::Expr in_stride_x;  // elements between neighbouring input pixels (in_channels if dense)
  // false: input_padded is the input itself (1x1 windows, no padding) and stays inline; no
  // staged copy is needed.
  bool stage_input = true;
  // The input is NCHW (read in place of a layout transform): contiguous along x, so the staged
  // copy is vectorized over pixels with the channels unrolled.
  bool input_nchw = false;
  // The window reaches past the image's left or right edge (the convolution pads along x).
  bool padded_x = false;
  // `output` is computed inside a parallel task of the pipeline's real output (a fused pooling,
  // a band of rows at a time): it gets no parallel loop of its own.
  bool in_task = false;
  // bfloat16 multiply-adds: input_padded is bfloat16 and the update sums f32(bf16) products.
  // Where the target has the dot-product instruction (bf16_dot_products), the schedule takes
  // r.x (even: an odd channel count is rounded up, the extra channel zero) in pairs,
  // innermost and vectorized with the output channels under atomic(),
  // which Halide lowers to vdpbf16ps; elsewhere it keeps the float32 loop order, each bf16
  // operand widened to a float32 by a shift.
  bool bf16 = false;
  // The weights and bias may be read past out_channels up to the next multiple of 16 (blocked
  // weights, zero-padded, and a clamped bias: codegen's conv_pipeline): when the channel count
  // is not a multiple of the vector, the schedules then compute a last, partial block of
  // channels whole and store only its channels, instead of shifting it inwards to a start
  // inside a weight block (which made Halide load every weight vector a lane at a time).
  bool whole_channel_blocks = false;
  // > 1: a grouped convolution with its channels interleaved by group (generators/ops/conv.h,
  // interleaved_position), this many groups per block of 16: acc's co is a position and
  // input_padded holds the input interleaved alike (it must be staged: stage_input is true).
  int interleave = 1;
  // The reduction leaves out the kernel columns on the padding (generators/ops/conv.h,
  // skip_padding_cols): the schedule must unroll r.y inside one tile per output row, so that the
  // predicate of each unrolled multiply-add is a constant (the deep family).
  bool unroll_kernel_columns = false;
};

// Halide's default: everything inlined or at root, nothing vectorized or parallel.
// Kept as the baseline every other schedule is compared against.
void schedule_conv_naive(const ConvFuncs& f, const Halide::Target& target);

// A register tile of the x86 CPU schedules: `vectors` output-channel vectors by `pixels`
// output pixels along x.
struct RegisterBlock {
  int vectors;
  int pixels;
};

// The register tiles for `target`, in order of preference; a tile is used when the layer is
// at least as large as it in both dimensions, so it never has to be clipped.
// `seven_wide_vectors`: channel vectors of the AVX-512 tile for outputs 7..13 pixels wide.
std::vector<RegisterBlock> cpu_register_blocks(const Halide::Target& target,
                                               int seven_wide_vectors);

// x86 CPU, for wide outputs (family wide): output tiles held in vector registers through the
// whole reduction, parallel over row strips. `p` must pass conv_params_error.
void schedule_conv_cpu(const ConvFuncs& f, const ConvParams& p, const Halide::Target& target);

// The direct CPU schedules' split of `output`'s channels co into register tiles coo of
// `vectors` vectors of `vec` lanes (one channel when vectors is 0), vectorized and unrolled
// inside the tile; returns the tile's inner variables, innermost first, for the caller's loop
// order. The last tile shifts inwards, unless `whole_blocks` (ConvFuncs::whole_channel_blocks)
// and the channels are not whole vectors: then every tile starts on a vector (the vectors
// shift inwards over the channels rounded up to a vector, the last vector's store is guarded)
// and the caller computes its accumulator for whole tiles (bound_extent).
std::vector<Halide::VarOrRVar> split_output_channels(Halide::Func output, const Halide::Var& co,
                                                     const Halide::Var& coo, const Halide::Var& coi,
                                                     int vectors, int vec, bool whole_blocks);

// x86 CPU, for small outputs with long reductions (family deep): parallel over output-channel
// blocks, the reduction chunked so each chunk of weights is reused from L1 by the whole task.
void schedule_conv_cpu_deep(const ConvFuncs& f, const ConvParams& p, const Halide::Target& target);

// x86 CPU, grouped convolutions with fewer output channels per group than a vector (family
// grouped): one vector of output channels spanning several groups, each lane's input permuted
// in registers, by p.block.pixels output pixels; parallel over bands of rows.
void schedule_conv_cpu_grouped(const ConvFuncs& f, const ConvParams& p,
                               const Halide::Target& target);

// x86 CPU, Winograd (family winograd): tasks of p.rows tile rows, per task the transformed
// input, the batched matrix multiply in p.block register tiles (channel vectors x tiles) and
// the output transform fused with `output`, the epilogue of w.acc. `p` must pass
// conv_params_error.
void schedule_conv_cpu_winograd(generators::ops::WinogradAlgorithm w, Halide::Func output,
                                const ConvParams& p, const Halide::Target& target);

// x86 CPU with AMX, a bf16 convolution as a matrix multiply (family amx,
// generators::ops::conv2d_as_matmul): parallel tasks of p.rows output rows; per task the
// windows (bf16) are gathered, then each 16 output channels x 16 pixels tile of the sums is one
// AMX accumulator tile through the whole reduction (32 steps per tdpbf16ps), stored, and
// `output` (the epilogue of `acc`, (co, x, y, n)) reads it. `p` must pass conv_params_error.
struct ConvMatmulFuncs {
  Halide::Func windows, acc, output;
  Halide::Var co, k, p;              // of windows and acc
  Halide::Var out_co, out_y, out_n;  // of output
  Halide::RDom r;
  int in_channels;                   // the steps of one tap: k = ci + in_channels * tap
};
void schedule_conv_cpu_amx(const ConvMatmulFuncs& f, const ConvParams& p);

// CUDA: output tiles on GPU blocks, a small register tile per thread.
void schedule_conv_cuda(const ConvFuncs& f, const Halide::Target& target);

}  // namespace kiln::schedules
