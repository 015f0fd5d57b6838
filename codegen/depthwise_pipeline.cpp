// Depthwise convolutions' pipelines, and the pointwise expansion a depthwise kernel computes
// into its input (ConvKernelSpec::expand, MobileNet's inverted-residual blocks).
#include <optional>
#include <vector>

#include "codegen/conv_pipeline_parts.h"
#include "generators/ops/elementwise.h"
#include "schedules/depthwise_schedule.h"

namespace kiln::codegen {
namespace {

// A depthwise convolution's pointwise expansion (ConvKernelSpec::expand): the 1x1 convolution
// of inputs[0] by the last two inputs (weights and bias), then its activation.
struct Expansion {
  generators::ops::ConvAlgorithm a;
  Halide::Func expanded;  // (c, x, y, n)
  Halide::Func source;    // expanded, read at coordinates clamped to the image (inline)
};

Expansion expansion(const graph::ConvKernelSpec& k, const std::vector<Halide::ImageParam>& inputs) {
  const graph::Shape& x = k.input.shape;  // NHWC, Ci channels
  const size_t e = inputs.size() - 2;
  // Both reads clamp their coordinates to the image: the depthwise window's zero padding is a
  // select, which does not bound the region of the expansion computed, and Halide's bounds of
  // a task's rows overhang the image at the last task (never used, but the input's required
  // region must hold them).
  // Halide's repeat_edge: the function at coordinates clamped to the image.
  const auto clamped = [&](const Halide::Func& f) {
    return Halide::BoundaryConditions::repeat_edge(f, {{Halide::Expr(), Halide::Expr()},
                                                       {0, static_cast<int>(x[2])},
                                                       {0, static_cast<int>(x[1])},
                                                       {Halide::Expr(), Halide::Expr()}});
  };
  Expansion r{
      generators::ops::conv2d(clamped(inputs[0]), static_cast<int>(x[2]), static_cast<int>(x[1]),
                              inputs[e], inputs[e + 1], static_cast<int>(x[3]), 1, 1,
                              {1, 1, 0, 0, 1, 1}, /*pad_input=*/false, Halide::Expr(),
                              generators::ops::Bf16Widen::none, "expansion_"),
      Halide::Func("expanded"), Halide::Func()};
  r.expanded(r.a.co, r.a.x, r.a.y, r.a.n) = generators::ops::apply_chain(
      k.expand_post,
      generators::ops::apply_activation(*k.expand, r.a.acc(r.a.co, r.a.x, r.a.y, r.a.n)), {},
      r.a.co);
  r.source = clamped(r.expanded);
  return r;
}

// The expansion's own loops (its placement is the depthwise schedule's): on CPUs the wide
// family's default for its shape, computed a row at a time inside the depthwise tasks
// (ConvFuncs::in_task); CUDA's convolution schedule on GPUs; Halide's default with `naive`.
void schedule_expansion(const graph::ConvKernelSpec& k, const Expansion& e,
                        const schedules::ConvParams& depthwise, const Halide::Target& target) {
  const graph::Shape out = graph::conv_input_nhwc(k);  // the expanded tensor, NHWC
  schedules::ConvFuncs f =
      conv_funcs(e.a, e.expanded, out, k.input.shape[3], /*stage_input=*/false);
  if (depthwise.family == schedules::ConvFamily::naive) {
    schedules::schedule_conv_naive(f, target);
  } else if (target.has_gpu_feature()) {
    schedules::schedule_conv_cuda(f, target);
  } else {
    // Per task of the depthwise schedule: its block of channels, a row at a time.
    schedules::ConvShape s;
    s.out_channels = schedules::expansion_tasks(static_cast<int>(out[3]),
                                                static_cast<int>(graph::conv_output_nhwc(k)[1]),
                                                static_cast<int>(out[0]), target)
                         .channels;
    s.out_width = static_cast<int>(out[2]);
    s.out_height = static_cast<int>(out[1]);
    s.batch = static_cast<int>(out[0]);
    s.reduction_channels = static_cast<int>(k.input.shape[3]);
    f.in_task = true;
    schedules::schedule_conv_cpu(f, schedules::default_wide_params(s, target), target);
  }
}

}  // namespace

KernelPipeline depthwise_pipeline(const graph::ConvKernelSpec& k, const Halide::Target& target,
                                  const std::vector<Halide::ImageParam>& inputs,
                                  const schedules::ConvParams& params, bool automatic) {
  const graph::Shape in = graph::conv_input_nhwc(k);    // NHWC
  const graph::Shape& w = k.weights.shape;              // [Kh, Kw, 1, C]
  const graph::Shape out = graph::conv_output_nhwc(k);  // NHWC, before any pooling
  const std::optional<Expansion> e =
      k.expand ? std::optional<Expansion>(expansion(k, inputs)) : std::nullopt;
  const generators::ops::DepthwiseAlgorithm a = generators::ops::depthwise_conv2d(
      e ? e->source : conv_source(k, inputs), static_cast<int>(in[2]), static_cast<int>(in[1]),
      inputs[1], inputs[2], static_cast<int>(w[1]), static_cast<int>(w[0]),
      {k.stride_w, k.stride_h, k.pad_left, k.pad_top, k.dilation_w, k.dilation_h});
  Halide::Func output("output");
  output(a.c, a.x, a.y, a.n) =
      conv_epilogue(k, a.acc(a.c, a.x, a.y, a.n), inputs, {a.c, a.x, a.y, a.n});
  const ConvOutput o = conv_output(k, output);
  const schedules::DepthwiseFuncs f{a.input_padded,
                                    a.acc,
                                    output,
                                    a.c,
                                    a.x,
                                    a.y,
                                    a.n,
                                    a.r,
                                    static_cast<int>(out[3]),
                                    static_cast<int>(out[2]),
                                    static_cast<int>(out[1]),
                                    k.stride_w,
                                    k.dilation_w,
                                    e ? e->expanded : Halide::Func(),
                                    static_cast<int>(out[0]),
                                    static_cast<int>((w[0] - 1) * k.dilation_h + 1)};
  if (automatic) return KernelPipeline{Halide::Pipeline(o.out), inputs};
  if (e) schedule_expansion(k, *e, params, target);
  if (target.has_gpu_feature()) {
    schedules::schedule_depthwise_cuda(f, target);
  } else {
    schedules::schedule_depthwise_cpu(f, params, target);
  }
  schedule_tail(k, o, params, target);
  return KernelPipeline{Halide::Pipeline(o.out), inputs};
}

}  // namespace kiln::codegen
