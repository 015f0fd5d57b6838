// Op kinds for fusion.
#include "graph/op_kind.h"

namespace kiln::graph {

OpKind op_kind(const Op& op) {
  if (std::holds_alternative<Conv2d>(op)) return OpKind::output_fusable;
  // BatchNorm is a per-channel scale and shift; fold_batch_norm folds it into a producing conv
  // before fusion runs, and what is left fuses like any elementwise op.
  if (std::holds_alternative<BatchNorm>(op) || std::holds_alternative<Relu>(op) ||
      std::holds_alternative<Clip>(op) || std::holds_alternative<LeakyRelu>(op) ||
      std::holds_alternative<Sigmoid>(op) || std::holds_alternative<HardSigmoid>(op) ||
      std::holds_alternative<HardSwish>(op) || std::holds_alternative<Binary>(op) ||
      std::holds_alternative<ElementwiseChain>(op) || std::holds_alternative<Where>(op))
    return OpKind::elementwise;
  if (std::holds_alternative<Reshape>(op) || std::holds_alternative<Transpose>(op) ||
      std::holds_alternative<Concat>(op) || std::holds_alternative<Slice>(op) ||
      std::holds_alternative<Pad>(op) || std::holds_alternative<LayoutTransform>(op) ||
      std::holds_alternative<Tile>(op))
    return OpKind::injective;
  return OpKind::opaque;  // pooling, Gemm, MatMul, Softmax, Reduce
}

std::optional<Activation> as_activation(const Op& op) {
  if (std::holds_alternative<Relu>(op)) return Activation{0.0f, Activation{}.hi};
  if (const auto* c = std::get_if<Clip>(&op)) return Activation{c->min, c->max};
  return std::nullopt;
}

}  // namespace kiln::graph
