// Building a generated kernel's pipeline from its spec.
#include "codegen/kernel_pipeline.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>

#include "codegen_config.h"

#include "codegen/pipeline_parts.h"
#include "generators/ops/elementwise.h"
#include "generators/ops/layout.h"
#include "generators/ops/norm.h"
#include "generators/ops/pool.h"
#include "generators/ops/resize.h"
#include "generators/ops/tensor.h"
#include "runtime/conv_weights.h"
#include "schedules/conv_params.h"
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
  for (const graph::ChainStep& s : chain.steps) has_affine |= graph::per_channel_step(s.kind);
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

// The target a kernel's schedule is chosen for: conv_schedule_target's for a convolution, the
// kernel's own for the rest.
Halide::Target schedule_target(const graph::KernelSpec& spec, const Halide::Target& target) {
  const auto* c = std::get_if<graph::ConvKernelSpec>(&spec);
  return c ? conv_schedule_target(*c, target) : target;
}

// The knob-bearing shape of a kernel, if it has one.
std::optional<schedules::ConvShape> tunable_shape(const graph::KernelSpec& spec,
                                                  const Halide::Target& target) {
  if (const auto* c = std::get_if<graph::ConvKernelSpec>(&spec)) return conv_shape(*c, target);
  if (const auto* o = std::get_if<graph::OpKernelSpec>(&spec))
    if (is_conv_matmul(*o)) return matmul_shape(*o);
  return std::nullopt;
}

// Pooling of an NHWC tensor (graph::is_generated only takes those).
KernelPipeline pool_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target) {
  const Halide::ImageParam input = input_param(k.inputs[0], 0);
  const graph::Shape& in = k.inputs[0].shape;  // NHWC
  const graph::Shape& out = k.output.shape;    // NHWC
  const int in_w = static_cast<int>(in[2]), in_h = static_cast<int>(in[1]);
  const generators::ops::PoolAlgorithm a =
      std::holds_alternative<graph::Pool2d>(k.op)
          ? generators::ops::pool2d(input, in_w, in_h, std::get<graph::Pool2d>(k.op))
          : generators::ops::global_pool(input, in_w, in_h, std::get<graph::GlobalPool>(k.op).kind);
  // Written in place into a Concat's output (graph/memory_plan.cpp): at that tensor's strides.
  constrain([&](int d) { return a.out.output_buffer().dim(d); }, k.output);
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
  const Halide::ImageParam input = input_param(k.input, 0);
  const schedules::LayoutFuncs f = generators::ops::nchw_to_nhwc(input);
  constrain([&](int d) { return f.output.output_buffer().dim(d); }, k.output.shape);
  if (target.has_gpu_feature()) {
    schedules::schedule_layout_cuda(f, target);
  } else {
    schedules::schedule_layout_cpu(f, target);
  }
  return KernelPipeline{Halide::Pipeline(f.output), {input}};
}

// Data movement (and Resize, GridSample): the output a pure function of its coordinates, read from
// other places of the input (so the innermost dimension is kept: fusing it would not make the loads
// contiguous).
KernelPipeline data_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                             const std::vector<Halide::ImageParam>& inputs) {
  const graph::Shape& in = k.inputs[0].shape;
  Halide::Func out;
  if (const auto* t = std::get_if<graph::Transpose>(&k.op)) {
    // A copy of the input for the CPU schedule to stage at each tile (inlined otherwise).
    const int rank = static_cast<int>(in.size());
    std::vector<Halide::Var> v;
    for (int j = 0; j < rank; ++j) v.emplace_back("s" + std::to_string(j));
    Halide::Func staged("staged");
    staged(v) = inputs[0](v);
    out = generators::ops::transpose(staged, in, t->perm);
    if (!target.has_gpu_feature() && rank >= 2) {
      std::vector<int64_t> extents;  // the output's, innermost first
      for (int j = 0; j < rank; ++j)
        extents.push_back(k.output.shape[static_cast<size_t>(rank - 1 - j)]);
      const int a =
          static_cast<int>(std::find(t->perm.begin(), t->perm.end(), rank - 1) - t->perm.begin());
      const int q = rank - 1 - a;               // the output dim of the input's innermost
      const int p = rank - 1 - t->perm.back();  // the input dim of the output's innermost
      if (schedules::schedule_transpose_cpu(out, staged, extents, q, p, target)) {
        constrain([&](int d) { return out.output_buffer().dim(d); }, k.output.shape);
        return KernelPipeline{Halide::Pipeline(out), inputs};
      }
    }
  } else if (const auto* lt = std::get_if<graph::LayoutTransform>(&k.op)) {
    // NCHW <-> NHWC of a 4-D tensor (the NCHW -> NHWC one is a LayoutKernelSpec).
    const std::vector<int> perm = lt->to == graph::Layout::nchw ? std::vector<int>{0, 3, 1, 2}
                                                                : std::vector<int>{0, 2, 3, 1};
    out = generators::ops::transpose(inputs[0], in, perm);
    if (lt->to == graph::Layout::nchw && !target.has_gpu_feature()) {
      schedules::schedule_to_nchw_cpu(out, target);
      constrain([&](int d) { return out.output_buffer().dim(d); }, k.output.shape);
      return KernelPipeline{Halide::Pipeline(out), inputs};
    }
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
    schedule_resize(a, k.output.shape, target);
    constrain([&](int d) { return a.out.output_buffer().dim(d); }, k.output.shape);
    return KernelPipeline{Halide::Pipeline(a.out), inputs};
  } else if (const auto* gs = std::get_if<graph::GridSample>(&k.op)) {
    const generators::ops::GridSampleAlgorithm a =
        generators::ops::grid_sample(inputs[0], inputs[1], in, *gs);
    // Each point's coordinates once, ahead, not once per channel.
    Halide::Func point = a.point;
    point.compute_root();
    const graph::Shape& o = k.output.shape;  // [N, C, Ho, Wo]
    schedule_elementwise(elementwise_funcs(point, {o[0], o[2], o[3]}, true), target);
    out = a.out;
  } else if (std::holds_alternative<graph::Tile>(k.op)) {
    out = generators::ops::tile(inputs[0], in);
  } else if (const auto* ge = std::get_if<graph::GatherElements>(&k.op)) {
    out = generators::ops::gather_elements(inputs[0], in, inputs[1], k.inputs[1].shape, ge->axis);
  } else {
    out = generators::ops::pad(inputs[0], in, std::get<graph::Pad>(k.op));
  }
  schedule_elementwise(elementwise_funcs(out, k.output.shape, true), target);
  constrain([&](int d) { return out.output_buffer().dim(d); }, k.output.shape);
  return KernelPipeline{Halide::Pipeline(out), inputs};
}

