// Building a generated kernel's pipeline from its spec.
#include "codegen/kernel_pipeline.h"

#include "generators/ops/elementwise.h"
#include "schedules/elementwise_schedule.h"

namespace kiln::codegen {
namespace {

// Halide dimension d is row-major axis rank - 1 - d: extents and dense strides, innermost first.
struct DenseDims {
  std::vector<int64_t> extents, strides;
};

DenseDims dense_dims(const graph::Shape& shape) {
  DenseDims dd;
  int64_t stride = 1;
  for (auto it = shape.rbegin(); it != shape.rend(); ++it) {
    dd.extents.push_back(*it);
    dd.strides.push_back(stride);
    stride *= *it;
  }
  return dd;
}

template <typename Dims>
void constrain(Dims&& dim_of, const graph::Shape& shape) {
  const DenseDims dd = dense_dims(shape);
  for (size_t d = 0; d < dd.extents.size(); ++d)
    dim_of(static_cast<int>(d))
        .set_bounds(0, static_cast<int>(dd.extents[d]))
        .set_stride(static_cast<int>(dd.strides[d]));
}

Halide::ImageParam dense_input(const graph::TensorDesc& t, int index) {
  Halide::ImageParam p(Halide::Float(32), static_cast<int>(t.shape.size()),
                       "arg" + std::to_string(index));
  constrain([&](int d) { return p.dim(d); }, t.shape);
  return p;
}

void check_sizes(const graph::TensorDesc& t, const std::string& kernel) {
  for (int64_t e : t.shape)
    if (e <= 0 || e > (int64_t{1} << 31) - 1 || graph::num_elements(t.shape) > (int64_t{1} << 31) - 1)
      throw graph::Error("kernel '" + kernel + "': tensor '" + t.name + "' of shape " +
                         graph::to_string(t.shape) +
                         " is outside what the generated kernels index (2^31 - 1 elements)");
}

}  // namespace

KernelPipeline build_kernel_pipeline(const graph::KernelSpec& spec, const Halide::Target& target) {
  const std::vector<graph::TensorDesc> args = graph::generated_kernel_arguments(spec);
  const std::string& name = graph::kernel_name(spec);
  for (const graph::TensorDesc& t : args) check_sizes(t, name);
  std::vector<Halide::ImageParam> inputs;
  for (size_t i = 0; i + 1 < args.size(); ++i) inputs.push_back(dense_input(args[i], static_cast<int>(i)));
  const graph::TensorDesc& out_desc = args.back();
  const int rank = static_cast<int>(out_desc.shape.size());

  const auto& op = std::get<graph::OpKernelSpec>(spec).op;
  const auto& chain = std::get<graph::ElementwiseChain>(op);
  bool has_affine = false;
  for (const graph::ChainStep& s : chain.steps) has_affine |= s.kind == graph::ChainStepKind::affine;
  // The channel axis of the chain's per-channel steps (graph/shape_inference.cpp): 3 for NHWC,
  // else 1; in Halide's innermost-first order that is rank - 1 - axis.
  const int channel_dim =
      has_affine ? rank - 1 - (out_desc.layout == graph::Layout::nhwc ? 3 : 1) : -1;
  std::vector<Halide::Func> params(inputs.begin() + 1, inputs.end());
  Halide::Func out = generators::ops::elementwise_chain(inputs[0], rank, chain.steps, params,
                                                        std::max(channel_dim, 0));

  schedules::ElementwiseFuncs f{out, {}, dense_dims(out_desc.shape).extents, channel_dim};
  for (const Halide::Var& v : out.args()) f.dims.push_back(v);
  if (target.has_gpu_feature()) {
    schedules::schedule_elementwise_gpu(f, target);
  } else {
    schedules::schedule_elementwise_cpu(f, target);
  }
  constrain([&](int d) { return out.output_buffer().dim(d); }, out_desc.shape);

  return KernelPipeline{Halide::Pipeline(out), inputs};
}

}  // namespace kiln::codegen
