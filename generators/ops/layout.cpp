#include "generators/ops/layout.h"

namespace kiln::generators::ops {

schedules::LayoutFuncs nchw_to_nhwc(const Halide::Func& input) {
  Halide::Var c("c"), x("x"), y("y"), n("n");
  Halide::Func output("output");
  output(c, x, y, n) = input(x, y, c, n);
  return {output, c, x, y, n};
}

}  // namespace kiln::generators::ops
