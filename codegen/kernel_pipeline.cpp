// Building a generated kernel's pipeline from its spec.
#include "codegen/kernel_pipeline.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>

#include "codegen_config.h"

#include "codegen/pipeline_parts.h"
#include "generators/ops/conv.h"
#include "generators/ops/elementwise.h"
#include "generators/ops/layout.h"
#include "generators/ops/norm.h"
#include "generators/ops/pool.h"
#include "generators/ops/resize.h"
#include "generators/ops/tensor.h"
#include "generators/ops/winograd.h"
#include "runtime/conv_weights.h"
#include "runtime/kernels.h"
#include "schedules/conv_params.h"
#include "schedules/conv_schedule.h"
#include "schedules/depthwise_schedule.h"
#include "schedules/elementwise_schedule.h"
#include "schedules/layout_schedule.h"
#include "schedules/norm_schedule.h"
#include "schedules/pool_schedule.h"
#include "schedules/tensor_schedule.h"

namespace kiln::codegen {
namespace {

void check_sizes(const graph::TensorDesc& t, const std::string& kernel) {
  for (int64_t e : t.shape)
    if (e <= 0 || e > (int64_t{1} << 31) - 1 ||
        graph::num_elements(t.shape) > (int64_t{1} << 31) - 1)
      throw graph::Error("kernel '" + kernel + "': tensor '" + t.name + "' of shape " +
                         graph::to_string(t.shape) +
                         " is outside what the generated kernels index (2^31 - 1 elements)");
}

// The algorithm of each generated op: its output Func, and whether fusing the output's
// dimensions would turn an input's loads into gathers (schedules::ElementwiseFuncs).
struct Algorithm {
  Halide::Func out;
  bool keep_innermost = false;
};

Algorithm chain_algorithm(const graph::ElementwiseChain& chain, const graph::TensorDesc& out,
                          const std::vector<Halide::ImageParam>& inputs) {
  const int rank = static_cast<int>(out.shape.size());
  bool has_affine = false;
  for (const graph::ChainStep& s : chain.steps)
    has_affine |= s.kind == graph::ChainStepKind::affine;
  // The channel axis of the chain's per-channel steps (graph/shape_inference.cpp): 3 for NHWC,
  // else 1; in Halide's innermost-first order that is rank - 1 - axis.
  const int channel_dim = has_affine ? rank - 1 - (out.layout == graph::Layout::nhwc ? 3 : 1) : 0;
  const std::vector<Halide::Func> params(inputs.begin() + 1, inputs.end());
  return {generators::ops::elementwise_chain(inputs[0], rank, chain.steps, params, channel_dim),
          has_affine && channel_dim == 0};
}

Algorithm binary_algorithm(const graph::Binary& b, const std::vector<graph::TensorDesc>& args,
                           const std::vector<Halide::ImageParam>& inputs) {
  const graph::TensorDesc& out = args[2];
  const std::vector<int64_t> ea = dense_dims(args[0].shape).extents;
  const std::vector<int64_t> eb = dense_dims(args[1].shape).extents;
  return {generators::ops::binary(b.op, inputs[0], ea, inputs[1], eb,
                                  static_cast<int>(out.shape.size())),
          args[0].shape != out.shape || args[1].shape != out.shape};
}

Algorithm where_algorithm(const std::vector<graph::TensorDesc>& args,
                          const std::vector<Halide::ImageParam>& inputs) {
  const graph::TensorDesc& out = args[3];
  std::vector<std::vector<int64_t>> extents;
  bool broadcast = false;
  for (size_t i = 0; i < 3; ++i) {
    extents.push_back(dense_dims(args[i].shape).extents);
    broadcast |= args[i].shape != out.shape;
  }
  const std::vector<Halide::Func> in(inputs.begin(), inputs.begin() + 3);
  return {generators::ops::where(in, extents, static_cast<int>(out.shape.size())), broadcast};
}

// What the convolution schedules touch (schedules/conv_schedule.h), for an NHWC output `out` of
// a convolution of an input with `in_channels` dense channels.
schedules::ConvFuncs conv_funcs(const generators::ops::ConvAlgorithm& a, const Halide::Func& output,
                                const graph::Shape& out, int64_t in_channels, bool stage_input) {
  return {a.input_padded,
          a.acc,
          output,
          a.co,
          a.x,
          a.y,
          a.n,
          a.c,
          a.r,
          static_cast<int>(out[3]),
          static_cast<int>(out[2]),
          static_cast<int>(out[1]),
          static_cast<int>(in_channels),
          static_cast<int>(in_channels),
          stage_input};
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
    schedules::schedule_conv_cpu_grouped(f, target);
  } else if (p.family == schedules::ConvFamily::deep) {
    schedules::schedule_conv_cpu_deep(f, p, target);
  } else {
    schedules::schedule_conv_cpu(f, p, target);
  }
}

constexpr const char* kAutoPrefix = "auto:";

// "auto:NAME": leave the pipeline unscheduled for Halide's autoscheduler NAME.
bool is_autoscheduler(const std::string& schedule) { return schedule.rfind(kAutoPrefix, 0) == 0; }

// Gives every input and the output its extents as estimates and lets the autoscheduler
// schedule the pipeline for `threads` cores (its plugin is loaded on first use).
void autoschedule(KernelPipeline& kp, const graph::KernelSpec& spec, const Halide::Target& target,
                  const std::string& name) {
  static const std::vector<std::string> known = {"Mullapudi2016", "Adams2019", "Li2018"};
  if (std::find(known.begin(), known.end(), name) == known.end())
    throw graph::Error("kernel '" + graph::kernel_name(spec) + "': no CPU autoscheduler is called '" +
                       name + "' (Mullapudi2016, Adams2019, Li2018)");
  static std::mutex plugins_mutex;
  static std::set<std::string> loaded;
  {
    const std::lock_guard<std::mutex> lock(plugins_mutex);
    if (!loaded.count(name)) {
      std::string lib = name;
      std::transform(lib.begin(), lib.end(), lib.begin(), ::tolower);
      Halide::load_plugin(std::string(config::kHalidePluginDir) + "/libautoschedule_" + lib + ".so");
      loaded.insert(name);
    }
  }
  const std::vector<graph::TensorDesc> args = graph::generated_kernel_arguments(spec);
  const auto* conv = std::get_if<graph::ConvKernelSpec>(&spec);
  const int merge = conv && !conv->depthwise
                        ? runtime::grouped_conv_merge(conv->groups, conv->output.shape[3])
                        : 1;
  for (size_t i = 0; i < kp.inputs.size(); ++i) {
    const DenseDims dd = dense_dims(args[i].shape);
    for (size_t d = 0; d < dd.extents.size(); ++d)
      kp.inputs[i].dim(static_cast<int>(d)).set_estimate(
          0, static_cast<int>(dd.extents[d] * (conv && i == 1 && d == 1 ? merge : 1)));
  }
  const DenseDims od = dense_dims(args.back().shape);
  Halide::Region region;
  for (int64_t e : od.extents) region.push_back({0, static_cast<int>(e)});
  Halide::Func out = kp.pipeline.outputs()[0];
  out.set_estimates(region);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kp.pipeline.apply_autoscheduler(target, {name, {{"parallelism", std::to_string(cores)}}});
}

// What the convolution schedules are chosen for, of a dense or grouped ConvKernelSpec
// (`merge` groups per block, runtime/conv_weights.h) or of a MatMul run as a 1x1 convolution.
schedules::ConvShape conv_shape(const graph::ConvKernelSpec& k, const Halide::Target& target) {
  const graph::Shape& w = k.weights.shape;  // HWIO
  const graph::Shape& out = k.output.shape;  // NHWC
  const int merge = runtime::grouped_conv_merge(k.groups, out[3]);
  const int out_per_group = static_cast<int>(out[3]) / k.groups * merge;
  schedules::ConvShape s;
  s.out_channels = static_cast<int>(out[3]);
  s.out_width = static_cast<int>(out[2]);
  s.out_height = static_cast<int>(out[1]);
  s.batch = static_cast<int>(out[0]);
  s.reduction_channels = static_cast<int>(w[2]) * merge;
  s.kernel_w = static_cast<int>(w[1]);
  s.kernel_h = static_cast<int>(w[0]);
  s.padded = k.pad_top || k.pad_left || k.pad_bottom || k.pad_right;
  // Groups of whole vectors keep each vector of output channels in one group, so the dense
  // schedules apply (their input loads are broadcasts); narrower groups vectorize pixels.
  s.narrow_groups = k.groups > 1 && out_per_group % target.natural_vector_size<float>() != 0;
  s.grouped = k.groups > 1;
  s.constant_weights = k.constant_weights;
  s.stride_w = k.stride_w, s.stride_h = k.stride_h;
  s.dilation_w = k.dilation_w, s.dilation_h = k.dilation_h;
  return s;
}

schedules::ConvShape matmul_shape(const graph::OpKernelSpec& k) {
  const graph::Shape& out = k.output.shape;  // [N, H, W, M]
  schedules::ConvShape s;
  s.out_channels = static_cast<int>(out[3]);
  s.out_width = static_cast<int>(out[2]);
  s.out_height = static_cast<int>(out[1]);
  s.batch = static_cast<int>(out[0]);
  s.reduction_channels = static_cast<int>(k.inputs[0].shape[3]);
  return s;
}

// A MatMul of a 4-D tensor by a matrix: run as a 1x1 convolution (matmul_pipeline).
bool is_conv_matmul(const graph::OpKernelSpec& k) {
  return std::holds_alternative<graph::MatMul>(k.op) && k.inputs[0].shape.size() == 4 &&
         k.inputs[1].shape.size() == 2;
}

// The knob-bearing shape of a kernel, if it has one.
std::optional<schedules::ConvShape> tunable_shape(const graph::KernelSpec& spec,
                                                  const Halide::Target& target) {
  if (const auto* c = std::get_if<graph::ConvKernelSpec>(&spec))
    return c->depthwise ? std::nullopt : std::optional(conv_shape(*c, target));
  if (const auto* o = std::get_if<graph::OpKernelSpec>(&spec))
    if (is_conv_matmul(*o)) return matmul_shape(*o);
  return std::nullopt;
}

// The parameters a convolution is generated with: `text` (resolved by codegen: a tuned
// record, or the spec's own ConvKernelSpec::schedule) read over the default, or the default.
schedules::ConvParams conv_params(const std::string& kernel, const schedules::ConvShape& shape,
                                  const std::string& text, const Halide::Target& target) {
  using schedules::ConvFamily;
  const schedules::ConvParams base = schedules::default_conv_params(shape, target);
  schedules::ConvParams p = base;
  if (text.empty()) return p;
  std::string error = schedules::parse_conv_params(text, &p);
  // Winograd's register block counts tiles, not pixels, and its rows are tile rows: a text that
  // gives a Winograd schedule reads its knobs over Winograd's default for the layer and the tile
  // it names (after its last "winograd", when it switches from another family, as `kiln tune
  // --set` writes "wide block=2x6 ... winograd tile=2"); a text that switches from Winograd to
  // a direct family, over the direct default.
  const bool to_winograd = p.family == ConvFamily::winograd;
  if (error.empty() && (to_winograd || base.family == ConvFamily::winograd)) {
    const size_t switch_at = (" " + text).rfind(" winograd");
    const std::string knobs =
        to_winograd && switch_at != std::string::npos ? text.substr(switch_at) : text;
    p = to_winograd ? schedules::default_winograd_params(shape, target)
                    : schedules::default_direct_conv_params(shape, target);
    error = schedules::parse_conv_params(knobs, &p);
    if (error.empty() && to_winograd) {  // the default block depends on the tile
      p = schedules::default_winograd_params(shape, target, p.tile);
      error = schedules::parse_conv_params(knobs, &p);
    }
  }
  if (error.empty()) error = schedules::conv_params_error(p, shape, target);
  if (!error.empty())
    throw graph::Error("kernel '" + kernel + "': schedule '" + text + "': " + error);
  return p;
}

// The conv's epilogue on its accumulator value v at (co, x, y, n): the residual (inputs[3] when
// present), the activation, then the post steps with their scale and shift inputs.
Halide::Expr conv_epilogue(const graph::ConvKernelSpec& k, Halide::Expr v,
                           const std::vector<Halide::ImageParam>& inputs,
                           const std::vector<Halide::Expr>& at) {
  size_t next = 3;
  if (k.residual) v += inputs[next++](at);
  v = generators::ops::apply_activation(k.activation, v);
  const std::vector<Halide::Func> params(inputs.begin() + static_cast<std::ptrdiff_t>(next),
                                         inputs.end());
  return generators::ops::apply_chain(k.post, v, params, at[0]);
}

void constrain_conv_output(Halide::Func output, const graph::Shape& out) {
  const DenseDims od = dense_dims(out);
  for (int d = 0; d < 4; ++d)
    output.output_buffer().dim(d).set_bounds(0,
                                             static_cast<int>(od.extents[static_cast<size_t>(d)]));
  output.output_buffer().dim(0).set_stride(1);
}

KernelPipeline depthwise_pipeline(const graph::ConvKernelSpec& k, const Halide::Target& target,
                                  const std::vector<Halide::ImageParam>& inputs,
                                  const std::string& schedule) {
  const graph::Shape& in = k.input.shape;    // NHWC
  const graph::Shape& w = k.weights.shape;   // [Kh, Kw, 1, C]
  const graph::Shape& out = k.output.shape;  // NHWC
  if (!schedule.empty())
    throw graph::Error("kernel '" + k.name + "': a depthwise convolution has one schedule; '" +
                       schedule + "' is for dense convolutions");
  const generators::ops::DepthwiseAlgorithm a = generators::ops::depthwise_conv2d(
      inputs[0], static_cast<int>(in[2]), static_cast<int>(in[1]), inputs[1], inputs[2],
      static_cast<int>(w[1]), static_cast<int>(w[0]),
      {k.stride_w, k.stride_h, k.pad_left, k.pad_top, k.dilation_w, k.dilation_h});
  Halide::Func output("output");
  output(a.c, a.x, a.y, a.n) =
      conv_epilogue(k, a.acc(a.c, a.x, a.y, a.n), inputs, {a.c, a.x, a.y, a.n});
  constrain_conv_output(output, out);
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
                                    k.dilation_w};
  if (target.has_gpu_feature()) {
    schedules::schedule_depthwise_cuda(f, target);
  } else {
    schedules::schedule_depthwise_cpu(f, target);
  }
  return KernelPipeline{Halide::Pipeline(output), inputs};
}

