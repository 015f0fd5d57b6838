// Algorithm builders for Resize (ONNX Resize and Upsample) and GridSample, with the semantics the
// reference interpreter states (graph/reference_ops_data.cpp). The input is a Func indexed
// innermost first (Halide dimension d is row-major axis rank - 1 - d).
#pragma once

#include <vector>

#include "Halide.h"
#include "graph/ir.h"

namespace kiln::generators::ops {

// out(i) = x at the source coordinates of i: per axis the nearest input index, or for linear and
// cubic mode the weighted neighbours (edge values past the ends), one axis at a time. Axes the
// resize leaves alone are read directly. `passes` are the intermediate one-axis passes,
// innermost axis first (the last one is inlined into `out`), for the schedule to compute
// ahead; `pass_shapes` their row-major shapes.
struct ResizeAlgorithm {
  Halide::Func out;
  std::vector<Halide::Func> passes;
  std::vector<graph::Shape> pass_shapes;
  // period > 0: the innermost axis is resized with taps that repeat every `period` outputs (an
  // upsampling by a whole factor, most often), the output's extent a multiple of it. Its pass,
  // `innermost` (one of `passes`, or `out` when it is the last), then reads `padded` (its input
  // repeated past both ends along that axis) at unclamped indices that are affine in
  // x / period for each x % period. A schedule that splits x by the period, unrolls the part
  // within a period and vectorizes the periods turns every tap into a contiguous (or strided)
  // load and the stores of a period into interleaved dense ones; `padded` must then be
  // computed (inline, its clamps would make the taps gathers again). period 0: the taps clamp
  // their indices and `padded` is undefined.
  int period = 0;
  Halide::Func innermost, padded;
};
// The longest period ResizeAlgorithm takes (its schedule unrolls one).
inline constexpr int kMaxResizePeriod = 16;

ResizeAlgorithm resize(const Halide::Func& x, const graph::Shape& in_shape, const graph::Resize& r);

// ONNX GridSample (graph::GridSample) of x (w, h, c, n) at the points grid (k, wo, ho, n), k = 0
// the x coordinate and 1 the y one: out(wo, ho, c, n), the semantics of the reference
// interpreter (graph/reference_ops_data.cpp), the taps gathered at clamped indices. `point`
// (wo, ho, n) is each point's pixel coordinates after the padding rule, a Tuple (x, y) that
// every channel reads, for a schedule to compute once per point.
struct GridSampleAlgorithm {
  Halide::Func out, point;
};
GridSampleAlgorithm grid_sample(const Halide::Func& x, const Halide::Func& grid,
                                const graph::Shape& in_shape, const graph::GridSample& gs);

}  // namespace kiln::generators::ops
