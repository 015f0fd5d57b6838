// Generated convolutions' pipelines (dense, grouped, Winograd, AMX, and MatMuls run as 1x1
// convolutions; the depthwise ones in depthwise_pipeline.cpp). The schedule parameters they
// are built with: conv_schedule_choice.cpp.
#include <optional>
#include <string>
#include <vector>

#include "codegen/conv_pipeline_parts.h"
#include "generators/ops/conv.h"
#include "generators/ops/elementwise.h"
#include "generators/ops/pool.h"
#include "generators/ops/resize.h"
#include "generators/ops/winograd.h"
#include "runtime/conv_weights.h"
#include "runtime/kernels.h"
#include "schedules/conv_params.h"
#include "schedules/conv_schedule.h"
#include "schedules/layout_schedule.h"
#include "schedules/pool_schedule.h"
#include "schedules/weight_prefetch.h"

namespace kiln::codegen {
namespace {

// Whether the convolution is computed inside the tasks of its pooling (schedule_tail): the
// wide family on CPUs, whose row strips fit bands of the pooled rows, unless a pooling window
// reaches the padding below the image (graph::pool_reaches_below).
bool pooled_in_bands(const graph::ConvKernelSpec& k, const schedules::ConvParams& p,
                     const Halide::Target& target) {
  return k.pool && !graph::pools_before_conv(k) && !target.has_gpu_feature() &&
         p.family == schedules::ConvFamily::wide && !graph::pool_reaches_below(k);
}

// The schedule of a generated convolution: the naive one when asked for; else CUDA's on a GPU
// target; on the CPU the family's schedule with its knobs.
void schedule_conv(const schedules::ConvFuncs& f, const Halide::Target& target,
                   const schedules::ConvParams& p) {
  if (p.family == schedules::ConvFamily::naive) {
    schedules::schedule_conv_naive(f, target);
  } else if (target.has_gpu_feature()) {
    schedules::schedule_conv_cuda(f, target);
  } else if (p.family == schedules::ConvFamily::grouped) {
    schedules::schedule_conv_cpu_grouped(f, p, target);
  } else if (p.family == schedules::ConvFamily::deep) {
    schedules::schedule_conv_cpu_deep(f, p, target);
  } else {
    schedules::schedule_conv_cpu(f, p, target);
  }
}

// The scale and shift inputs of the post steps, or of the pre steps (after the post steps'), in
// the argument order of graph::generated_kernel_arguments.
std::vector<Halide::Func> step_params(const std::vector<Halide::ImageParam>& inputs,
                                      const graph::ConvKernelSpec& k, bool pre) {
  const size_t post = 3 + (k.residual ? 1 : 0);
  const size_t first = pre ? post + k.post_params.size() : post;
  const size_t count = pre ? k.pre_params.size() : k.post_params.size();
  return std::vector<Halide::Func>(inputs.begin() + static_cast<std::ptrdiff_t>(first),
                                   inputs.begin() + static_cast<std::ptrdiff_t>(first + count));
}

// The input channels a convolution's reduction runs over: a bf16 one takes them in pairs
// (runtime::bf16_conv_channels), an odd count (an RGB stem's 3) with one more, read as zero.
int64_t reduction_channels(const graph::ConvKernelSpec& k) {
  const int64_t channels = k.weights.shape[2];
  return k.bf16 ? runtime::bf16_conv_channels(channels) : channels;
}

Halide::Func paired_channels(const graph::ConvKernelSpec& k, const Halide::Func& source) {
  const int64_t channels = k.weights.shape[2];
  if (reduction_channels(k) == channels) return source;
  Halide::Var c("c"), x("x"), y("y"), n("n");
  Halide::Func paired("paired_input");
  const int last = static_cast<int>(channels) - 1;
  paired(c, x, y, n) = Halide::select(c <= last, source(Halide::min(c, last), x, y, n), 0.0f);
  return paired;
}

void constrain_conv_output(Halide::Func output, const graph::Shape& out) {
  const DenseDims od = dense_dims(out);
  for (int d = 0; d < 4; ++d)
    output.output_buffer().dim(d).set_bounds(0,
                                             static_cast<int>(od.extents[static_cast<size_t>(d)]));
  output.output_buffer().dim(0).set_stride(1);
}

// Whether a direct CPU schedule reads the convolution's input in place (no staged copy): the
// wide family when its knob says so, the deep family for an unpadded 1x1 window (float32)
// whose tiles cover the output's `width` exactly (it rounds the last tile up, which would read
// past the edge of an unstaged input).
bool reads_input_in_place(const schedules::ConvParams& params, int64_t width, bool unpadded_1x1) {
  if (params.family == schedules::ConvFamily::wide) return !params.stage_input;
  return params.family == schedules::ConvFamily::deep && unpadded_1x1 &&
         width % params.block.pixels == 0;
}

// A bf16 convolution on AMX (family amx): the windows times the weights as a matrix multiply
// (generators::ops::conv2d_as_matmul), then bias and epilogue per output element.
KernelPipeline amx_pipeline(const graph::ConvKernelSpec& k, const Halide::Target& target,
                            const std::vector<Halide::ImageParam>& inputs,
                            const schedules::ConvParams& params) {
  const graph::Shape in = graph::conv_input_nhwc(k);
  const graph::Shape& w = k.weights.shape;  // HWIO
  const graph::Shape out = graph::conv_output_nhwc(k);
  Halide::Var co("co"), step("step");
  Halide::Func weights("weights");  // (co, k): the packed pairs, Bf16Layout::rows
  weights(co, step) = Halide::cast<float>(inputs[1](step % 2, co, step / 2));
  const auto i32 = [](int64_t v) { return static_cast<int>(v); };
  const generators::ops::ConvMatmulAlgorithm a = generators::ops::conv2d_as_matmul(
      conv_source(k, inputs), i32(in[2]), i32(in[1]), i32(in[0]), weights,
      i32(reduction_channels(k)), i32(w[1]), i32(w[0]),
      i32(runtime::bf16_conv_reduction(w[0], w[1], w[2])), i32(out[2]), i32(out[1]),
      {k.stride_w, k.stride_h, k.pad_left, k.pad_top, k.dilation_w, k.dilation_h});
  Halide::Var x("x"), y("y"), n("n");
  Halide::Func output("output");
  const Halide::Expr sum = a.acc(co, x + i32(out[2]) * (y + i32(out[1]) * n)) + inputs[2](co);
  output(co, x, y, n) = conv_epilogue(k, sum, inputs, {co, x, y, n});
  const ConvOutput o = conv_output(k, output);
  schedules::schedule_conv_cpu_amx(
      {a.windows, a.acc, output, a.co, a.k, a.p, co, y, n, a.r, i32(reduction_channels(k))},
      params);
  schedule_tail(k, o, params, target);
  return KernelPipeline{Halide::Pipeline(o.out), inputs};
}

}  // namespace

// The schedule of what follows the convolution in its kernel, after the convolution's own. A
// pooling: wide convolutions on CPUs are computed per task of the pooling, a band of rows at a
// time (pooled_in_bands); every other schedule computes the whole convolution first (into a
// buffer of the kernel's own), then pools it. A resize: the whole convolution first (and its
// NCHW copy with nchw_output, a small transpose the resize's passes then read in rows), then
// the resize's passes.
void schedule_tail(const graph::ConvKernelSpec& k, const ConvOutput& o,
                   const schedules::ConvParams& p, const Halide::Target& target) {
  if (o.resize) {
    Halide::Func(o.conv).compute_root();
    if (o.nchw.defined()) {
      Halide::Func nchw = o.nchw;
      nchw.compute_root();
      const graph::Shape c = graph::conv_output_nhwc(k);
      if (target.has_gpu_feature()) {
        schedule_elementwise(elementwise_funcs(nchw, {c[0], c[3], c[1], c[2]}, true), target);
      } else {
        schedules::schedule_to_nchw_cpu(nchw, target);
      }
    }
    schedule_resize(*o.resize, k.output.shape, target);
    return;
  }
  if (!o.pool) return;
  const graph::Shape& out = k.output.shape;
  const schedules::PoolShape shape{out[3], out[2], out[1], out[0]};
  if (pooled_in_bands(k, p, target)) {
    const graph::Shape conv = graph::conv_output_nhwc(k);  // NHWC, before the pooling
    schedules::schedule_pool_cpu_bands(*o.pool, shape, *k.pool, o.conv,
                                       conv[2] * conv[3] * static_cast<int64_t>(sizeof(float)),
                                       target);
    return;
  }
  Halide::Func(o.conv).compute_root();
  if (target.has_gpu_feature()) {
    schedules::schedule_pool_gpu(*o.pool, shape, target);
  } else {
    schedules::schedule_pool_cpu(*o.pool, shape, target);
  }
}

// The conv's epilogue on its accumulator value v at (co, x, y, n): the residual (inputs[3] when
// present), the activation, the post steps with their scale and shift inputs, then the
// shortcut (the last input: a convolution with one has no expansion or input scale).
Halide::Expr conv_epilogue(const graph::ConvKernelSpec& k, Halide::Expr v,
                           const std::vector<Halide::ImageParam>& inputs,
                           const std::vector<Halide::Expr>& at) {
  if (k.residual) v += inputs[3](at);
  v = generators::ops::apply_activation(k.activation, v);
  v = generators::ops::apply_chain(k.post, v, step_params(inputs, k, false), at[0]);
  return k.shortcut ? v + inputs.back()(at) : v;
}

// What the convolution reads, as (c, x, y, n): inputs[0] (NHWC, or NCHW read in place), through
// the pre steps (the prologue) when there are any, with their scale and shift inputs (after
// the post steps'), then averaged over the pooling's windows when the kernel pools first
// (graph::pools_before_conv). Inline here; the schedules compute it where they stage the
// padded input (once per pooled element).
Halide::Func conv_source(const graph::ConvKernelSpec& k, const std::vector<Halide::ImageParam>& inputs) {
  Halide::Var c("c"), x("x"), y("y"), n("n");
  Halide::Func source = inputs[0];
  if (k.nchw_input) {  // read as (c, x, y, n) from the NCHW buffer's (x, y, c, n)
    source = Halide::Func("input_nhwc");
    source(c, x, y, n) = inputs[0](x, y, c, n);
  }
  if (!k.pre.empty()) {
    Halide::Func pre("prologue");
    pre(c, x, y, n) =
        generators::ops::apply_chain(k.pre, source(c, x, y, n), step_params(inputs, k, true), c);
    source = pre;
  }
  if (!graph::pools_before_conv(k)) return paired_channels(k, source);
  const graph::Shape& in = k.input.shape;  // NHWC: pooled first never reads NCHW
  const generators::ops::PoolAlgorithm pooled =
      generators::ops::pool2d(source, static_cast<int>(in[2]), static_cast<int>(in[1]), *k.pool);
  return paired_channels(k, pooled.out);
}

ConvOutput conv_output(const graph::ConvKernelSpec& k, const Halide::Func& conv) {
  if (k.resize) {
    const graph::Shape c = graph::conv_output_nhwc(k);
    ConvOutput o{conv, Halide::Func(), std::nullopt, std::nullopt, Halide::Func()};
    if (k.nchw_output) {
      Halide::Var x("x"), y("y"), ch("ch"), n("n");
      o.nchw = Halide::Func("conv_nchw");
      o.nchw(x, y, ch, n) = conv(ch, x, y, n);
    }
    o.resize = generators::ops::resize(k.nchw_output ? o.nchw : conv,
                                       k.nchw_output ? graph::Shape{c[0], c[3], c[1], c[2]} : c, *k.resize);
    o.out = o.resize->out;
    constrain_conv_output(o.out, k.output.shape);
    return o;
  }
  if (!k.pool || graph::pools_before_conv(k)) {
    constrain_conv_output(conv, k.output.shape);
    return {conv, conv, std::nullopt, std::nullopt, Halide::Func()};
  }
  const graph::Shape c = graph::conv_output_nhwc(k);
  generators::ops::PoolAlgorithm a =
      generators::ops::pool2d(conv, static_cast<int>(c[2]), static_cast<int>(c[1]), *k.pool);
  constrain_conv_output(a.out, k.output.shape);
  return {conv, a.out, a, std::nullopt, Halide::Func()};
}

// A generated convolution: the algorithm from generators/ops/conv.h, the residual, activation
// and post steps applied to the accumulator in registers, and the schedule `schedule` names
// (read over the default for the layer, schedules::default_conv_params) or the CUDA one.
// The output keeps run-time strides beyond the innermost dimension: it may be a slice of a
// Concat's (memory_plan.h).
KernelPipeline conv_pipeline(const graph::ConvKernelSpec& k, const Halide::Target& kernel_target,
                             const std::string& schedule) {
  const Halide::Target target = conv_schedule_target(k, kernel_target);  // the vectors' width
  const graph::Shape in = graph::conv_input_nhwc(k);  // NHWC
  const graph::Shape& w = k.weights.shape;   // HWIO
  const graph::Shape out = graph::conv_output_nhwc(k);  // NHWC, before any pooling
  // Narrow groups run as blocks of `merge` groups (runtime/conv_weights.h).
  const int merge = k.depthwise ? 1 : runtime::grouped_conv_merge(k.groups, out[3]);
  const bool automatic = is_autoscheduler(schedule);
  // An autoscheduler gets the direct algorithm (the weights as given: winograd_weight_tile).
  const schedules::ConvParams params =
      automatic ? schedules::default_direct_conv_params(conv_shape(k, target), target)
                : conv_params(k.name, conv_shape(k, target), schedule, target);
  const bool winograd = params.family == schedules::ConvFamily::winograd;
  // The weights, as the runtime binds them: narrow groups' widened to blocks of groups,
  // Winograd's transformed to [alpha, alpha, Ci, Co] (runtime::winograd_conv_weights), dense
  // ones on CPUs blocked by output channels (runtime::block_conv_weights). Dense in memory but
  // for the HWIO forms' strides beyond the innermost dimension, which stay run-time.
  graph::Shape weight_shape = {w[0], w[1], w[2] * merge, w[3]};
  if (winograd) {
    const int64_t alpha = runtime::winograd_alpha(params.tile, k.stride_w);
    weight_shape = {alpha, alpha, w[2], w[3]};
  }
  if (k.bf16 && target.has_gpu_feature())
    throw graph::Error("kernel '" + k.name + "' runs in bf16, which Kiln generates for CPUs only; "
                       "compile the model with precision f32 for " + target.to_string());
  const bool blocked = !winograd && conv_weights_blocked(k, target);
  constexpr int kBlock = runtime::kConvWeightBlock;
  std::vector<Halide::ImageParam> inputs;
  const std::vector<graph::TensorDesc> args = graph::generated_kernel_arguments(k);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (i == 1 && k.bf16 && params.family == schedules::ConvFamily::amx) {
      // (k % 2, co, k / 2): runtime::Bf16Layout::rows, the AMX tiles' plain 2-D loads.
      Halide::ImageParam p(Halide::BFloat(16), 3, "arg1");
      const int extents[3] = {2, static_cast<int>(runtime::bf16_conv_columns(w[3])),
                              static_cast<int>(runtime::bf16_conv_reduction(w[0], w[1], w[2]) / 2)};
      int stride = 1;
      for (int d = 0; d < 3; ++d) p.dim(d).set_bounds(0, extents[d]).set_stride(stride), stride *= extents[d];
      inputs.push_back(p);
    } else if (i == 1 && k.bf16) {
      // (k % 2, co % 16, k / 2, co / 16), innermost first, dense, k = ci + Ci' * (kx + Kw * ky)
      // with Ci' the channels rounded up to even (runtime::pack_bf16_conv_weights).
      Halide::ImageParam p(Halide::BFloat(16), 4, "arg1");
      const int extents[4] = {2, kBlock,
                              static_cast<int>(runtime::bf16_conv_reduction(w[0], w[1], w[2]) / 2),
                              static_cast<int>(runtime::conv_weight_blocks(w[3]))};
      int stride = 1;
      for (int d = 0; d < 4; ++d)
        p.dim(d).set_bounds(0, extents[d]).set_stride(stride), stride *= extents[d];
      inputs.push_back(p);
    } else if (i == 1 && blocked) {
      // (co % 16, ci, kx, ky, co / 16), as the runtime binds them
      // (runtime::blocked_conv_weight_dims: dense but for a line of padding after each block).
      Halide::ImageParam p(Halide::Float(32), 5, "arg1");
      const auto dims = runtime::blocked_conv_weight_dims(w[0], w[1], w[2], w[3]);
      for (size_t d = 0; d < dims.size(); ++d)
        p.dim(static_cast<int>(d))
            .set_bounds(dims[d].min, dims[d].extent)
            .set_stride(dims[d].stride);
      inputs.push_back(p);
    } else if (i == 1) {
      Halide::ImageParam p(Halide::Float(32), 4, "arg1");
      const DenseDims dd = dense_dims(weight_shape);
      for (int d = 0; d < 4; ++d)
        p.dim(d).set_bounds(0, static_cast<int>(dd.extents[static_cast<size_t>(d)]));
      p.dim(0).set_stride(1);
      inputs.push_back(p);
    } else {
      inputs.push_back(input_param(args[i], static_cast<int>(i)));
    }
  }
  if (k.depthwise) return depthwise_pipeline(k, target, inputs, params, automatic);
  if (params.family == schedules::ConvFamily::amx) return amx_pipeline(k, target, inputs, params);
  Halide::Func output("output");
  if (winograd) {
    // Winograd reads transformed weights, so an input scale (ConvKernelSpec::input_scale, the
    // last input) multiplies the input as the input transform reads it, once per element.
    Halide::Func source = conv_source(k, inputs);
    if (k.input_scale) {
      Halide::Var c("c"), x("x"), y("y"), n("n");
      Halide::Func scaled("input_scaled");
      scaled(c, x, y, n) = source(c, x, y, n) * inputs.back()(c, 0, 0, n);
      source = scaled;
    }
    const generators::ops::WinogradAlgorithm a = generators::ops::winograd_conv2d(
        source, static_cast<int>(in[2]), static_cast<int>(in[1]), static_cast<int>(in[3]),
        inputs[1], inputs[2], k.pad_left, k.pad_top, static_cast<int>(out[2]), params.tile,
        k.stride_w);
    output(a.co, a.x, a.y, a.n) =
        conv_epilogue(k, a.acc(a.co, a.x, a.y, a.n), inputs, {a.co, a.x, a.y, a.n});
    const ConvOutput o = conv_output(k, output);
    Halide::Pipeline pipeline(o.out);
    if (!automatic) {
      schedules::schedule_conv_cpu_winograd(a, output, params, target);
      schedule_tail(k, o, params, target);
      // The next position's weights prefetched (schedules/weight_prefetch.h): the steps are the
      // register tile's reduction over input channels, the passes the blocks of tiles.
      if (params.prefetch && target.arch == Halide::Target::X86 && !target.has_gpu_feature())
        pipeline.add_custom_lowering_pass(schedules::make_weight_prefetch_pass(
            {"arg1", a.product.name() + ".s1.", "r$x", a.products.name() + ".s0.", {"t"}, ""}));
    }
    return KernelPipeline{pipeline, inputs};
  }
  // A prologue or a pooling first is computed as the input is staged, once per element, not
  // once per use; an NCHW input is staged NHWC. Else reads_input_in_place decides: for the deep
  // family the staged copy of an unpadded 1x1 window's input was pure overhead (MobileNetV2's
  // 7x7 960 -> 160 layer, AVX-512, 3x7 tiles: 64 us staged, 40 in place).
  const bool unpadded_1x1 = w[0] == 1 && w[1] == 1 && !k.pad_left && !k.pad_top &&
                            !k.pad_right && !k.pad_bottom && !k.bf16;
  // Channels interleaved by group (runtime::conv_weight_interleave) are read from a staged,
  // interleaved copy of the input.
  const int interleave = blocked ? runtime::conv_weight_interleave(k) : 1;
  const bool pointwise = interleave == 1 && reads_input_in_place(params, out[2], unpadded_1x1) &&
                         !target.has_gpu_feature() && k.pre.empty() && !k.nchw_input &&
                         !graph::pools_before_conv(k);
  const int out_per_group = static_cast<int>(out[3]) / k.groups * merge;
  // Blocked weights read back in HWIO order: the algorithm sees (co, ci, kx, ky) either way.
  Halide::Func weights = inputs[1];
  using generators::ops::Bf16Widen;
  const Bf16Widen widen = !k.bf16                                 ? Bf16Widen::none
                          : schedules::bf16_dot_products(target) ? Bf16Widen::cast
                                                                 : Bf16Widen::bits;
  if (k.bf16) {
    Halide::Var co("co"), ci("ci"), kx("kx"), ky("ky");
    weights = Halide::Func("weights");
    const Halide::Expr pair =
        ci / 2 + static_cast<int>(reduction_channels(k) / 2) * (kx + static_cast<int>(w[1]) * ky);
    weights(co, ci, kx, ky) =
        generators::ops::widen_bf16(inputs[1](ci % 2, co % kBlock, pair, co / kBlock), widen);
  } else if (blocked) {
    Halide::Var co("co"), ci("ci"), kx("kx"), ky("ky");
    weights = Halide::Func("weights");
    weights(co, ci, kx, ky) = inputs[1](co % kBlock, ci, kx, ky, co / kBlock);
  }
  // An input scaled per image and channel (ConvKernelSpec::input_scale, the last input): the
  // weights scaled instead, once per image and call (a squeeze-and-excitation block's Mul
  // costs Kh * Kw * Ci * Co multiplies per image, not a pass over its input).
  Halide::Func scaled_weights;
  if (k.input_scale) {
    Halide::Var co("co"), ci("ci"), kx("kx"), ky("ky"), n("n");
    scaled_weights = Halide::Func("weights_scaled");
    scaled_weights(co, ci, kx, ky, n) = weights(co, ci, kx, ky) * inputs.back()(ci, 0, 0, n);
    weights = scaled_weights;
  }
  // Blocked weights hold whole blocks of 16 output channels (the last zero-padded), so a
  // schedule may compute a last channel block past the channel count (never stored); the bias
  // is read clamped there.
  Halide::Func bias = inputs[2];
  if (blocked && out[3] % kBlock != 0) {
    Halide::Var co("co");
    bias = Halide::Func("bias_clamped");
    bias(co) = inputs[2](Halide::min(co, static_cast<int>(out[3]) - 1));
  }
  // The deep family runs each output row's reduction in loops of their own, outside the
  // register tiles: kernel rows on the padding are left out there (float32: the bf16 form
  // reduces pairs of channels atomically).
  const bool deep_f32 = !automatic && params.family == schedules::ConvFamily::deep &&
                        !target.has_gpu_feature() && !k.bf16;
  const bool skip_padding_rows = deep_f32 && w[0] > 1 && (k.pad_top > 0 || k.pad_bottom > 0);
  // The window reaches past the left edge with any left padding, past the right one only if
  // the last output's window gets there (a stride may skip the right padding).
  const bool x_padded =
      k.pad_left > 0 || (out[2] - 1) * k.stride_w + (w[1] - 1) * k.dilation_w - k.pad_left >= in[2];
  // And its columns, where one tile spans each output row (7x7 outputs): r.y unrolled, each
  // copy's multiply-adds on the padding fall away at compile time (ResNet's 7x7 3x3 layers: 2
  // of 21 column taps as well).
  const bool skip_padding_cols = deep_f32 && w[1] > 1 && x_padded && params.block.pixels == out[2];
  const generators::ops::ConvAlgorithm a = generators::ops::conv2d(
      conv_source(k, inputs), static_cast<int>(in[2]), static_cast<int>(in[1]), weights, bias,
      static_cast<int>(reduction_channels(k)) * merge, static_cast<int>(w[1]),
      static_cast<int>(w[0]),
      {k.stride_w, k.stride_h, k.pad_left, k.pad_top, k.dilation_w, k.dilation_h}, !pointwise,
      k.groups > 1 ? Halide::Expr(out_per_group) : Halide::Expr(), widen, "", interleave,
      k.input_scale.has_value(), skip_padding_rows, skip_padding_cols);
  const Halide::Expr position =
      interleave > 1 ? generators::ops::interleaved_position(a.co, interleave, out_per_group) : a.co;
  output(a.co, a.x, a.y, a.n) =
      conv_epilogue(k, a.acc(position, a.x, a.y, a.n), inputs, {a.co, a.x, a.y, a.n});
  const ConvOutput o = conv_output(k, output);

