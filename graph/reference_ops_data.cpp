// Reference semantics of the elementwise and data-movement ops.
#include <algorithm>
#include <cmath>

#include "graph/op_kind.h"
#include "graph/reference_ops.h"
#include "graph/shape_inference.h"

namespace kiln::graph {

Tensor reference_data_op(const Op& op, const std::vector<const Tensor*>& in,
                         const Shape& /*out_shape*/, Layout /*out_layout*/) {
  if (const std::optional<Activation> act = as_activation(op)) {
    Tensor out = *in[0];
    for (float& f : out.data) f = std::min(std::max(f, act->lo), act->hi);
    return out;
  }
  if (const auto* t = std::get_if<LayoutTransform>(&op)) return to_layout(*in[0], t->to);
  throw Error(std::string("reference: no implementation of ") + op_name(op) + " yet");
}

}  // namespace kiln::graph
