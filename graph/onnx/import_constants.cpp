// ONNX import, what is computed or dropped once the nodes are converted: a tensor the graph
// computes from constants alone, evaluated where an op needs a constant, and the nodes whose
// results nothing reads.
#include <algorithm>

#include "graph/onnx/importer.h"
#include "graph/reference.h"

namespace kiln::graph::onnx {

// Nodes whose results nothing reads: the arithmetic on constants that evaluate_constant
// folded for the node that needed a constant, and branches of the model that lead nowhere.
void Importer::drop_unused_nodes() {
  std::vector<bool> read(g_.values().size(), false), erased(g_.num_nodes(), true);
  for (ValueId v : g_.outputs) read[v.index] = true;
  for (size_t k = g_.num_nodes(); k-- > 0;) {
    const Node& n = g_.node(NodeId{static_cast<uint32_t>(k)});
    if (std::none_of(n.outputs.begin(), n.outputs.end(), [&](ValueId v) { return read[v.index]; }))
      continue;
    erased[k] = false;
    for (ValueId in : n.inputs) read[in.index] = true;
  }
  if (std::find(erased.begin(), erased.end(), true) != erased.end()) g_.rebuild(g_.nodes(), erased);
}

namespace {

// The nodes computing `v` from constants alone, in graph order; empty where a graph input feeds
// them, where one of them costs more than a pass over its tensors (a convolution or a matrix
// product), or where they exceed the import-time folding budget: kMaxConeNodes nodes, each
// result within kMaxFoldElements, all of them within `budget` elements (`elements` returns
// how many).
constexpr size_t kMaxConeNodes = 64;
std::vector<NodeId> constant_cone(const Graph& g, ValueId v, int64_t budget, int64_t& elements) {
  std::vector<bool> in_cone(g.num_nodes(), false);
  std::vector<ValueId> pending{v};
  size_t count = 0;
  elements = 0;
  while (!pending.empty()) {
    const Value& value = g.value(pending.back());
    pending.pop_back();
    if (value.is_constant()) continue;
    if (!value.producer.valid()) return {};  // a graph input
    if (in_cone[value.producer.index]) continue;
    const Node& n = g.node(value.producer);
    if (std::holds_alternative<Conv2d>(n.op) || std::holds_alternative<Gemm>(n.op) ||
        std::holds_alternative<MatMul>(n.op))
      return {};
    for (ValueId out : n.outputs) {
      const int64_t e = num_elements(g.value(out).shape);
      if (e > kMaxFoldElements || (elements += e) > budget) return {};
    }
    if (++count > kMaxConeNodes) return {};
    in_cone[value.producer.index] = true;
    pending.insert(pending.end(), n.inputs.begin(), n.inputs.end());
  }
  std::vector<NodeId> nodes;
  for (uint32_t k = 0; k < g.num_nodes(); ++k)
    if (in_cone[k]) nodes.push_back(NodeId{k});
  return nodes;
}

}  // namespace

// A float tensor the graph computes from constants alone (weights an exporter transposes from
// HWIO, tiles or negates in the graph): evaluated once with the reference interpreter, for an
// input that must be known at import time. Null where it is not such a tensor.
std::shared_ptr<const HostTensor> Importer::evaluate_constant(ValueId v) const {
  if (is_boolean(v) || g_.value(v).dtype != DType::f32) return nullptr;
  int64_t elements = 0;
  const std::vector<NodeId> cone = constant_cone(g_, v, kMaxFoldTotal - folded_elements_, elements);
  if (cone.empty()) return nullptr;
  folded_elements_ += elements;
  const Graph sub = subgraph(g_, cone, {v});
  Tensor t = run_reference(sub, {}).at(0);
  auto h = std::make_shared<HostTensor>();
  h->dims = std::move(t.shape);
  h->f = std::move(t.data);
  return h;
}

}  // namespace kiln::graph::onnx
