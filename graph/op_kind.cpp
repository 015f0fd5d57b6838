// Op kinds for fusion.
#include "graph/op_kind.h"

namespace kiln::graph {

OpKind op_kind(const Op& op) {
  struct Visitor {
    OpKind operator()(const Conv2d&) { return OpKind::output_fusable; }
    // Per-channel scale and shift; folded into a producing conv before fusion runs.
    OpKind operator()(const BatchNorm&) { return OpKind::elementwise; }
    OpKind operator()(const Relu&) { return OpKind::elementwise; }
    OpKind operator()(const Clip&) { return OpKind::elementwise; }
    OpKind operator()(const LayoutTransform&) { return OpKind::injective; }
  };
  return std::visit(Visitor{}, op);
}

std::optional<Activation> as_activation(const Op& op) {
  if (std::holds_alternative<Relu>(op)) return Activation{0.0f, Activation{}.hi};
  if (const auto* c = std::get_if<Clip>(&op)) return Activation{c->min, c->max};
  return std::nullopt;
}

}  // namespace kiln::graph
