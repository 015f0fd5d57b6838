// The fused depthwise convolution kernel (groups == channels, one filter per channel):
// NHWC input, [Kh, Kw, 1, C] weights, bias, an elementwise epilogue. generate() holds the
// algorithm only; the schedule lives in schedules/.
#include "Halide.h"
#include "generators/conv_common.h"
#include "generators/ops/conv.h"
#include "schedules/depthwise_schedule.h"

namespace kiln::generators {
namespace {

using namespace Halide;

class FusedDepthwise : public Generator<FusedDepthwise> {
 public:
  GeneratorParam<Epilogue> epilogue{"epilogue", Epilogue::relu6, kEpilogueNames};

  Input<Buffer<float, 4>> input{"input"};      // (c, x, y, n): NHWC
  Input<Buffer<float, 4>> weights{"weights"};  // (c, 1, kx, ky): HWIO with one input channel
  Input<Buffer<float, 1>> bias{"bias"};
  Input<int> stride_x{"stride_x", 1, 1, 1 << 16};
  Input<int> stride_y{"stride_y", 1, 1, 1 << 16};
  Input<int> pad_x{"pad_x", 0, 0, 1 << 16};
  Input<int> pad_y{"pad_y", 0, 0, 1 << 16};
  Input<int> dilation_x{"dilation_x", 1, 1, 1 << 16};
  Input<int> dilation_y{"dilation_y", 1, 1, 1 << 16};
  Output<Buffer<float, 4>> output{"output"};

  void generate() {
    const ops::DepthwiseAlgorithm a = ops::depthwise_conv2d(
        input, input.dim(1).extent(), input.dim(2).extent(), weights, bias, weights.dim(2).extent(),
        weights.dim(3).extent(), {stride_x, stride_y, pad_x, pad_y, dilation_x, dilation_y});
    const Var c = a.c, x = a.x, y = a.y, n = a.n;
    Func acc = a.acc;
    output(c, x, y, n) = apply_epilogue(epilogue, acc(c, x, y, n));

    add_requirement(weights.dim(1).extent() == 1, "depthwise weights have one input channel");
    add_requirement(weights.dim(0).extent() == input.dim(0).extent() &&
                        output.dim(0).extent() == input.dim(0).extent() &&
                        bias.dim(0).extent() == input.dim(0).extent(),
                    "depthwise input, weights, bias and output channel counts differ");
    add_requirement(input.dim(3).extent() == output.dim(3).extent(),
                    "input and output batch sizes differ");
    funcs_ = {a.input_padded, acc, output, c, x, y, n, a.r, output.dim(0).extent(),
              output.dim(1).extent(), output.dim(2).extent(), stride_x, dilation_x};
  }

  void schedule() {
    input.set_estimates({{0, 144}, {0, 56}, {0, 56}, {0, 1}});
    weights.set_estimates({{0, 144}, {0, 1}, {0, 3}, {0, 3}});
    bias.set_estimates({{0, 144}});
    set_window_estimates(*this, 1, 1);
    output.set_estimates({{0, 144}, {0, 56}, {0, 56}, {0, 1}});
    if (using_autoscheduler()) return;
    if (get_target().has_gpu_feature()) {
      schedules::schedule_depthwise_cuda(funcs_, get_target());
    } else {
      schedules::schedule_depthwise_cpu(funcs_, get_target());
    }
  }

 private:
  schedules::DepthwiseFuncs funcs_;
};

}  // namespace
}  // namespace kiln::generators

HALIDE_REGISTER_GENERATOR(kiln::generators::FusedDepthwise, kiln_fused_depthwise)
