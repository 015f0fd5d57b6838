// The naive convolution schedule: what Halide does with no scheduling at all.
#include "conv_schedule.h"

namespace kiln::schedules {

void schedule_conv_naive(const ConvFuncs& f, const Halide::Target& /*target*/) {
  // A Func with an update definition cannot be inlined; give it a home so that the only
  // difference from an unscheduled pipeline is the one Halide forces.
  Halide::Func acc = f.acc;
  acc.compute_root();
}

}  // namespace kiln::schedules
