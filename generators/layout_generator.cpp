// Layout transform kernel: NCHW -> NHWC, the one conversion the layout pass inserts at the
// graph entry. generate() is the algorithm; the schedule is in schedules/.
#include "Halide.h"
#include "schedules/layout_schedule.h"

namespace kiln::generators {
namespace {

using namespace Halide;

class NchwToNhwc : public Generator<NchwToNhwc> {
 public:
  Input<Buffer<float, 4>> input{"input"};     // (x, y, c, n): NCHW
  Output<Buffer<float, 4>> output{"output"};  // (c, x, y, n): NHWC

  void generate() {
    Var c("c"), x("x"), y("y"), n("n");
    output(c, x, y, n) = input(x, y, c, n);
    add_requirement(input.dim(2).extent() == output.dim(0).extent() &&
                        input.dim(0).extent() == output.dim(1).extent() &&
                        input.dim(1).extent() == output.dim(2).extent() &&
                        input.dim(3).extent() == output.dim(3).extent(),
                    "NCHW input and NHWC output describe different tensors");
    funcs_ = {output, c, x, y, n};
  }

  void schedule() {
    input.set_estimates({{0, 56}, {0, 56}, {0, 64}, {0, 1}});
    output.set_estimates({{0, 64}, {0, 56}, {0, 56}, {0, 1}});
    if (using_autoscheduler()) return;
    if (get_target().has_gpu_feature()) {
      schedules::schedule_layout_cuda(funcs_, get_target());
    } else {
      schedules::schedule_layout_cpu(funcs_, get_target());
    }
  }

 private:
  schedules::LayoutFuncs funcs_;
};

}  // namespace
}  // namespace kiln::generators

HALIDE_REGISTER_GENERATOR(kiln::generators::NchwToNhwc, kiln_nchw_to_nhwc)
