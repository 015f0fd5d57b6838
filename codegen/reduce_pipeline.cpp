// The pipelines of the reductions: Reduce (every kind), the Softmax family, global average
// pooling of an NCHW tensor (a mean over H and W), and TopK.
#include <algorithm>

#include "codegen/pipeline_parts.h"
#include "generators/ops/reduce.h"
#include "schedules/tensor_schedule.h"

namespace kiln::codegen {

KernelPipeline reduction_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                                  const std::vector<Halide::ImageParam>& inputs) {
  const graph::Shape& in = k.inputs[0].shape;
  const int last = static_cast<int>(in.size()) - 1;
  generators::ops::ReductionAlgorithm a;
  // Whether the partial results are as wide as the output in its innermost dimension (the
  // reduced axes leave the innermost one), so they can be computed in vectors along it.
  bool vectorize_inner = true;
  bool rows_in_vectors = false;  // a Softmax along the innermost axis alone
  int64_t lane_sum = 0;          // see schedules::schedule_reduction_cpu
  int64_t band_sum = 0;          // likewise
  bool long_rows = false;        // see schedules::schedule_softmax_rows_cpu
  if (const auto* sm = std::get_if<graph::Softmax>(&k.op)) {
    a = generators::ops::softmax(inputs[0], in, *sm);
    vectorize_inner = sm->axis != last && !sm->coerce_2d;
    rows_in_vectors = sm->axis == last;
    long_rows = sm->axis == last && sm->kind != graph::SoftmaxKind::hardmax &&
                in[static_cast<size_t>(last)] >= schedules::kMinSoftmaxRow;
  } else {
    graph::Reduce r;
    if (const auto* rm = std::get_if<graph::Reduce>(&k.op)) {
      r = *rm;
    } else {
      r.axes = {2, 3};  // GlobalPool (avg) of NCHW
    }
    a = generators::ops::reduce(inputs[0], in, r, k.output.shape);
    vectorize_inner = !r.axes.empty() && r.axes.back() != last && !k.output.shape.empty();
    // A sum along the innermost axis (and others), a vector or more of it, 4 or more per result.
    using K = graph::ReduceKind;
    const bool sum = r.kind == K::mean || r.kind == K::sum || r.kind == K::l1 || r.kind == K::l2 ||
                     r.kind == K::log_sum || r.kind == K::sum_square;
    int64_t per_result = 1;
    for (size_t d = 0; d < in.size(); ++d)
      if (r.axes.empty() ||
          std::find(r.axes.begin(), r.axes.end(), static_cast<int>(d)) != r.axes.end())
        per_result *= in[d];
    if (sum && !r.axes.empty() && r.axes.back() == last && !k.output.shape.empty() &&
        in[static_cast<size_t>(last)] >= target.natural_vector_size<float>() &&
        per_result >= 4 * target.natural_vector_size<float>())
      lane_sum = per_result;
    // A sum of many elements per result whose results are one row of the innermost axis (a
    // norm over H and W of an NHWC image): in parallel bands of the reduction instead.
    const int64_t results = graph::num_elements(k.output.shape);
    const int64_t inner = k.output.shape.empty() ? 1 : k.output.shape.back();
    if (sum && vectorize_inner && results == inner &&
        inner >= target.natural_vector_size<float>() && per_result >= 64)
      band_sum = in[static_cast<size_t>(r.axes.front())];  // the outermost reduced axis
  }
  const schedules::ElementwiseFuncs f = elementwise_funcs(a.out, k.output.shape, false);
  if (target.has_gpu_feature()) {
    schedules::schedule_reduction_gpu(f, a.partials, target);
  } else if (long_rows) {
    schedules::schedule_softmax_rows_cpu(f, a.partials, a.exps, target);
  } else {
    schedules::schedule_reduction_cpu(f, a.partials, vectorize_inner, target, rows_in_vectors,
                                      lane_sum, band_sum);
  }
  constrain([&](int d) { return a.out.output_buffer().dim(d); }, k.output.shape);
  return KernelPipeline{Halide::Pipeline(a.out), inputs};
}

KernelPipeline topk_pipeline(const graph::OpKernelSpec& k, const Halide::Target& target,
                             const std::vector<Halide::ImageParam>& inputs) {
  generators::ops::TopKAlgorithm a =
      generators::ops::topk(inputs[0], k.inputs[0].shape, std::get<graph::TopK>(k.op));
  a.order.compute_root();
  // The rows are read along the axis: the dimensions are never fused.
  schedule_elementwise(elementwise_funcs(a.order, k.inputs[0].shape, true), target);
  schedule_elementwise(elementwise_funcs(a.out, k.output.shape, true), target);
  constrain([&](int d) { return a.out.output_buffer().dim(d); }, k.output.shape);
  return KernelPipeline{Halide::Pipeline(a.out), inputs};
}

}  // namespace kiln::codegen
