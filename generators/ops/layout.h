// Layout algorithm builders: the NCHW -> NHWC transform the layout pass inserts at the graph
// entry.
#pragma once

#include "Halide.h"
#include "schedules/layout_schedule.h"

namespace kiln::generators::ops {

// `input` is NCHW, (x, y, c, n) in Halide's innermost-first order; the result is the same
// tensor NHWC, (c, x, y, n), with the Vars its schedule needs.
schedules::LayoutFuncs nchw_to_nhwc(const Halide::Func& input);

}  // namespace kiln::generators::ops
