// ONNX -> IR for resizing: Resize (opsets 10-28) and Upsample (opsets 7-9), each one Resize
// node of the IR.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "graph/onnx/importer.h"

namespace kiln::graph::onnx {
namespace {

// Bound on a scale or size: far beyond any real network, small enough that the IR's int
// arithmetic on the sizes cannot overflow.
constexpr int64_t kMaxScale = int64_t{1} << 20;

// Per-axis scales (or, with `from_sizes`, output sizes) given to Resize or Upsample: the IR's
// output shape and scales. Scales give floor(in * scale); sizes give scale = out / in.
Resize resize_shape(const NodeCtx& c, const Shape& xs, const std::vector<double>& values,
                    bool from_sizes) {
  if (values.size() != xs.size())
    node_error(c, std::string(from_sizes ? "sizes" : "scales") + " has " +
                      std::to_string(values.size()) + " entries for a rank-" +
                      std::to_string(xs.size()) + " input");
  Resize r;
  for (size_t a = 0; a < xs.size(); ++a) {
    const double v = values[a];
    if (!(v > 0) || v > static_cast<double>(kMaxScale))
      node_error(c, std::string(from_sizes ? "size " : "scale ") + std::to_string(v) + " on axis " +
                        std::to_string(a) + " is not positive or too large");
    const double out =
        from_sizes ? v : std::floor(static_cast<double>(xs[a]) * static_cast<float>(v));
    if (out < 1)
      node_error(
          c, "axis " + std::to_string(a) + " would resize to " + std::to_string(out) + " elements");
    r.sizes.push_back(static_cast<int64_t>(out));
    r.scales.push_back(from_sizes ? static_cast<float>(v / static_cast<double>(xs[a]))
                                  : static_cast<float>(v));
  }
  return r;
}

ResizeMode resize_mode(const NodeCtx& c) {
  const std::string mode = attr_string(c, "mode", "nearest");
  if (mode == "nearest") return ResizeMode::nearest;
  if (mode == "linear" || mode == "bilinear") return ResizeMode::linear;  // bilinear: Upsample-7
  if (mode == "cubic" && c.op() == "Resize") return ResizeMode::cubic;
  node_error(
      c, "attribute 'mode' is '" + mode + "'; Kiln supports nearest, linear and (Resize) cubic");
}

// Resize-10 and Upsample: constant scales, asymmetric coordinates, nearest rounding as given.
void emit_scaled_resize(Importer& im, const NodeCtx& c, const std::vector<double>& scales,
                        NearestRounding nearest) {
  Resize r = resize_shape(c, im.input_shape(c, 0), scales, false);
  r.mode = resize_mode(c);
  r.coordinates = ResizeCoordinates::asymmetric;
  r.nearest = nearest;
  im.define_value(c, 0, im.emit(c, r, {im.value_input(c, 0)}, im.output_name(c, 0)));
}

// Resize-10: Upsample-9 under a new name, inputs X and constant scales, that may also shrink:
// nearest rounding down when enlarging and up when shrinking (as onnxruntime's opset-10 Resize
// does), or linear.
void convert_resize_10(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  std::vector<double> values;
  for (float f : im.constant_input(c, 1, "scales").f) values.push_back(f);
  bool enlarges = false, shrinks = false;
  for (double v : values) enlarges = enlarges || v > 1, shrinks = shrinks || v < 1;
  if (resize_mode(c) == ResizeMode::nearest && enlarges && shrinks)
    node_error(c,
               "nearest resizing that enlarges some axes and shrinks others is not supported at "
               "opset 10 (its rounding differs between the two)");
  emit_scaled_resize(im, c, values, shrinks ? NearestRounding::ceil : NearestRounding::floor);
}

}  // namespace

// Resize (opsets 11-28): scales or sizes as constants; nearest with every nearest_mode, linear
// and cubic (on the last two axes), every coordinate_transformation_mode (tf_crop_and_resize
// with a constant roi); opset 10's form in convert_resize_10.
void convert_resize(Importer& im, const NodeCtx& c) {
  if (c.opset < 11) {
    convert_resize_10(im, c);
    return;
  }
  expect_inputs(c, 1, 4);
  // Opset 18's additions, accepted where they change nothing.
  if (attr_int(c, "antialias", 0) != 0)
    node_error(c, "attribute 'antialias'=1 is not supported (Kiln resizes without antialiasing)");
  if (find_attr(c, "axes")) node_error(c, "attribute 'axes' is not supported (give every axis)");
  const std::string policy = attr_string(c, "keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch")
    node_error(
        c, "attribute 'keep_aspect_ratio_policy' is '" + policy + "'; only 'stretch' is supported");
  const Shape xs = im.input_shape(c, 0);
  const bool scales = im.has_input(c, 2) && im.constant_input(c, 2, "scales").size() > 0;
  const bool sizes = im.has_input(c, 3) && im.constant_input(c, 3, "sizes").size() > 0;
  if (scales == sizes) node_error(c, "exactly one of scales and sizes must be given");
  std::vector<double> values;
  if (scales) {
    for (float f : im.constant_input(c, 2, "scales").f) values.push_back(f);
  } else {
    for (int64_t v : im.int_list_input(c, 3, "sizes")) values.push_back(static_cast<double>(v));
  }
  Resize r = resize_shape(c, xs, values, sizes);
  r.mode = resize_mode(c);
  static const std::vector<std::pair<std::string, ResizeCoordinates>> coordinates = {
      {"half_pixel", ResizeCoordinates::half_pixel},
      {"pytorch_half_pixel", ResizeCoordinates::pytorch_half_pixel},
      {"align_corners", ResizeCoordinates::align_corners},
      {"asymmetric", ResizeCoordinates::asymmetric},
      {"tf_half_pixel_for_nn", ResizeCoordinates::tf_half_pixel_for_nn},
      {"tf_crop_and_resize", ResizeCoordinates::tf_crop_and_resize}};
  const std::string ct = attr_string(c, "coordinate_transformation_mode", "half_pixel");
  bool known = false;
  for (const auto& [name, mode] : coordinates)
    if (ct == name) r.coordinates = mode, known = true;
  if (!known)
    node_error(c, "attribute 'coordinate_transformation_mode' is '" + ct +
                      "'; Kiln supports half_pixel, pytorch_half_pixel, align_corners, asymmetric, "
                      "tf_half_pixel_for_nn and tf_crop_and_resize");
  if (r.coordinates == ResizeCoordinates::tf_crop_and_resize) {
    const std::vector<float> roi =
        im.has_input(c, 1) ? im.constant_input(c, 1, "roi").f : std::vector<float>{};
    if (roi.size() != 2 * xs.size())
      node_error(
          c, "input 'roi' has " + std::to_string(roi.size()) +
                 " entries; tf_crop_and_resize needs 2 * rank = " + std::to_string(2 * xs.size()));
    for (float v : roi)
      if (!std::isfinite(v)) node_error(c, "input 'roi' holds a non-finite value");
    r.roi = roi;
    r.extrapolation = attr_float(c, "extrapolation_value", 0.0f);
  }
  if (r.mode == ResizeMode::cubic) {
    r.cubic_a = attr_float(c, "cubic_coeff_a", -0.75f);
    r.exclude_outside = attr_int(c, "exclude_outside", 0) != 0;
    if (!std::isfinite(r.cubic_a)) node_error(c, "attribute 'cubic_coeff_a' is not finite");
  }
  static const std::vector<std::pair<std::string, NearestRounding>> roundings = {
      {"round_prefer_floor", NearestRounding::round_prefer_floor},
      {"round_prefer_ceil", NearestRounding::round_prefer_ceil},
      {"floor", NearestRounding::floor},
      {"ceil", NearestRounding::ceil}};
  const std::string nm = attr_string(c, "nearest_mode", "round_prefer_floor");
  known = false;
  for (const auto& [name, mode] : roundings)
    if (nm == name) r.nearest = mode, known = true;
  if (!known) node_error(c, "attribute 'nearest_mode' is '" + nm + "'");
  im.define_value(c, 0, im.emit(c, r, {im.value_input(c, 0)}, im.output_name(c, 0)));
}

// Upsample (opsets 7-9): scales as an attribute (7) or a constant input (9); asymmetric
// coordinates, nearest rounding down.
void convert_upsample(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 2);
  std::vector<double> values;
  if (c.opset < 9) {
    for (float f : attr_floats(c, "scales")) values.push_back(f);
  } else {
    if (!im.has_input(c, 1)) node_error(c, "input 'scales' is missing");
    for (float f : im.constant_input(c, 1, "scales").f) values.push_back(f);
  }
  emit_scaled_resize(im, c, values, NearestRounding::floor);
}

