// What the pattern passes (fuse_layer_norm, fuse_gelu) share: reader tests on a graph while
// matching, and the rewrite of each matched group of nodes into one node.
#pragma once

#include <functional>
#include <cmath>
#include <optional>
#include <vector>

#include "graph/ir.h"

namespace kiln::graph::patterns {

class View {
 public:
  explicit View(const Graph& g) : g_(g), uses_(g.consumers()) {}

  const Graph& graph() const { return g_; }
  const Node& node(size_t i) const { return g_.nodes()[i]; }
  size_t index(const Node& n) const { return static_cast<size_t>(&n - g_.nodes().data()); }
  const std::vector<NodeId>& readers(ValueId v) const { return uses_[v.index]; }
  // The one node reading v (perhaps twice); nullopt for another reader, none, or a graph output.
  std::optional<size_t> sole_reader(ValueId v) const {
    if (g_.is_graph_output(v) || uses_[v.index].empty()) return std::nullopt;
    for (NodeId r : uses_[v.index])
      if (r != uses_[v.index][0]) return std::nullopt;
    return uses_[v.index][0].index;
  }
  // The node producing v when `reader` is v's sole reader.
  const Node* sole_producer(ValueId v, size_t reader) const {
    const Value& val = g_.value(v);
    if (!val.producer.valid() || sole_reader(v) != reader) return nullptr;
    return &g_.node(val.producer);
  }
  static bool is_binary(const Node& n, BinaryOp op) {
    const auto* b = std::get_if<Binary>(&n.op);
    return b && b->op == op;
  }
  // A constant of one element.
  bool is_scalar(ValueId v) const {
    const Value& c = g_.value(v);
    return c.is_constant() && num_elements(c.shape) == 1;
  }

 private:
  const Graph& g_;
  const std::vector<std::vector<NodeId>> uses_;
};

// An inference BatchNorm node as the per-channel affine map it is, out = x * scale[c] +
// shift[c] with scale = gamma / sqrt(var + eps), computed in double: for fold_batch_norm and
// merge_parallel_convs. nullopt unless its parameters are constants of `channels` elements.
struct ChannelAffine {
  std::vector<double> scale, shift;
};
inline std::optional<ChannelAffine> batch_norm_affine(const Graph& g, const Node& n, int64_t channels) {
  const auto* bn = std::get_if<BatchNorm>(&n.op);
  if (!bn || n.inputs.size() != 5) return std::nullopt;
  for (size_t k = 1; k < 5; ++k) {
    const Value& p = g.value(n.inputs[k]);
    if (!p.is_constant() || num_elements(p.shape) != channels) return std::nullopt;
  }
  const std::vector<float>& gamma = *g.value(n.inputs[1]).data;
  const std::vector<float>& beta = *g.value(n.inputs[2]).data;
  const std::vector<float>& mean = *g.value(n.inputs[3]).data;
  const std::vector<float>& var = *g.value(n.inputs[4]).data;
  ChannelAffine a;
  for (size_t c = 0; c < gamma.size(); ++c) {
    a.scale.push_back(gamma[c] / std::sqrt(static_cast<double>(var[c]) + bn->epsilon));
    a.shift.push_back(beta[c] - mean[c] * a.scale.back());
  }
  return a;
}

// Each group (node indices, one group per match, disjoint) becomes the node `make(k, g)` returns
// for group k, placed where the group's last node was (its inputs all exist by then); the
// group's other nodes are deleted. `make` may add values (constants) to g.
inline Graph rewrite_groups(const Graph& input, const std::vector<std::vector<size_t>>& groups,
                            const std::function<Node(size_t, Graph&)>& make) {
  Graph g = input;
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  for (size_t k = 0; k < groups.size(); ++k) {
    size_t last = groups[k].front();
    for (size_t i : groups[k]) last = std::max(last, i);
    for (size_t i : groups[k]) dead[i] = i != last;
    nodes[last] = make(k, g);
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph::patterns
