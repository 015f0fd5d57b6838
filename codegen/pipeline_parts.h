// What the builders of generated kernels' pipelines share (kernel_pipeline.cpp and the op
// families built in files of their own: conv_pipeline.cpp with conv_schedule_choice.cpp,
// reduce_pipeline.cpp): dense shapes
// as Halide dimensions, inputs with fixed shapes and strides, the elementwise schedule's view
// of an output, and the convolution entry points. Internal to codegen/.
#pragma once

#include <string>
#include <vector>

#include "Halide.h"
#include "codegen/kernel_pipeline.h"
#include "generators/ops/resize.h"
#include "graph/kernel_spec.h"
#include "schedules/conv_params.h"
#include "schedules/elementwise_schedule.h"

namespace kiln::codegen {

// Halide dimension d is row-major axis rank - 1 - d: extents and dense strides, innermost first.
struct DenseDims {
  std::vector<int64_t> extents, strides;
};

inline DenseDims dense_dims(const graph::Shape& shape) {
  DenseDims dd;
  int64_t stride = 1;
  for (auto it = shape.rbegin(); it != shape.rend(); ++it) {
    dd.extents.push_back(*it);
    dd.strides.push_back(stride);
    stride *= *it;
  }
  return dd;
}

// Fixes every dimension dim_of(d) returns to the dense row-major layout of `shape`.
template <typename Dims>
void constrain(Dims&& dim_of, const graph::Shape& shape) {
  const DenseDims dd = dense_dims(shape);
  for (size_t d = 0; d < dd.extents.size(); ++d)
    dim_of(static_cast<int>(d))
        .set_bounds(0, static_cast<int>(dd.extents[d]))
        .set_stride(static_cast<int>(dd.strides[d]));
}

// Fixes every dimension dim_of(d) returns to `t`'s constant shape at its constant strides
// (dense, or those of the larger tensor it is a slice of: TensorDesc::strides).
template <typename Dims>
void constrain(Dims&& dim_of, const graph::TensorDesc& t) {
  constrain(dim_of, t.shape);
  const size_t rank = t.strides.size();
  for (size_t d = 0; d < rank; ++d)
    dim_of(static_cast<int>(d)).set_stride(static_cast<int>(t.strides[rank - 1 - d]));
}

// Argument `index` of a kernel: the tensor `t` (constrain).
inline Halide::ImageParam input_param(const graph::TensorDesc& t, int index) {
  Halide::ImageParam p(Halide::Float(32), static_cast<int>(t.shape.size()),
                       "arg" + std::to_string(index));
  constrain([&](int d) { return p.dim(d); }, t);
  return p;
}

// The elementwise schedule's view of an output Func over a dense tensor of `shape`.
inline schedules::ElementwiseFuncs elementwise_funcs(const Halide::Func& out,
                                                     const graph::Shape& shape,
                                                     bool keep_innermost) {
  schedules::ElementwiseFuncs f{out, {}, dense_dims(shape).extents, keep_innermost};
  for (const Halide::Var& v : out.args()) f.dims.push_back(v);
  return f;
}

inline void schedule_elementwise(const schedules::ElementwiseFuncs& f,
                                 const Halide::Target& target) {
  if (target.has_gpu_feature()) {
    schedules::schedule_elementwise_gpu(f, target);
  } else {
    schedules::schedule_elementwise_cpu(f, target);
  }
}

// A Resize's schedule (generators/ops/resize.h) for an output of row-major shape `out_shape`:
// each one-axis pass computed whole, ahead; the innermost axis' pass with repeating taps with
// the periodic CPU schedule, every other pass (and all of them on GPUs) elementwise. Also the
// resize a convolution's kernel ends with (ConvKernelSpec::resize).
void schedule_resize(const generators::ops::ResizeAlgorithm& a, const graph::Shape& out_shape,
                     const Halide::Target& target);

// "auto:NAME": the pipeline left unscheduled for Halide's autoscheduler NAME.
constexpr const char* kAutoPrefix = "auto:";
inline bool is_autoscheduler(const std::string& schedule) {
  return schedule.rfind(kAutoPrefix, 0) == 0;
}

// Convolutions (conv_schedule_choice.cpp, then conv_pipeline.cpp). What the convolution
// schedules are chosen for, of a dense
// or grouped ConvKernelSpec (`merge` groups per block, runtime/conv_weights.h) or of a MatMul
// run as a 1x1 convolution.
schedules::ConvShape conv_shape(const graph::ConvKernelSpec& k, const Halide::Target& target);
// The target whose vectors a convolution's schedule is chosen for and built with: `target`, but
// for a grouped convolution whose groups are two or more 8-channel vectors and not whole 16-channel
// ones (RegNet's 24 or 56 channels) on an AVX-512 target, the same target without AVX-512: 8-lane
// vectors, each within one group (the dense schedules' broadcast inputs), where 16 lanes would span
// two groups and gather. The kernel is still compiled for `target`.
Halide::Target conv_schedule_target(const graph::ConvKernelSpec& k, const Halide::Target& target);
// Whether a direct kernel of `k` for `target` reads its weights blocked by 16 output channels
// (runtime::blocks_conv_weights, on CPU targets; Winograd kernels read transformed weights).
bool conv_weights_blocked(const graph::ConvKernelSpec& k, const Halide::Target& target);
schedules::ConvShape matmul_shape(const graph::OpKernelSpec& k);
// A MatMul of a 4-D tensor by a matrix: run as a 1x1 convolution (matmul_pipeline).
bool is_conv_matmul(const graph::OpKernelSpec& k);
// The parameters a convolution is generated with: `text` (resolved by codegen: a tuned
// record, or the spec's own ConvKernelSpec::schedule) read over the default, or the default.
schedules::ConvParams conv_params(const std::string& kernel, const schedules::ConvShape& shape,
                                  const std::string& text, const Halide::Target& target);
// A generated convolution with its epilogue and the schedule `schedule` names.
KernelPipeline conv_pipeline(const graph::ConvKernelSpec& k, const Halide::Target& target,
                             const std::string& schedule);
// [N, H, W, K] x [K, M] as the 1x1 convolution it is.
KernelPipeline matmul_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                               const std::string& schedule);

// Reduce (every kind), Softmax (every kind) and global average pooling of an NCHW tensor
// (reduce_pipeline.cpp). `inputs`: the dense inputs, in argument order.
KernelPipeline reduction_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                                  const std::vector<Halide::ImageParam>& inputs);

// TopK (reduce_pipeline.cpp): every element's place in its row computed ahead, then the output,
// both elementwise.
KernelPipeline topk_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                             const std::vector<Halide::ImageParam>& inputs);

}  // namespace kiln::codegen
