// What the convolution generators share: the epilogue parameter and its maths, zero padding of
// an NHWC input in x and y, and the estimates of the stride / pad / dilation inputs.
#pragma once

#include <map>
#include <string>

#include "Halide.h"

namespace kiln::generators {

enum class Epilogue { none, relu, relu6 };

inline const std::map<std::string, Epilogue> kEpilogueNames = {
    {"none", Epilogue::none}, {"relu", Epilogue::relu}, {"relu6", Epilogue::relu6}};

inline Halide::Expr apply_epilogue(Epilogue e, Halide::Expr v) {
  switch (e) {
    case Epilogue::relu: return Halide::max(v, 0.0f);
    case Epilogue::relu6: return Halide::clamp(v, 0.0f, 6.0f);
    case Epilogue::none: break;
  }
  return v;
}

// Zero outside the image in x and y (dims 1 and 2 of an NHWC buffer); channels and batch are
// never read out of range.
template <typename InputBuffer>
Halide::Func zero_padded_xy(const InputBuffer& in) {
  using Halide::Expr;
  return Halide::BoundaryConditions::constant_exterior(
      in, 0.0f, {{Expr(), Expr()}, {0, in.dim(1).extent()}, {0, in.dim(2).extent()}, {Expr(), Expr()}});
}

// The scalar inputs both convolution generators declare, estimated for autoschedulers.
template <typename Generator>
void set_window_estimates(Generator& g, int stride, int pad) {
  g.stride_x.set_estimate(stride);
  g.stride_y.set_estimate(stride);
  g.pad_x.set_estimate(pad);
  g.pad_y.set_estimate(pad);
  g.dilation_x.set_estimate(1);
  g.dilation_y.set_estimate(1);
}

}  // namespace kiln::generators
