// Dispatch of the portable kernels.
#include "runtime/ops/ops.h"

#include "graph/reference.h"
#include "runtime/ops/ops_internal.h"

namespace kiln::runtime::ops {

bool supported(const graph::Op& op) {
  return is_compute(op) || is_data(op);
}

std::string run_op(const graph::Op& op, const std::vector<ConstTensorRef>& inputs,
                   const TensorRef& output) {
  if (!output.data) return "output buffer is null";
  if (static_cast<int64_t>(output.shape.size()) > 0 && graph::num_elements(output.shape) <= 0)
    return "output has no elements";
  for (const ConstTensorRef& in : inputs)
    if (!in.data) return "an input buffer is null";
  if (is_compute(op)) return run_compute(op, inputs, output);
  if (is_data(op)) return run_data(op, inputs, output);
  return std::string("no portable kernel for ") + graph::op_name(op);
}

}  // namespace kiln::runtime::ops
