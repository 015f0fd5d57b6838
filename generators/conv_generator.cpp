// The fused convolution kernel: conv2d (NHWC input, HWIO weights) + bias + an elementwise
// epilogue. generate() holds the algorithm only; the schedule lives in schedules/.
#include "Halide.h"
#include "generators/conv_common.h"
#include "generators/ops/conv.h"
#include "schedules/conv_schedule.h"

namespace kiln::generators {
namespace {

using namespace Halide;

enum class Schedule { naive, tuned, tuned_deep, tuned_1x1 };

class FusedConv : public Generator<FusedConv> {
 public:
  GeneratorParam<Epilogue> epilogue{"epilogue", Epilogue::relu, kEpilogueNames};
  // tuned = the CPU or CUDA schedule, picked by the target; tuned_deep = the CPU schedule for
  // small outputs with long reductions (the runtime picks per layer, see runtime/kernels.h).
  // tuned_1x1 = the wide CPU schedule for 1x1 windows without padding: it reads the input in
  // place instead of staging a zero-padded copy, and fails on any other window.
  // Adds an input `residual_in` (the output's shape) to the result before the epilogue: the
  // residual Add of ResNet-style blocks, fused so the sum never reaches memory on its own.
  GeneratorParam<bool> residual{"residual", false};
  GeneratorParam<Schedule> schedule_kind{
      "schedule",
      Schedule::tuned,
      {{"naive", Schedule::naive},
       {"tuned", Schedule::tuned},
       {"tuned_deep", Schedule::tuned_deep},
       {"tuned_1x1", Schedule::tuned_1x1}}};

  // Halide dimension order is innermost first: (c, x, y, n) is an NHWC tensor.
  Input<Buffer<float, 4>> input{"input"};
  // HWIO: (co, ci, kx, ky), output channels innermost.
  Input<Buffer<float, 4>> weights{"weights"};
  Input<Buffer<float, 1>> bias{"bias"};
  Input<int> stride_x{"stride_x", 1, 1, 1 << 16};
  Input<int> stride_y{"stride_y", 1, 1, 1 << 16};
  // Padding before the first pixel; padding after the last one follows from the output size.
  Input<int> pad_x{"pad_x", 0, 0, 1 << 16};
  Input<int> pad_y{"pad_y", 0, 0, 1 << 16};
  Input<int> dilation_x{"dilation_x", 1, 1, 1 << 16};
  Input<int> dilation_y{"dilation_y", 1, 1, 1 << 16};
  Output<Buffer<float, 4>> output{"output"};

  void configure() {
    // Appended after the scalar inputs, before the output.
    if (residual) residual_input_ = add_input<Buffer<float, 4>>("residual_in");
  }

  void generate() {
    Expr in_c = input.dim(0).extent();
    Expr k_w = weights.dim(2).extent(), k_h = weights.dim(3).extent();
    if (pointwise())
      add_requirement(k_w == 1 && k_h == 1 && pad_x == 0 && pad_y == 0,
                      "this kernel is for 1x1 windows without padding");
    const ops::ConvAlgorithm a = ops::conv2d(
        input, input.dim(1).extent(), input.dim(2).extent(), weights, bias, in_c, k_w, k_h,
        {stride_x, stride_y, pad_x, pad_y, dilation_x, dilation_y}, !pointwise());
    const Var co = a.co, x = a.x, y = a.y, n = a.n;
    Func acc = a.acc;

    Expr result = acc(co, x, y, n);
    if (residual) result += (*residual_input_)(co, x, y, n);
    output(co, x, y, n) = apply_epilogue(epilogue, result);

    add_requirement(weights.dim(1).extent() == in_c,
                    "weights have a different input-channel count than the input");
    add_requirement(bias.dim(0).extent() == output.dim(0).extent(),
                    "bias length differs from the output channel count");
    add_requirement(weights.dim(0).extent() == output.dim(0).extent(),
                    "weights have a different output-channel count than the output");
    add_requirement(input.dim(3).extent() == output.dim(3).extent(),
                    "input and output batch sizes differ");

    if (residual) {
      add_requirement(residual_input_->dim(0).extent() == output.dim(0).extent() &&
                          residual_input_->dim(1).extent() == output.dim(1).extent() &&
                          residual_input_->dim(2).extent() == output.dim(2).extent() &&
                          residual_input_->dim(3).extent() == output.dim(3).extent(),
                      "residual and output shapes differ");
    }

    funcs_ = {a.input_padded, acc, output, co, x, y, n, a.c, a.r,
              output.dim(0).extent(), output.dim(1).extent(), output.dim(2).extent(), in_c,
              input.dim(1).stride(), !pointwise()};
  }

  void schedule() {
    // Estimates: the reference example's layer, for autoschedulers in tuning experiments.
    input.set_estimates({{0, 64}, {0, 56}, {0, 56}, {0, 1}});
    weights.set_estimates({{0, 64}, {0, 64}, {0, 3}, {0, 3}});
    bias.set_estimates({{0, 64}});
    set_window_estimates(*this, 2, 1);
    output.set_estimates({{0, 64}, {0, 28}, {0, 28}, {0, 1}});
    if (residual) residual_input_->set_estimates({{0, 64}, {0, 28}, {0, 28}, {0, 1}});
    if (using_autoscheduler()) return;

    const Target t = get_target();
    if (schedule_kind == Schedule::naive) {
      schedules::schedule_conv_naive(funcs_, t);
    } else if (t.has_gpu_feature()) {
      schedules::schedule_conv_cuda(funcs_, t);
    } else if (schedule_kind == Schedule::tuned_deep) {
      schedules::schedule_conv_cpu_deep(funcs_, t);
    } else {
      schedules::schedule_conv_cpu(funcs_, t);
    }
  }

 private:
  bool pointwise() const { return schedule_kind == Schedule::tuned_1x1; }

  schedules::ConvFuncs funcs_;
  Input<Buffer<float, 4>>* residual_input_ = nullptr;
};

}  // namespace
}  // namespace kiln::generators

HALIDE_REGISTER_GENERATOR(kiln::generators::FusedConv, kiln_fused_conv)