  if (!automatic) {
    schedules::ConvFuncs f = conv_funcs(a, output, out, k.bf16 ? reduction_channels(k) : in[3],
                                        !pointwise, k.nchw_input);
    f.in_task = pooled_in_bands(k, params, target);
    f.padded_x = x_padded;
    f.unroll_kernel_columns = skip_padding_cols;
    f.bf16 = k.bf16;
    f.whole_channel_blocks = blocked && out[3] % kBlock != 0;
    f.interleave = interleave;
    schedule_conv(f, target, params);
    schedule_tail(k, o, params, target);
    if (k.input_scale) {  // whole, ahead of the convolution: (co, ci, kx, ky, n)
      scaled_weights.compute_root();
      schedule_elementwise(elementwise_funcs(scaled_weights, {in[0], w[0], w[1], w[2], w[3]}, false),
                           target);
    }
  }
  Halide::Pipeline pipeline(o.out);
  // The deep family's prefetch of its next chunk of weights (schedules/weight_prefetch.h): the
  // steps of a chunk and the passes over it are the accumulator's update loops, the accumulator
  // on the stack.
  if (!automatic && params.family == schedules::ConvFamily::deep && params.prefetch && !k.bf16 &&
      target.arch == Halide::Target::X86 && !target.has_gpu_feature()) {
    const std::string update = a.acc.name() + ".s1.";
    pipeline.add_custom_lowering_pass(schedules::make_weight_prefetch_pass(
        {"arg1", update, "rci", update, {"x", "y"}, a.acc.name()}));
  }
  return KernelPipeline{pipeline, inputs};
}