// A generated convolution: the algorithm from generators/ops/conv.h, the residual, activation
// and post steps applied to the accumulator in registers, and the schedule `schedule` names
// (read over the default for the layer, schedules::default_conv_params) or the CUDA one.
// The output keeps run-time strides beyond the innermost dimension: it may be a slice of a
// Concat's (memory_plan.h).
KernelPipeline conv_pipeline(const graph::ConvKernelSpec& k, const Halide::Target& target,
                             const std::string& schedule) {
  const graph::Shape& in = k.input.shape;    // NHWC
  const graph::Shape& w = k.weights.shape;   // HWIO
  const graph::Shape& out = k.output.shape;  // NHWC
  // Narrow groups run as blocks of `merge` groups (runtime/conv_weights.h).
  const int merge = k.depthwise ? 1 : runtime::grouped_conv_merge(k.groups, out[3]);
  const bool automatic = is_autoscheduler(schedule);
  const schedules::ConvParams params =
      k.depthwise ? schedules::ConvParams{}
                  : conv_params(k.name, conv_shape(k, target), automatic ? "" : schedule, target);
  const bool winograd = params.family == schedules::ConvFamily::winograd;
  // The weights, as the runtime binds them: narrow groups' widened to blocks of groups,
  // Winograd's transformed to [alpha, alpha, Ci, Co] (runtime::winograd_conv_weights), dense
  // ones on CPUs blocked by output channels (runtime::block_conv_weights). Dense in memory but
  // for the HWIO forms' strides beyond the innermost dimension, which stay run-time.
  graph::Shape weight_shape = {w[0], w[1], w[2] * merge, w[3]};
  if (winograd) {
    const int64_t alpha = runtime::winograd_matrices(params.tile).alpha;
    weight_shape = {alpha, alpha, w[2], w[3]};
  }
  const bool blocked = !winograd && !target.has_gpu_feature() && runtime::blocks_conv_weights(k);
  constexpr int kBlock = runtime::kConvWeightBlock;
  std::vector<Halide::ImageParam> inputs;
  const std::vector<graph::TensorDesc> args = graph::generated_kernel_arguments(k);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (i == 1 && blocked) {
      // (co % 16, ci, kx, ky, co / 16), innermost first, dense.
      Halide::ImageParam p(Halide::Float(32), 5, "arg1");
      const int extents[5] = {kBlock, static_cast<int>(w[2]), static_cast<int>(w[1]),
                              static_cast<int>(w[0]),
                              static_cast<int>(runtime::conv_weight_blocks(w[3]))};
      int stride = 1;
      for (int d = 0; d < 5; ++d) p.dim(d).set_bounds(0, extents[d]).set_stride(stride), stride *= extents[d];
      inputs.push_back(p);
    } else if (i == 1) {
      Halide::ImageParam p(Halide::Float(32), 4, "arg1");
      const DenseDims dd = dense_dims(weight_shape);
      for (int d = 0; d < 4; ++d)
        p.dim(d).set_bounds(0, static_cast<int>(dd.extents[static_cast<size_t>(d)]));
      p.dim(0).set_stride(1);
      inputs.push_back(p);
    } else {
      inputs.push_back(dense_input(args[i], static_cast<int>(i)));
    }
  }
  if (k.depthwise) return depthwise_pipeline(k, target, inputs, schedule);
  Halide::Func output("output");
  if (winograd) {
    const generators::ops::WinogradAlgorithm a = generators::ops::winograd_conv2d(
        inputs[0], static_cast<int>(in[2]), static_cast<int>(in[1]), static_cast<int>(in[3]),
        inputs[1], inputs[2], k.pad_left, k.pad_top, static_cast<int>(out[2]), params.tile);
    output(a.co, a.x, a.y, a.n) =
        conv_epilogue(k, a.acc(a.co, a.x, a.y, a.n), inputs, {a.co, a.x, a.y, a.n});
    constrain_conv_output(output, out);
    schedules::schedule_conv_cpu_winograd(a, output, params, target);
    return KernelPipeline{Halide::Pipeline(output), inputs};
  }
  const bool pointwise = !params.stage_input && params.family == schedules::ConvFamily::wide &&
                         !target.has_gpu_feature();
  const int out_per_group = static_cast<int>(out[3]) / k.groups * merge;
  // Blocked weights read back in HWIO order: the algorithm sees (co, ci, kx, ky) either way.
  Halide::Func weights = inputs[1];
  if (blocked) {
    Halide::Var co("co"), ci("ci"), kx("kx"), ky("ky");
    weights = Halide::Func("weights");
    weights(co, ci, kx, ky) = inputs[1](co % kBlock, ci, kx, ky, co / kBlock);
  }
  const generators::ops::ConvAlgorithm a = generators::ops::conv2d(
      inputs[0], static_cast<int>(in[2]), static_cast<int>(in[1]), weights, inputs[2],
      static_cast<int>(w[2]) * merge, static_cast<int>(w[1]), static_cast<int>(w[0]),
      {k.stride_w, k.stride_h, k.pad_left, k.pad_top, k.dilation_w, k.dilation_h}, !pointwise,
      k.groups > 1 ? Halide::Expr(out_per_group) : Halide::Expr());
  output(a.co, a.x, a.y, a.n) =
      conv_epilogue(k, a.acc(a.co, a.x, a.y, a.n), inputs, {a.co, a.x, a.y, a.n});
  constrain_conv_output(output, out);

  if (!automatic) schedule_conv(conv_funcs(a, output, out, in[3], !pointwise), target, params);
  return KernelPipeline{Halide::Pipeline(output), inputs};
}

