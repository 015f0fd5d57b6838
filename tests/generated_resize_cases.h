// The Resize and GridSample cases of the generated-kernel tests for one node (op_cases() in
// generated_op_cases.h holds them among the others), and the helpers that build Resize ops.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"
#include "op_case.h"

namespace kiln::testing_util {

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

// GridSample of an image `x` at a grid of `ho` x `wo` points (the second input), both drawn
// from [-1.6, 1.6]. Cubic sums 16 taps by float weights: atol 1e-5 as the cubic Resizes (up to
// 1.7e-6 measured).
inline OpCase grid_sample_case(const std::string& name, graph::GridSampleMode mode,
                               graph::GridSamplePadding padding, bool align_corners, const Shape& x,
                               int64_t ho, int64_t wo) {
  const double atol = mode == graph::GridSampleMode::cubic ? 1e-5 : 1e-6;
  return {name,
          graph::GridSample{mode, padding, align_corners},
          {x, {x[0], ho, wo, 2}},
          Layout::any,
          {},
          1e-5,
          atol,
          -1.6f,
          1.6f};
}

inline std::vector<OpCase> resize_op_cases() {
  using graph::GridSampleMode;
  using graph::GridSamplePadding;
  using graph::NearestRounding;
  using graph::ResizeCoordinates;
  using graph::ResizeMode;
  return {
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
      // GridSample: each mode with each padding rule, align_corners either way, grid points in
      // [-1.6, 1.6] (a fifth of them outside the image, reflected up to twice), one-row images
      // (align_corners: nothing to reflect across) and more channels than a vector.
      grid_sample_case("grid_sample_linear_zeros", GridSampleMode::linear, GridSamplePadding::zeros,
                       false, {2, 3, 5, 7}, 4, 6),
      grid_sample_case("grid_sample_nearest_border_align_corners", GridSampleMode::nearest,
                       GridSamplePadding::border, true, {2, 3, 5, 7}, 4, 6),
      grid_sample_case("grid_sample_cubic_reflection", GridSampleMode::cubic,
                       GridSamplePadding::reflection, false, {1, 4, 6, 5}, 9, 11),
      grid_sample_case("grid_sample_linear_reflection_align_corners", GridSampleMode::linear,
                       GridSamplePadding::reflection, true, {1, 2, 4, 9}, 5, 8),
      grid_sample_case("grid_sample_cubic_border_align_corners_wide", GridSampleMode::cubic,
                       GridSamplePadding::border, true, {1, 19, 8, 10}, 7, 13),
      grid_sample_case("grid_sample_nearest_reflection_one_row", GridSampleMode::nearest,
                       GridSamplePadding::reflection, false, {1, 2, 1, 6}, 3, 5),
      grid_sample_case("grid_sample_cubic_zeros_align_corners_one_row", GridSampleMode::cubic,
                       GridSamplePadding::zeros, true, {2, 1, 1, 6}, 3, 5),
  };
}

}  // namespace kiln::testing_util
