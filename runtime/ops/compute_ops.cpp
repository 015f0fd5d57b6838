// Portable compute kernels (see ops_internal.h).
#include "runtime/ops/ops_internal.h"

namespace kiln::runtime::ops {

bool is_compute(const graph::Op& /*op*/) { return false; }

std::string run_compute(const graph::Op& op, const std::vector<ConstTensorRef>& /*inputs*/,
                     const TensorRef& /*output*/) {
  return std::string("no portable kernel for ") + graph::op_name(op);
}

}  // namespace kiln::runtime::ops