// [N, H, W, K] x [K, M] (a linear layer on the last axis, as ConvNeXt's MLP exports): the 1x1
// convolution it is, through the convolution builder and schedules, with zero bias.
KernelPipeline matmul_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                               const std::string& schedule) {
  const Halide::ImageParam a = dense_input(k.inputs[0], 0), b = dense_input(k.inputs[1], 1);
  const graph::Shape& in = k.inputs[0].shape;  // [N, H, W, K]: Halide (k, w, h, n)
  const graph::Shape& out = k.output.shape;    // [N, H, W, M]
  Halide::Var co("co"), ci("ci"), kx("kx"), ky("ky");
  Halide::Func weights("weights"), bias("bias");
  weights(co, ci, kx, ky) = b(co, ci);  // HWIO [1, 1, K, M]
  bias(co) = 0.0f;
  const bool automatic = is_autoscheduler(schedule);
  const schedules::ConvParams params =
      conv_params(k.name, matmul_shape(k), automatic ? "" : schedule, target);
  const bool pointwise = !params.stage_input && params.family == schedules::ConvFamily::wide &&
                         !target.has_gpu_feature();
  const generators::ops::ConvAlgorithm alg =
      generators::ops::conv2d(a, static_cast<int>(in[2]), static_cast<int>(in[1]), weights, bias,
                              static_cast<int>(in[3]), 1, 1, {1, 1, 0, 0, 1, 1}, !pointwise);
  Halide::Func output("output");
  output(alg.co, alg.x, alg.y, alg.n) = alg.acc(alg.co, alg.x, alg.y, alg.n);
  constrain([&](int d) { return output.output_buffer().dim(d); }, out);
  if (!automatic) schedule_conv(conv_funcs(alg, output, out, in[3], !pointwise), target, params);
  return KernelPipeline{Halide::Pipeline(output), {a, b}};
}