// GridSample (opsets 16-22) of 4-D images: modes bilinear/linear, nearest and bicubic/cubic
// (opset 20 renamed them), padding zeros, border or reflection, align_corners either way. One
// generated kernel; the grid is an ordinary input (computed or constant).
void convert_grid_sample(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  GridSample gs;
  const std::string mode = attr_string(c, "mode", c.opset >= 20 ? "linear" : "bilinear");
  if (mode == "bilinear" || mode == "linear") {
    gs.mode = GridSampleMode::linear;
  } else if (mode == "nearest") {
    gs.mode = GridSampleMode::nearest;
  } else if (mode == "bicubic" || mode == "cubic") {
    gs.mode = GridSampleMode::cubic;
  } else {
    node_error(c, "mode '" + mode + "' is not supported (bilinear, nearest, bicubic)");
  }
  const std::string padding = attr_string(c, "padding_mode", "zeros");
  if (padding == "zeros") {
    gs.padding = GridSamplePadding::zeros;
  } else if (padding == "border") {
    gs.padding = GridSamplePadding::border;
  } else if (padding == "reflection") {
    gs.padding = GridSamplePadding::reflection;
  } else {
    node_error(c, "padding_mode '" + padding + "' is not supported (zeros, border, reflection)");
  }
  gs.align_corners = attr_int(c, "align_corners", 0) != 0;
  const Shape x = im.input_shape(c, 0);
  if (x.size() != 4)
    node_error(c, "x is " + to_string(x) + "; Kiln samples 4-D images [N, C, H, W] only");
  const ValueId v =
      im.emit(c, gs, {im.value_input(c, 0), im.value_input(c, 1)}, im.output_name(c, 0));
  im.define_value(c, 0, v);
}

}  // namespace kiln::graph::onnx