// ScatterElements: the copy of the data elementwise, then the updates one after another (in
// order: two may hit one element), on GPUs by a single thread.
KernelPipeline scatter_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                                const std::vector<Halide::ImageParam>& inputs) {
  Halide::Func out =
      generators::ops::scatter_elements(inputs[0], k.inputs[0].shape, inputs[1], k.inputs[1].shape,
                                        inputs[2], std::get<graph::ScatterElements>(k.op));
  schedule_elementwise(elementwise_funcs(out, k.output.shape, true), target);
  if (target.has_gpu_feature()) {
    out.update().gpu_single_thread();
  } else {
    out.update().unscheduled();
  }
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

// GroupNorm: the per-channel sums over the pixels, the group statistics from them, then the
// normalized image with its residual and post steps.
KernelPipeline group_norm_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                                   const std::vector<Halide::ImageParam>& inputs) {
  const bool nhwc = k.inputs[0].layout == graph::Layout::nhwc;
  const generators::ops::GroupNormAlgorithm a =
      generators::ops::group_norm(std::vector<Halide::Func>(inputs.begin(), inputs.end()),
                                  k.inputs[0].shape, nhwc, std::get<graph::GroupNorm>(k.op));
  const schedules::GroupNormFuncs f{a.out,
                                    a.channel_sum,
                                    a.channel_square_sum,
                                    {a.mean, a.inv_std, a.channel_mean, a.channel_factor},
                                    dense_dims(k.output.shape).extents,
                                    nhwc};
  if (target.has_gpu_feature()) {
    schedules::schedule_group_norm_gpu(f, target);
  } else {
    schedules::schedule_group_norm_cpu(f, target);
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
  // B read in place at strides whose rows are not one dense run (graph/memory_plan.h): staged.
  const graph::TensorDesc& bd = k.inputs[1];
  const bool b_rows_apart =
      bd.strides.size() >= 2 && bd.strides[bd.strides.size() - 2] != bd.shape.back();
  const schedules::MatMulFuncs f{
      out,       alg.acc,           alg.n,       alg.m, alg.batch,          alg.k,
      so.back(), so[so.size() - 2], batch_count, b,     b_rows_apart && !tb};
  if (target.has_gpu_feature()) {
    schedules::schedule_matmul_gpu(f, target);
  } else {
    schedules::schedule_matmul_cpu(f, target);
  }
  constrain([&](int d) { return out.output_buffer().dim(d); }, so);
  return KernelPipeline{Halide::Pipeline(out), inputs};
}

}  // namespace

void schedule_resize(const generators::ops::ResizeAlgorithm& a, const graph::Shape& out_shape,
                     const Halide::Target& target) {
  // The innermost axis' pass with repeating taps gets its own CPU schedule; elsewhere (and on
  // GPUs, `padded` then inline) the elementwise one.
  auto schedule_pass = [&](const Halide::Func& pass, const graph::Shape& shape) {
    const schedules::ElementwiseFuncs f = elementwise_funcs(pass, shape, true);
    if (a.period > 0 && pass.name() == a.innermost.name() && !target.has_gpu_feature()) {
      schedules::schedule_periodic_resize_cpu(f, a.padded, a.period, target);
    } else {
      schedule_elementwise(f, target);
    }
  };
  for (size_t i = 0; i < a.passes.size(); ++i) {  // each one-axis pass ahead, whole
    Halide::Func pass = a.passes[i];
    pass.compute_root();
    schedule_pass(pass, a.pass_shapes[i]);
  }
  schedule_pass(a.out, out_shape);
}