// Pooling of an NHWC tensor (graph::is_generated only takes those).
KernelPipeline pool_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target) {
  const Halide::ImageParam input = dense_input(k.inputs[0], 0);
  const graph::Shape& in = k.inputs[0].shape;  // NHWC
  const graph::Shape& out = k.output.shape;    // NHWC
  const int in_w = static_cast<int>(in[2]), in_h = static_cast<int>(in[1]);
  const generators::ops::PoolAlgorithm a =
      std::holds_alternative<graph::Pool2d>(k.op)
          ? generators::ops::pool2d(input, in_w, in_h, std::get<graph::Pool2d>(k.op))
          : generators::ops::global_pool(input, in_w, in_h, std::get<graph::GlobalPool>(k.op).kind);
  constrain([&](int d) { return a.out.output_buffer().dim(d); }, out);
  const schedules::PoolShape shape{out[3], out[2], out[1], out[0]};
  if (target.has_gpu_feature()) {
    schedules::schedule_pool_gpu(a, shape, target);
  } else {
    schedules::schedule_pool_cpu(a, shape, target);
  }
  return KernelPipeline{Halide::Pipeline(a.out), {input}};
}

// NCHW -> NHWC.
KernelPipeline layout_pipeline(const graph::LayoutKernelSpec& k, const Halide::Target& target) {
  const Halide::ImageParam input = dense_input(k.input, 0);
  const schedules::LayoutFuncs f = generators::ops::nchw_to_nhwc(input);
  constrain([&](int d) { return f.output.output_buffer().dim(d); }, k.output.shape);
  if (target.has_gpu_feature()) {
    schedules::schedule_layout_cuda(f, target);
  } else {
    schedules::schedule_layout_cpu(f, target);
  }
  return KernelPipeline{Halide::Pipeline(f.output), {input}};
}

