// What the convolution generators share: the epilogue parameter and its maths, and the
// estimates of the stride / pad / dilation inputs. The algorithms are in generators/ops/conv.h.
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