std::string default_schedule(const graph::KernelSpec& spec, const Halide::Target& kernel_target) {
  const Halide::Target target = schedule_target(spec, kernel_target);
  const std::optional<schedules::ConvShape> s = tunable_shape(spec, target);
  if (!s || target.has_gpu_feature()) return "";
  return schedules::to_string(schedules::default_conv_params(*s, target));
}

std::string half_width_schedule(const graph::KernelSpec& spec,
                                const Halide::Target& kernel_target) {
  // Convolutions only: MatMuls run as 1x1 convolutions take the same knobs, but no test runs
  // them at half width.
  if (!std::holds_alternative<graph::ConvKernelSpec>(spec)) return "";
  const Halide::Target target = schedule_target(spec, kernel_target);
  const std::optional<schedules::ConvShape> s = tunable_shape(spec, target);
  if (!s || target.has_gpu_feature()) return "";
  const std::optional<schedules::ConvParams> p = schedules::half_width_params(*s, target);
  return p ? schedules::to_string(*p) : "";
}

std::vector<std::string> schedule_candidates(const graph::KernelSpec& spec,
                                             const Halide::Target& kernel_target, int threads,
                                             size_t limit) {
  const Halide::Target target = schedule_target(spec, kernel_target);
  const std::optional<schedules::ConvShape> s = tunable_shape(spec, target);
  if (!s || target.has_gpu_feature()) return {};
  std::vector<std::string> out;
  for (const schedules::ConvParams& p : schedules::conv_candidates(*s, target, threads, limit))
    out.push_back(schedules::to_string(p));
  return out;
}

std::vector<std::string> schedule_neighbors(const graph::KernelSpec& spec,
                                            const Halide::Target& kernel_target, int threads,
                                            const std::string& schedule) {
  const Halide::Target target = schedule_target(spec, kernel_target);
  const std::optional<schedules::ConvShape> s = tunable_shape(spec, target);
  if (!s || target.has_gpu_feature() || is_autoscheduler(schedule)) return {};
  const schedules::ConvParams p = conv_params(graph::kernel_name(spec), *s, schedule, target);
  std::vector<std::string> out;
  for (const schedules::ConvParams& q : schedules::conv_neighbors(p, *s, target, threads))
    out.push_back(schedules::to_string(q));
  return out;
}

std::string resolve_schedule(const graph::KernelSpec& spec, const Halide::Target& kernel_target,
                             const std::string& schedule) {
  const Halide::Target target = schedule_target(spec, kernel_target);
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

int winograd_weight_tile(const graph::KernelSpec& spec, const Halide::Target& kernel_target,
                         const std::string& schedule) {
  const Halide::Target target = schedule_target(spec, kernel_target);
  const std::optional<schedules::ConvShape> s = tunable_shape(spec, target);
  const auto* conv = std::get_if<graph::ConvKernelSpec>(&spec);
  if (!s || !conv || is_autoscheduler(schedule)) return 0;
  const schedules::ConvParams p = conv_params(conv->name, *s, schedule, target);
  return p.family == schedules::ConvFamily::winograd ? p.tile : 0;
}

std::string schedule_for_weight_tile(const graph::KernelSpec& spec,
                                     const Halide::Target& kernel_target,
                                     const std::string& schedule, int tile) {
  const Halide::Target target = schedule_target(spec, kernel_target);
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
    inputs.push_back(input_param(args[i], static_cast<int>(i)));
  if (std::holds_alternative<graph::MatMul>(kind) || std::holds_alternative<graph::Gemm>(kind))
    return product_pipeline(op_spec, target, inputs);
  if (std::holds_alternative<graph::Softmax>(kind) ||
      std::holds_alternative<graph::Reduce>(kind) ||
      std::holds_alternative<graph::GlobalPool>(kind))
    return reduction_pipeline(op_spec, target, inputs);
  if (std::holds_alternative<graph::TopK>(kind)) return topk_pipeline(op_spec, target, inputs);
  if (std::holds_alternative<graph::ScatterElements>(kind))
    return scatter_pipeline(op_spec, target, inputs);
  if (std::holds_alternative<graph::LayerNorm>(kind))
    return layer_norm_pipeline(op_spec, target, inputs);
  if (std::holds_alternative<graph::GroupNorm>(kind))
    return group_norm_pipeline(op_spec, target, inputs);
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
  // An input read at a larger tensor's strides is contiguous along its innermost axis only:
  // fusing the dimensions would make its loads gathers.
  for (size_t i = 0; i + 1 < args.size(); ++i) a.keep_innermost |= !args[i].strides.empty();
  schedule_elementwise(elementwise_funcs(a.out, out_desc.shape, a.keep_innermost), target);
  constrain([&](int d) { return a.out.output_buffer().dim(d); }, out_desc.shape);
  return KernelPipeline{Halide::Pipeline(a.out), inputs};
}

}  // namespace kiln::codegen