// Data movement (and Resize): the output a pure function of its coordinates, read from other
// places of the input (so the innermost dimension is kept: fusing it would not make the loads
// contiguous).
KernelPipeline data_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                             const std::vector<Halide::ImageParam>& inputs) {
  const graph::Shape& in = k.inputs[0].shape;
  Halide::Func out;
  if (const auto* t = std::get_if<graph::Transpose>(&k.op)) {
    out = generators::ops::transpose(inputs[0], in, t->perm);
  } else if (const auto* lt = std::get_if<graph::LayoutTransform>(&k.op)) {
    // NCHW <-> NHWC of a 4-D tensor (the NCHW -> NHWC one is a LayoutKernelSpec).
    const std::vector<int> perm = lt->to == graph::Layout::nchw ? std::vector<int>{0, 3, 1, 2}
                                                                : std::vector<int>{0, 2, 3, 1};
    out = generators::ops::transpose(inputs[0], in, perm);
  } else if (std::holds_alternative<graph::Reshape>(k.op)) {
    out = generators::ops::reshape(inputs[0], in, k.output.shape);
  } else if (const auto* c = std::get_if<graph::Concat>(&k.op)) {
    std::vector<graph::Shape> shapes;
    for (const graph::TensorDesc& t : k.inputs) shapes.push_back(t.shape);
    const std::vector<Halide::Func> ins(inputs.begin(), inputs.end());
    if (c->axis == static_cast<int>(in.size()) - 1 && !target.has_gpu_feature()) {
      // Along the innermost axis: one vectorized copy per input (selects would gather).
      const generators::ops::PiecewiseConcat pc = generators::ops::concat_piecewise(ins, shapes, c->axis);
      schedules::schedule_concat_cpu(pc.out, pc.pieces, dense_dims(k.output.shape).extents, target);
      constrain([&](int d) { return pc.out.output_buffer().dim(d); }, k.output.shape);
      return KernelPipeline{Halide::Pipeline(pc.out), inputs};
    }
    out = generators::ops::concat(ins, shapes, c->axis);
  } else if (const auto* sl = std::get_if<graph::Slice>(&k.op)) {
    out = generators::ops::slice(inputs[0], in, *sl);
  } else if (const auto* rs = std::get_if<graph::Resize>(&k.op)) {
    const generators::ops::ResizeAlgorithm a = generators::ops::resize(inputs[0], in, *rs);
    for (size_t i = 0; i < a.passes.size(); ++i) {  // each one-axis pass ahead, whole
      Halide::Func pass = a.passes[i];
      pass.compute_root();
      schedule_elementwise(elementwise_funcs(pass, a.pass_shapes[i], true), target);
    }
    out = a.out;
  } else if (std::holds_alternative<graph::Tile>(k.op)) {
    out = generators::ops::tile(inputs[0], in);
  } else {
    out = generators::ops::pad(inputs[0], in, std::get<graph::Pad>(k.op));
  }
  schedule_elementwise(elementwise_funcs(out, k.output.shape, true), target);
  constrain([&](int d) { return out.output_buffer().dim(d); }, k.output.shape);
  return KernelPipeline{Halide::Pipeline(out), inputs};
}