// [N, H, W, K] x [K, M] (a linear layer on the last axis, as ConvNeXt's MLP exports): the 1x1
// convolution it is, through the convolution builder and schedules, with zero bias.
KernelPipeline matmul_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                               const std::string& schedule) {
  const Halide::ImageParam a = input_param(k.inputs[0], 0), b = input_param(k.inputs[1], 1);
  const graph::Shape& in = k.inputs[0].shape;  // [N, H, W, K]: Halide (k, w, h, n)
  const graph::Shape& out = k.output.shape;    // [N, H, W, M]
  Halide::Var co("co"), ci("ci"), kx("kx"), ky("ky");
  Halide::Func weights("weights"), bias("bias");
  weights(co, ci, kx, ky) = b(co, ci);  // HWIO [1, 1, K, M]
  bias(co) = 0.0f;
  const bool automatic = is_autoscheduler(schedule);
  const schedules::ConvParams params =
      conv_params(k.name, matmul_shape(k), automatic ? "" : schedule, target);
  const bool pointwise = reads_input_in_place(params, out[2], true) && !target.has_gpu_feature();
  const generators::ops::ConvAlgorithm alg =
      generators::ops::conv2d(a, static_cast<int>(in[2]), static_cast<int>(in[1]), weights, bias,
                              static_cast<int>(in[3]), 1, 1, {1, 1, 0, 0, 1, 1}, !pointwise);
  Halide::Func output("output");
  output(alg.co, alg.x, alg.y, alg.n) = alg.acc(alg.co, alg.x, alg.y, alg.n);
  constrain([&](int d) { return output.output_buffer().dim(d); }, out);
  if (!automatic) schedule_conv(conv_funcs(alg, output, out, in[3], !pointwise), target, params);
  return KernelPipeline{Halide::Pipeline(output), {a, b}};
}

}  // namespace kiln::codegen
