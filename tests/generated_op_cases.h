// The cases of the generated-kernel tests for data movement, reductions and products (see
// generated_cases.h): one node each, with the shapes and attributes it is tested on.
#pragma once

#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/ir.h"
#include "graph/reference.h"

namespace kiln::testing_util {

using graph::Layout;
using graph::Shape;

// Data movement, reductions and products: one node each, its inputs graph inputs (so the
// kernel reads them at run time) or constants.
struct OpCase {
  std::string name;
  graph::Op op;
  std::vector<Shape> inputs;
  Layout layout = Layout::any;      // of the first input
  std::vector<bool> constant = {};  // per input; default: none
  double rtol = 1e-5, atol = 1e-6;  // products: fp32 sums against the reference's doubles
  float lo = -3.0f, hi = 3.0f;      // the random inputs' range
};
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

// A Resize to `out` with scales out / in (as sizes give them) unless `scales` is given.
inline graph::Resize resize_op(graph::ResizeMode mode, graph::ResizeCoordinates coordinates,
                               graph::NearestRounding nearest, const Shape& in, const Shape& out,
                               std::vector<float> scales = {}) {
  if (scales.empty())
    for (size_t a = 0; a < in.size(); ++a)
      scales.push_back(
          static_cast<float>(static_cast<double>(out[a]) / static_cast<double>(in[a])));
  return {mode, coordinates, nearest, out, scales};
}

// resize_op's Resize made cubic (coefficient a, exclude_outside) or given a tf_crop_and_resize
// roi and extrapolation value.
inline graph::Resize cubic(graph::Resize r, float a, bool exclude_outside) {
  r.mode = graph::ResizeMode::cubic;
  r.cubic_a = a;
  r.exclude_outside = exclude_outside;
  return r;
}
inline graph::Resize cropped(graph::Resize r, std::vector<float> roi, float extrapolation) {
  r.coordinates = graph::ResizeCoordinates::tf_crop_and_resize;
  r.roi = std::move(roi);
  r.extrapolation = extrapolation;
  return r;
}

inline std::vector<OpCase> op_cases() {
  using graph::Gemm;
  using graph::NearestRounding;
  using graph::ResizeCoordinates;
  using graph::ResizeMode;
  return {
      {"gemm_fc_transposed_b_bias",
       Gemm{false, true, 1.0f, 1.0f},
       {{1, 512}, {1000, 512}, {1000}},
       Layout::any,
       {false, true, true},
       1e-4,
       1e-4},
      {"gemm_batch_3_odd",
       Gemm{false, false, 1.0f, 1.0f},
       {{3, 37}, {37, 21}, {1, 21}},
       Layout::any,
       {},
       1e-4,
       1e-4},
      // Matrix-vector products large enough to sum their rows in chunks (schedule_matmul_cpu):
      // two rows, a row count no chunk divides, columns no vector divides; B a graph input,
      // as given and transposed.
      {"gemm_matvec_chunked_odd",
       Gemm{false, false, 1.0f, 1.0f},
       {{2, 1001}, {1001, 300}, {300}},
       Layout::any,
       {},
       1e-4,
       1e-4},
      {"gemm_matvec_chunked_transposed_b",
       Gemm{false, true, 0.5f, 1.0f},
       {{1, 777}, {345, 777}},
       Layout::any,
       {},
       1e-4,
       1e-4},
      {"gemm_transposed_a_row_bias_scaled",
       Gemm{true, false, 0.5f, 2.0f},
       {{19, 6}, {19, 40}, {6, 1}},
       Layout::any,
       {},
       1e-4,
       1e-4},
      {"gemm_both_transposed_full_bias",
       Gemm{true, true, 1.5f, -1.0f},
       {{8, 9}, {33, 8}, {9, 33}},
       Layout::any,
       {},
       1e-4,
       1e-4},
      {"gemm_scalar_bias_no_vector",
       Gemm{false, false, 1.0f, 1.0f},
       {{5, 7}, {7, 3}, {1}},
       Layout::any,
       {},
       1e-4,
       1e-4},
      {"gemm_without_bias",
       Gemm{false, true, 1.0f, 1.0f},
       {{2, 64}, {70, 64}},
       Layout::any,
       {},
       1e-4,
       1e-4},
      {"matmul_batched_broadcast",
       graph::MatMul{},
       {{2, 1, 5, 12}, {3, 12, 17}},
       Layout::any,
       {},
       1e-4,
       1e-4},
      {"matmul_2d", graph::MatMul{}, {{6, 40}, {40, 36}}, Layout::any, {}, 1e-4, 1e-4},
      {"transpose_nhwc_to_nchw", graph::Transpose{{0, 3, 1, 2}}, {{2, 5, 6, 19}}},
      {"transpose_rank3_reverse", graph::Transpose{{2, 1, 0}}, {{7, 3, 20}}},
      {"layout_nhwc_to_nchw",
       graph::LayoutTransform{Layout::nhwc, Layout::nchw},
       {{1, 7, 9, 24}},
       Layout::nhwc},
      // Rows of two whole vectors and a tail, a batch of 2, tasks of rows across images.
      {"layout_nhwc_to_nchw_wide_batch2",
       graph::LayoutTransform{Layout::nhwc, Layout::nchw},
       {{2, 5, 37, 21}},
       Layout::nhwc},
      // Fewer rows (channels x height x batch) than one task's 8: a 1-D op's output.
      {"layout_nhwc_to_nchw_few_rows",
       graph::LayoutTransform{Layout::nhwc, Layout::nchw},
       {{1, 1, 23, 3}},
       Layout::nhwc},
      {"reshape_flatten", graph::Reshape{{2, 60}}, {{2, 3, 4, 5}}},
      {"reshape_split_inner", graph::Reshape{{4, 3, 10}}, {{12, 10}}},
      {"concat_channels_3", graph::Concat{1}, {{1, 5, 4, 3}, {1, 2, 4, 3}, {1, 9, 4, 3}}},
      {"concat_innermost", graph::Concat{2}, {{2, 3, 17}, {2, 3, 5}}},
      {"slice_steps", graph::Slice{{1, 0, 9}, {5, 6, -1}, {2, 1, -3}}, {{6, 6, 10}}},
      {"pad_and_crop", graph::Pad{{1, 0, -1, 2, 0, 3}, 0.5f}, {{3, 8, 4}}},
      // Reflect up to n - 1 (and the pads, shape and value of pad_and_crop: the mode must be
      // part of the kernel's signature, or the two share a compiled kernel), edge far past the
      // ends, both with a crop.
      {"pad_reflect", graph::Pad{{1, 0, -1, 2, 0, 3}, 0.5f, graph::PadMode::reflect}, {{3, 8, 4}}},
      {"pad_edge", graph::Pad{{1, 6, -1, 2, 5, 0}, 0.0f, graph::PadMode::edge}, {{3, 2, 5}}},
      {"softmax_last_axis", graph::Softmax{1, false}, {{3, 1000}}},
      {"softmax_middle_axis", graph::Softmax{1, false}, {{2, 7, 33}}},
      {"softmax_coerce_2d", graph::Softmax{1, true}, {{2, 3, 4, 5}}},
      // Rows of 4 vectors or more (an attention's scores), no vector multiple, in parallel
      // tasks; LogSoftmax over a wide range (the row maximum matters).
      {"softmax_long_rows_attention", graph::Softmax{3, false}, {{2, 4, 40, 77}}},
      {"log_softmax_long_rows_wide_range",
       graph::Softmax{1, false, graph::SoftmaxKind::log_softmax},
       {{6, 130}},
       Layout::any,
       {},
       1e-5,
       1e-5,
       -30.0f,
       30.0f},
      {"reduce_mean_last_keepdims", graph::Reduce{{3}, true}, {{1, 9, 9, 48}}},
      {"reduce_mean_spatial_dropped", graph::Reduce{{2, 3}, false}, {{2, 20, 6, 7}}},
      {"reduce_mean_all", graph::Reduce{{}, true}, {{4, 33}}},
      // Every other reduction, each on another pattern of axes: the innermost one, a middle one
      // (partials vectorized along the innermost), two apart, all to a rank-0 output. Sums of
      // many float32 terms against the reference's doubles: 1e-5 relative.
      {"reduce_sum_inner",
       graph::Reduce{{2}, false, graph::ReduceKind::sum},
       {{2, 3, 17}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"reduce_max_middle", graph::Reduce{{1}, true, graph::ReduceKind::max}, {{3, 5, 19}}},
      {"reduce_min_all_to_scalar", graph::Reduce{{}, false, graph::ReduceKind::min}, {{5, 7}}},
      {"reduce_prod_two_axes",
       graph::Reduce{{1, 3}, true, graph::ReduceKind::prod},
       {{2, 3, 4, 5}},
       Layout::any,
       {},
       1e-5,
       1e-6,
       0.5f,
       1.5f},
      {"reduce_l1_outer_and_inner",
       graph::Reduce{{0, 2}, false, graph::ReduceKind::l1},
       {{4, 9, 8}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"reduce_l2_rows",
       graph::Reduce{{1}, false, graph::ReduceKind::l2},
       {{6, 33}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"reduce_log_sum_positive",
       graph::Reduce{{0}, true, graph::ReduceKind::log_sum},
       {{7, 20}},
       Layout::any,
       {},
       1e-5,
       1e-5,
       0.1f,
       2.0f},
      // exp(x) overflows float32 from 89 on: only the maximum trick keeps these finite.
      {"reduce_log_sum_exp_large",
       graph::Reduce{{1}, true, graph::ReduceKind::log_sum_exp},
       {{3, 50}},
       Layout::any,
       {},
       1e-5,
       1e-5,
       60.0f,
       120.0f},
      {"reduce_sum_square_leading",
       graph::Reduce{{0, 1}, false, graph::ReduceKind::sum_square},
       {{2, 16, 3}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      // Sums along a wide innermost axis, in vector lanes (schedules::schedule_reduction_cpu's
      // lane_sum): a mean over H and W of NCHW whose rows end in a partial vector (ResNeSt's
      // split attention pools so), and an L2 norm of long rows.
      {"reduce_mean_spatial_wide_rows",
       graph::Reduce{{2, 3}, true},
       {{1, 40, 9, 37}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"reduce_l2_long_rows",
       graph::Reduce{{1}, false, graph::ReduceKind::l2},
       {{5, 300}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"log_softmax_middle_axis",
       graph::Softmax{1, false, graph::SoftmaxKind::log_softmax},
       {{2, 7, 33}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"log_softmax_last_coerce_2d",
       graph::Softmax{1, true, graph::SoftmaxKind::log_softmax},
       {{3, 4, 5}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"hardmax_last_axis", graph::Softmax{1, false, graph::SoftmaxKind::hardmax}, {{5, 40}}},
      {"hardmax_coerce_2d", graph::Softmax{1, true, graph::SoftmaxKind::hardmax}, {{2, 3, 4, 5}}},
      // Along the last axis of many rows (an attention's scores): one row per vector lane, the
      // last vector of rows partial (37 and 20 rows).
      {"softmax_last_axis_rows_in_vectors",
       graph::Softmax{3, false},
       {{2, 3, 37, 19}},
       Layout::any,
       {},
       1e-5,
       1e-5,
       -4.0f,
       4.0f},
      {"log_softmax_last_axis_rows_in_vectors",
       graph::Softmax{2, false, graph::SoftmaxKind::log_softmax},
       {{3, 20, 24}},
       Layout::any,
       {},
       1e-5,
       1e-5,
       -4.0f,
       4.0f},
      {"hardmax_last_axis_rows_in_vectors",
       graph::Softmax{2, false, graph::SoftmaxKind::hardmax},
       {{2, 17, 9}}},
      {"tile_three_axes", graph::Tile{{2, 1, 3}}, {{2, 3, 5}}},
      // LayerNorm: rows of a vector multiple (ConvNeXt's 48 channels, many rows in parallel),
      // an odd row over two axes without bias, parameters with leading 1s, a single row.
      {"layer_norm_last_axis_c48",
       graph::LayerNorm{1, 1e-6f},
       {{3136, 48}, {48}, {48}},
       Layout::any,
       {false, true, true},
       1e-4,
       1e-5},
      {"layer_norm_two_axes_odd_no_bias",
       graph::LayerNorm{1, 1e-5f},
       {{2, 7, 37}, {7, 37}},
       Layout::any,
       {},
       1e-4,
       1e-5},
      {"layer_norm_rank4_param_leading_ones",
       graph::LayerNorm{2, 1e-3f},
       {{2, 3, 5, 20}, {1, 5, 20}, {1, 1, 5, 20}},
       Layout::any,
       {},
       1e-4,
       1e-5},
      {"layer_norm_one_row",
       graph::LayerNorm{0, 1e-5f},
       {{3, 33}, {3, 33}, {3, 33}},
       Layout::any,
       {},
       1e-4,
       1e-5},
      // GroupNorm: NHWC with two channels per group (ResNet-GN's 32 groups), groups of a
      // channel count no vector divides over two images far from zero mean (the variance about
      // the mean), one row of pixels (no bands), NCHW (an image input's norm) wide and narrow.
      {"group_norm_nhwc_g32_c64",
       graph::GroupNorm{32, 1e-5f},
       {{1, 14, 14, 64}, {64}, {64}},
       Layout::nhwc,
       {false, true, true},
       1e-4,
       1e-5},
      {"group_norm_nhwc_g4_c48_two_images_offset",
       graph::GroupNorm{4, 1e-5f},
       {{2, 9, 7, 48}, {48}, {48}},
       Layout::nhwc,
       {false, true, true},
       1e-4,
       1e-4,
       20.0f,
       24.0f},
      {"group_norm_nhwc_one_row_g8",
       graph::GroupNorm{8, 1e-3f},
       {{1, 1, 13, 24}, {24}, {24}},
       Layout::nhwc,
       {false, true, true},
       1e-4,
       1e-5},
      {"group_norm_nchw_g3_two_images",
       graph::GroupNorm{3, 1e-5f},
       {{2, 6, 5, 37}, {6}, {6}},
       Layout::nchw,
       {false, true, true},
       1e-4,
       1e-5},
      {"group_norm_nchw_narrow_g2",
       graph::GroupNorm{2, 1e-5f},
       {{1, 4, 3, 5}, {4}, {4}},
       Layout::nchw,
       {},
       1e-4,
       1e-5},
      // With fuse_norm_epilogues' residual and post steps: a shortcut and a ReLU (a GroupNorm
      // ResNet's block end), SiLU then an affine step with its per-channel inputs.
      {"group_norm_nhwc_residual_relu",
       graph::GroupNorm{8,
                        1e-5f,
                        true,
                        {graph::ChainStep{graph::ChainStepKind::clamp, 0.0f,
                                          std::numeric_limits<float>::infinity()}}},
       {{1, 12, 10, 64}, {64}, {64}, {1, 12, 10, 64}},
       Layout::nhwc,
       {false, true, true, false},
       1e-4,
       1e-5},
      {"group_norm_nchw_silu_affine",
       graph::GroupNorm{2,
                        1e-5f,
                        false,
                        {graph::ChainStep{graph::ChainStepKind::silu},
                         graph::ChainStep{graph::ChainStepKind::affine}}},
       {{2, 4, 6, 19}, {4}, {4}, {4}, {4}},
       Layout::nchw,
       {false, true, true, true, true},
       1e-4,
       1e-5},
      // Resize: nearest with each rounding, up and down by integer and odd ratios, linear on the
      // last two axes, each coordinate mode, a rank-3 tensor resized on every axis.
      {"resize_nearest_half_pixel_x2",
       resize_op(ResizeMode::nearest, ResizeCoordinates::half_pixel,
                 NearestRounding::round_prefer_floor, {1, 3, 7, 8}, {1, 3, 14, 16}),
       {{1, 3, 7, 8}}},
      {"resize_nearest_asymmetric_floor_down_odd",
       resize_op(ResizeMode::nearest, ResizeCoordinates::asymmetric, NearestRounding::floor,
                 {2, 5, 9, 11}, {2, 5, 4, 5}),
       {{2, 5, 9, 11}}},
      {"resize_nearest_tf_half_pixel_ceil",
       resize_op(ResizeMode::nearest, ResizeCoordinates::tf_half_pixel_for_nn,
                 NearestRounding::ceil, {1, 2, 6, 7}, {1, 2, 12, 21}),
       {{1, 2, 6, 7}}},
      {"resize_nearest_rank3_prefer_ceil_align_corners",
       resize_op(ResizeMode::nearest, ResizeCoordinates::align_corners,
                 NearestRounding::round_prefer_ceil, {3, 4, 5}, {6, 4, 13}),
       {{3, 4, 5}}},
      {"resize_linear_align_corners_up",
       resize_op(ResizeMode::linear, ResizeCoordinates::align_corners, NearestRounding::floor,
                 {1, 4, 5, 6}, {1, 4, 13, 17}),
       {{1, 4, 5, 6}},
       Layout::any,
       {},
       1e-5,
       1e-6},
      {"resize_linear_pytorch_half_pixel_scales",
       resize_op(ResizeMode::linear, ResizeCoordinates::pytorch_half_pixel, NearestRounding::floor,
                 {2, 3, 8, 8}, {2, 3, 4, 13}, {1.0f, 1.0f, 0.6f, 1.7f}),
       {{2, 3, 8, 8}},
       Layout::any,
       {},
       1e-5,
       1e-6},
      {"resize_linear_half_pixel_segmentation_x4",
       resize_op(ResizeMode::linear, ResizeCoordinates::half_pixel, NearestRounding::floor,
                 {1, 21, 28, 28}, {1, 21, 112, 112}),
       {{1, 21, 28, 28}},
       Layout::any,
       {},
       1e-5,
       1e-6},
      // Whole-factor upsampling of the innermost axis (taps repeating every 8, 2, 3 outputs:
      // the periodic schedule, its vectors of periods not a multiple of the input width), an
      // innermost axis alone, and a rank-1 tensor.
      {"resize_linear_pytorch_half_pixel_x8_segmentation",
       resize_op(ResizeMode::linear, ResizeCoordinates::pytorch_half_pixel, NearestRounding::floor,
                 {1, 5, 6, 40}, {1, 5, 48, 320}),
       {{1, 5, 6, 40}},
       Layout::any,
       {},
       1e-5,
       1e-6},
      {"resize_cubic_asymmetric_x2_innermost_only",
       cubic(resize_op(ResizeMode::nearest, ResizeCoordinates::asymmetric, NearestRounding::floor,
                       {2, 3, 4, 19}, {2, 3, 4, 38}),
             -0.75f, true),
       {{2, 3, 4, 19}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"resize_nearest_prefer_floor_x3_rank1",
       resize_op(ResizeMode::nearest, ResizeCoordinates::half_pixel,
                 NearestRounding::round_prefer_floor, {37}, {111}),
       {{37}}},
      // Cubic: up and down, each coordinate mode, both coefficients, exclude_outside (its
      // renormalized taps at the edges), a rank-3 tensor; tf_crop_and_resize with a crop that
      // leaves the input on some axes (the extrapolation value there) with each mode.
      {"resize_cubic_half_pixel_up",
       cubic(resize_op(ResizeMode::nearest, ResizeCoordinates::half_pixel, NearestRounding::floor,
                       {1, 3, 5, 6}, {1, 3, 11, 13}),
             -0.75f, false),
       {{1, 3, 5, 6}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"resize_cubic_align_corners_exclude_outside_down",
       cubic(resize_op(ResizeMode::nearest, ResizeCoordinates::align_corners,
                       NearestRounding::floor, {2, 2, 9, 10}, {2, 2, 4, 7}),
             -0.5f, true),
       {{2, 2, 9, 10}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"resize_cubic_asymmetric_scales_rank3",
       cubic(resize_op(ResizeMode::nearest, ResizeCoordinates::asymmetric, NearestRounding::floor,
                       {3, 6, 7}, {3, 10, 4}, {1.0f, 1.7f, 0.6f}),
             -0.75f, true),
       {{3, 6, 7}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"resize_cubic_pytorch_half_pixel_to_one",
       cubic(resize_op(ResizeMode::nearest, ResizeCoordinates::pytorch_half_pixel,
                       NearestRounding::floor, {1, 2, 7, 8}, {1, 2, 1, 19}),
             -0.75f, false),
       {{1, 2, 7, 8}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"resize_linear_tf_crop_and_resize",
       cropped(resize_op(ResizeMode::linear, ResizeCoordinates::half_pixel, NearestRounding::floor,
                         {1, 2, 8, 9}, {1, 2, 5, 7}),
               {0, 0, 0.2f, -0.15f, 1, 1, 0.9f, 1.2f}, 0.25f),
       {{1, 2, 8, 9}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"resize_cubic_tf_crop_and_resize_exclude_outside",
       cropped(cubic(resize_op(ResizeMode::nearest, ResizeCoordinates::half_pixel,
                               NearestRounding::floor, {2, 1, 6, 7}, {2, 1, 9, 4}),
                     -0.5f, true),
               {0, 0, -0.1f, 0.3f, 1, 1, 0.95f, 0.7f}, -1.5f),
       {{2, 1, 6, 7}},
       Layout::any,
       {},
       1e-5,
       1e-5},
      {"resize_nearest_tf_crop_and_resize_one_row",
       cropped(resize_op(ResizeMode::nearest, ResizeCoordinates::half_pixel,
                         NearestRounding::round_prefer_ceil, {1, 3, 6, 9}, {1, 3, 1, 5}),
               {0, 0, 0.3f, 0.1f, 1, 1, 0.45f, 0.8f}, 0.0f),
       {{1, 3, 6, 9}}},
      // ArgMax / ArgMin: each kind, kept and dropped axes, the innermost, a middle and the
      // outermost axis (random inputs: no ties; test_arg_reduce.cpp has those and NaN).
      {"argmax_middle_keepdims", graph::Reduce{{1}, true, graph::ReduceKind::argmax}, {{3, 17, 5}}},
      {"argmin_inner", graph::Reduce{{1}, false, graph::ReduceKind::argmin}, {{4, 33}}},
      {"argmax_last_outer", graph::Reduce{{0}, false, graph::ReduceKind::argmax_last}, {{6, 7, 3}}},
      {"argmin_last_rank4_keepdims",
       graph::Reduce{{2}, true, graph::ReduceKind::argmin_last},
       {{2, 3, 9, 4}}},
      {"global_avg_pool_nchw",
       graph::GlobalPool{graph::PoolKind::avg},
       {{2, 24, 7, 9}},
       Layout::nchw},
  };
}

inline graph::Graph op_graph(const OpCase& c) {
  graph::GraphBuilder b;
  std::vector<graph::ValueId> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    // An input of the first one's shape (a GroupNorm's residual) takes its layout.
    const Layout layout = i == 0 || c.inputs[i] == c.inputs[0] ? c.layout : Layout::any;
    ins.push_back(i < c.constant.size() && c.constant[i]
                      ? b.constant(name, c.inputs[i],
                                   graph::random_uniform(graph::num_elements(c.inputs[i]), -0.5f,
                                                         0.5f, 70 + i),
                                   layout)
                      : b.input(name, c.inputs[i], layout));
  }
  b.output(b.op(c.name, c.op, ins));
  return b.finish();
}

}  // namespace kiln::testing_util