// LayerNorm: the row statistics once per row, then the normalized row.
KernelPipeline layer_norm_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                                   const std::vector<Halide::ImageParam>& inputs) {
  std::vector<Halide::Func> params;
  std::vector<graph::Shape> param_shapes;
  for (size_t i = 1; i < inputs.size(); ++i) {
    params.emplace_back(inputs[i]);
    param_shapes.push_back(k.inputs[i].shape);
  }
  const generators::ops::LayerNormAlgorithm a = generators::ops::layer_norm(
      inputs[0], k.inputs[0].shape, std::get<graph::LayerNorm>(k.op), params, param_shapes);
  const schedules::LayerNormFuncs f{a.out,     a.sum, a.mean, a.square_sum, a.inv_std,
                                    a.r, a.normalized_dims, dense_dims(k.output.shape).extents};
  if (target.has_gpu_feature()) {
    schedules::schedule_layer_norm_gpu(f, target);
  } else {
    schedules::schedule_layer_norm_cpu(f, target);
  }
  constrain([&](int d) { return a.out.output_buffer().dim(d); }, k.output.shape);
  return KernelPipeline{Halide::Pipeline(a.out), inputs};
}

// The operand of a product broadcast to the output's batch dimensions: `at` holds its two
// matrix coordinates, then its own batch dimensions (innermost first) take the output's batch
// Var of the same place from the right, or 0 where the operand's extent is 1.
Halide::Expr operand(const Halide::ImageParam& p, const graph::Shape& shape,
                     std::vector<Halide::Expr> at, const std::vector<Halide::Var>& batch) {
  const size_t rank = shape.size();
  for (size_t i = 0; i + 2 < rank; ++i)  // Halide batch dim 2 + i: row-major axis rank - 3 - i
    at.push_back(shape[rank - 3 - i] == 1 ? Halide::Expr(0) : Halide::Expr(batch[i]));
  return p(at);
}

// Gemm (alpha * op(A) op(B) + beta * C) and MatMul of operands of rank 2 or more with
// broadcast batch dimensions.
KernelPipeline product_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                                const std::vector<Halide::ImageParam>& inputs) {
  const graph::Shape &sa = k.inputs[0].shape, &sb = k.inputs[1].shape, &so = k.output.shape;
  const auto* gemm = std::get_if<graph::Gemm>(&k.op);
  const int batch_dims = static_cast<int>(so.size()) - 2;
  const int64_t kk = gemm && gemm->trans_a ? sa[0] : sa[sa.size() - 1];
  Halide::Var kv("kv"), mv("mv"), nv("nv");
  std::vector<Halide::Var> bv;
  for (int i = 0; i < batch_dims; ++i) bv.emplace_back("bv" + std::to_string(i));
  std::vector<Halide::Expr> a_args = {kv, mv}, b_args = {nv, kv};
  a_args.insert(a_args.end(), bv.begin(), bv.end());
  b_args.insert(b_args.end(), bv.begin(), bv.end());
  Halide::Func a("a"), b("b");
  const bool ta = gemm && gemm->trans_a, tb = gemm && gemm->trans_b;
  // Halide order is (column, row): A [M, K] is A(k, m); transposed, [K, M] is A(m, k).
  a(a_args) = operand(inputs[0], sa, ta ? std::vector<Halide::Expr>{mv, kv}
                                         : std::vector<Halide::Expr>{kv, mv}, bv);
  b(b_args) = operand(inputs[1], sb, tb ? std::vector<Halide::Expr>{kv, nv}
                                         : std::vector<Halide::Expr>{nv, kv}, bv);
  const generators::ops::MatMulAlgorithm alg =
      generators::ops::matmul(a, b, static_cast<int>(kk), batch_dims);
  Halide::Func out("output");
  Halide::Expr value = alg.acc(alg.args());
  if (gemm) {
    value = gemm->alpha * value;
    if (k.inputs.size() == 3) {  // C, broadcast to [M, N] (rank 0, 1 or 2)
      const graph::Shape& sc = k.inputs[2].shape;
      std::vector<Halide::Expr> c_at;
      for (size_t d = 0; d < sc.size(); ++d) {  // Halide dim d: row-major axis size - 1 - d
        const Halide::Expr v = d == 0 ? Halide::Expr(alg.n) : Halide::Expr(alg.m);
        c_at.push_back(sc[sc.size() - 1 - d] == 1 ? Halide::Expr(0) : v);
      }
      value += gemm->beta * inputs[2](c_at);
    }
  }
  out(alg.args()) = value;
  int64_t batch_count = 1;
  for (int i = 0; i < batch_dims; ++i) batch_count *= so[static_cast<size_t>(i)];
  const schedules::MatMulFuncs f{out,   alg.acc,   alg.n,  alg.m, alg.batch,
                                 alg.k, so.back(), so[so.size() - 2], batch_count};
  if (target.has_gpu_feature()) {
    schedules::schedule_matmul_gpu(f, target);
  } else {
    schedules::schedule_matmul_cpu(f, target);
  }
  constrain([&](int d) { return out.output_buffer().dim(d); }, so);
  return KernelPipeline{Halide::Pipeline(out), inputs};
}

}  // namespace

std::string default_schedule(const graph::KernelSpec& spec, const Halide::Target& target) {
  const std::optional<schedules::ConvShape> s = tunable_shape(spec, target);
  if (!s || target.has_gpu_feature()) return "";
  return schedules::to_string(schedules::default_conv_params(*s, target));
}

std::vector<std::string> schedule_candidates(const graph::KernelSpec& spec,
                                             const Halide::Target& target, int threads,
                                             size_t limit) {
  const std::optional<schedules::ConvShape> s = tunable_shape(spec, target);
  if (!s || target.has_gpu_feature()) return {};
  std::vector<std::string> out;
  for (const schedules::ConvParams& p : schedules::conv_candidates(*s, target, threads, limit))
    out.push_back(schedules::to_string(p));
  return out;
}

std::string resolve_schedule(const graph::KernelSpec& spec, const Halide::Target& target,
                             const std::string& schedule) {
  const std::optional<schedules::ConvShape> s = tunable_shape(spec, target);
  if (!s) {
    if (!schedule.empty())
      throw graph::Error("kernel '" + graph::kernel_name(spec) + "' has no schedule knobs; '" +
                         schedule + "' does not apply");
    return "";
  }
  if (is_autoscheduler(schedule)) return schedule;
  const schedules::ConvParams p = conv_params(graph::kernel_name(spec), *s, schedule, target);
  // A GPU target has one schedule besides naive; the CPU knobs mean nothing there.
  if (target.has_gpu_feature() && p.family != schedules::ConvFamily::naive) return "";
  return schedules::to_string(p);
}

int winograd_weight_tile(const graph::KernelSpec& spec, const Halide::Target& target,
                         const std::string& schedule) {
  const std::optional<schedules::ConvShape> s = tunable_shape(spec, target);
  const auto* conv = std::get_if<graph::ConvKernelSpec>(&spec);
  if (!s || !conv || is_autoscheduler(schedule)) return 0;
  const schedules::ConvParams p = conv_params(conv->name, *s, schedule, target);
  return p.family == schedules::ConvFamily::winograd ? p.tile : 0;
}

std::string schedule_for_weight_tile(const graph::KernelSpec& spec, const Halide::Target& target,
                                     const std::string& schedule, int tile) {
  if (winograd_weight_tile(spec, target, schedule) == tile) return schedule;
  const schedules::ConvShape s = *tunable_shape(spec, target);  // a tile > 0 came from one
  return schedules::to_string(tile > 0 ? schedules::default_winograd_params(s, target, tile)
                                       : schedules::default_direct_conv_params(s, target));
}

// build_kernel_pipeline without autoschedulers: the schedules of schedules/.
static KernelPipeline build_scheduled(const graph::KernelSpec& spec, const Halide::Target& target,
                                      const std::string& schedule);

KernelPipeline build_kernel_pipeline(const graph::KernelSpec& spec, const Halide::Target& target,
                                     const std::string& schedule) {
  const auto* conv = std::get_if<graph::ConvKernelSpec>(&spec);
  const std::string& chosen = schedule.empty() && conv ? conv->schedule : schedule;
  if (is_autoscheduler(chosen)) {
    if (!tunable_shape(spec, target) || target.has_gpu_feature())
      throw graph::Error("kernel '" + graph::kernel_name(spec) + "': '" + chosen +
                         "' applies only to CPU convolutions (and MatMuls run as them)");
    KernelPipeline kp = build_scheduled(spec, target, chosen);
    autoschedule(kp, spec, target, chosen.substr(std::string(kAutoPrefix).size()));
    return kp;
  }
  return build_scheduled(spec, target, schedule);
}

static KernelPipeline build_scheduled(const graph::KernelSpec& spec, const Halide::Target& target,
                                      const std::string& schedule) {
  const std::vector<graph::TensorDesc> args = graph::generated_kernel_arguments(spec);
  const std::string& name = graph::kernel_name(spec);
  for (const graph::TensorDesc& t : args) check_sizes(t, name);
  if (const auto* conv = std::get_if<graph::ConvKernelSpec>(&spec))
    return conv_pipeline(*conv, target, schedule.empty() ? conv->schedule : schedule);
  if (const auto* layout = std::get_if<graph::LayoutKernelSpec>(&spec))
    return layout_pipeline(*layout, target);
  const auto& op_spec = std::get<graph::OpKernelSpec>(spec);
  const graph::Op& kind = op_spec.op;
  const bool nhwc_image = op_spec.inputs[0].layout == graph::Layout::nhwc;
  if (is_conv_matmul(op_spec)) return matmul_pipeline(op_spec, target, schedule);
  if (!schedule.empty())
    throw graph::Error("kernel '" + name + "' has no schedule knobs; '" + schedule +
                       "' does not apply");
  if (std::holds_alternative<graph::Pool2d>(kind) ||
      (std::holds_alternative<graph::GlobalPool>(kind) && nhwc_image))
    return pool_pipeline(op_spec, target);
  std::vector<Halide::ImageParam> inputs;
  for (size_t i = 0; i + 1 < args.size(); ++i)
    inputs.push_back(dense_input(args[i], static_cast<int>(i)));
  if (std::holds_alternative<graph::MatMul>(kind) || std::holds_alternative<graph::Gemm>(kind))
    return product_pipeline(op_spec, target, inputs);
  if (std::holds_alternative<graph::Softmax>(kind) ||
      std::holds_alternative<graph::Reduce>(kind) ||
      std::holds_alternative<graph::GlobalPool>(kind))
    return reduction_pipeline(op_spec, target, inputs);
  if (std::holds_alternative<graph::LayerNorm>(kind))
    return layer_norm_pipeline(op_spec, target, inputs);
  if (!std::holds_alternative<graph::ElementwiseChain>(kind) &&
      !std::holds_alternative<graph::Binary>(kind) && !std::holds_alternative<graph::Where>(kind))
    return data_pipeline(op_spec, target, inputs);
  const graph::TensorDesc& out_desc = args.back();

  Algorithm a;
  if (const auto* chain = std::get_if<graph::ElementwiseChain>(&kind)) {
    a = chain_algorithm(*chain, out_desc, inputs);
  } else if (std::holds_alternative<graph::Where>(kind)) {
    a = where_algorithm(args, inputs);
  } else {
    a = binary_algorithm(std::get<graph::Binary>(kind), args, inputs);
  }
  schedule_elementwise(elementwise_funcs(a.out, out_desc.shape, a.keep_innermost), target);
  constrain([&](int d) { return a.out.output_buffer().dim(d); }, out_desc.shape);
  return KernelPipeline{Halide::Pipeline(a.out), inputs};
}

}  // namespace kiln::codegen
