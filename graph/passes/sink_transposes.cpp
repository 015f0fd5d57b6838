// sink_transposes: moves each Transpose down past the elementwise ops that read it, so that
// the op runs on the untransposed tensor (and can join the epilogue of the convolution that
// made it), and cancels the Transposes that meet their inverse on the way. Rewrites, repeated
// until none applies:
//   - Transpose(q) of Transpose(p) becomes one Transpose (nothing when they cancel, or a
//     Reshape view where the result is a graph output);
//   - f(Transpose(p)(x)) for a unary elementwise f becomes Transpose(p)(f(x));
//   - Transpose(p)(x) op c, for a constant c that the op broadcasts, becomes
//     Transpose(p)(x op c') with c' the constant's axes permuted to match x;
//   - Transpose(p)(x) op Transpose(p)(y) becomes Transpose(p)(x op y).
// A Transpose moves only when the op is its sole reader, so no tensor is ever copied twice.
// Runs before the epilogue fusions, on the logical graph.
//
// First, tokens that are an image's pixels (hybrid transformers: PVT, SegFormer, CoaT and
// Twins run a convolution on their tokens and go back) are written as the views the layout pass
// knows: x.transpose(1, 2).reshape(B, C, H, W) of tokens [B, H * W, C] becomes
// Transpose(0, 3, 1, 2) of the view [B, H, W, C], and x.flatten(2).transpose(1, 2) of an image
// [B, C, H, W] becomes the view [B, H * W, C] of Transpose(0, 2, 3, 1): both Transposes are
// relabels of NHWC bytes once the layout pass runs, where the token form copied twice (a
// transpose and a layout transform). A one-input elementwise op after the second form (PVT's
// GELU after its depthwise convolution) moves above the view, then past the Transpose, into the
// convolution's epilogue.
#include <algorithm>
#include <map>
#include <numeric>

#include "graph/op_kind.h"
#include "graph/passes/passes.h"
#include "graph/passes/pattern_util.h"

namespace kiln::graph {
namespace {

std::vector<int> inverse(const std::vector<int>& perm) {
  std::vector<int> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int>(i);
  return inv;
}

bool is_identity(const std::vector<int>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int>(i)) return false;
  return true;
}

Shape permuted(const Shape& s, const std::vector<int>& perm) {
  Shape out;
  for (int p : perm) out.push_back(s[static_cast<size_t>(p)]);
  return out;
}

// Constant `c`, right-aligned to rank `rank` with leading 1s, transposed by `perm`.
Value transposed_constant(const Value& c, size_t rank, const std::vector<int>& perm) {
  Shape full(rank - c.shape.size(), 1);
  full.insert(full.end(), c.shape.begin(), c.shape.end());
  const Shape shape = permuted(full, perm);
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) in_strides[d - 1] = in_strides[d] * full[d];
  std::vector<float> data(c.data->size());
  std::vector<int64_t> index(rank, 0);  // output index, odometer order
  for (float& out : data) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) src += index[d] * in_strides[static_cast<size_t>(perm[d])];
    out = (*c.data)[static_cast<size_t>(src)];
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  Value v{c.name + "_permuted", shape, c.dtype, c.layout};
  v.data = std::make_shared<const std::vector<float>>(std::move(data));
  return v;
}

// Unary elementwise ops whose only input is the activation (an ElementwiseChain with affine
// steps also reads per-channel parameters tied to an axis: not moved).
bool is_unary_elementwise(const Node& n) {
  return op_kind(n.op) == OpKind::elementwise && !std::holds_alternative<Binary>(n.op) &&
         !std::holds_alternative<BatchNorm>(n.op) && n.inputs.size() == 1 && n.outputs.size() == 1;
}

class Sinker {
 public:
  explicit Sinker(const Graph& g) : g_(g), uses_(g.consumers()) {}

  // One sweep over the nodes; false when nothing changed.
  bool sweep() {
    bool changed = false;
    for (const Node& original : g_.nodes()) {
      Node n = original;
      for (ValueId& v : n.inputs) v = resolve(v);
      changed |= rewrite(n);
    }
    // Transposes that lost their last reader.
    std::vector<std::vector<NodeId>> uses(g_.values().size());
    for (uint32_t i = 0; i < out_.size(); ++i)
      for (ValueId v : out_[i].inputs) uses[v.index].push_back(NodeId{i});
    std::vector<bool> dead(out_.size(), false);
    for (size_t i = out_.size(); i-- > 0;) {
      if (!std::holds_alternative<Transpose>(out_[i].op)) continue;
      const ValueId o = out_[i].outputs[0];
      bool read = g_.is_graph_output(o);
      for (NodeId r : uses[o.index]) read |= !dead[r.index];
      dead[i] = !read;
    }
    g_.rebuild(std::move(out_), dead);
    return changed;
  }

  Graph take() { return std::move(g_); }

 private:
  ValueId resolve(ValueId v) const {
    auto it = replaced_.find(v.index);
    return it == replaced_.end() ? v : it->second;
  }

  // The Transpose node (in out_) producing v, if v is an original value read by one node only.
  const Node* sole_transpose(ValueId v) const {
    if (v.index >= uses_.size() || uses_[v.index].size() != 1 || g_.is_graph_output(v)) return nullptr;
    auto it = producer_.find(v.index);
    if (it == producer_.end()) return nullptr;
    const Node& p = out_[it->second];
    return std::holds_alternative<Transpose>(p.op) ? &p : nullptr;
  }

  void emit(Node n) {
    for (ValueId o : n.outputs) producer_[o.index] = out_.size();
    out_.push_back(std::move(n));
  }

  bool rewrite(Node& n) {
    if (const auto* t = std::get_if<Transpose>(&n.op)) return compose(n, t->perm);
    if (is_unary_elementwise(n)) {
      if (const Node* t = sole_transpose(n.inputs[0])) {
        const std::vector<int> perm = std::get<Transpose>(t->op).perm;
        n.inputs[0] = t->inputs[0];
        sink_below(n, perm);
        return true;
      }
    } else if (const auto* b = std::get_if<Binary>(&n.op); b && n.inputs.size() == 2) {
      return sink_binary(n);
    }
    emit(std::move(n));
    return false;
  }

  // Transpose(q) of Transpose(p)(x) reads x through the composed permutation.
  bool compose(Node& n, const std::vector<int>& q) {
    auto it = producer_.find(n.inputs[0].index);
    const Node* inner = it == producer_.end() ? nullptr : &out_[it->second];
    if (!inner || !std::holds_alternative<Transpose>(inner->op)) {
      emit(std::move(n));
      return false;
    }
    const std::vector<int>& p = std::get<Transpose>(inner->op).perm;
    std::vector<int> r(q.size());
    for (size_t i = 0; i < q.size(); ++i) r[i] = p[static_cast<size_t>(q[i])];
    const ValueId x = inner->inputs[0];
    n.inputs[0] = x;
    if (is_identity(r)) {
      if (!g_.is_graph_output(n.outputs[0])) {
        replaced_[n.outputs[0].index] = x;  // readers take x; this node goes
        return true;
      }
      // A graph output keeps its value: a Reshape to the same shape, stored as a view of x.
      n.op = Reshape{g_.value(x).shape, Layout::any};
      n.computes = {"transposes that cancel (a view)"};
      emit(std::move(n));
      return true;
    }
    n.op = Transpose{r};
    emit(std::move(n));
    return true;
  }

  bool sink_binary(Node& n) {
    const Value& a = g_.value(n.inputs[0]);
    const Value& b = g_.value(n.inputs[1]);
    const Node* ta = a.is_constant() ? nullptr : sole_transpose(n.inputs[0]);
    const Node* tb = b.is_constant() ? nullptr : sole_transpose(n.inputs[1]);
    const Shape& out_shape = g_.value(n.outputs[0]).shape;
    // x op c (or c op x): the constant is re-laid-out to follow x.
    for (int side = 0; side < 2; ++side) {
      const Node* t = side == 0 ? ta : tb;
      const Value& c = side == 0 ? b : a;
      if (!t || !c.is_constant() || c.shape.size() > out_shape.size()) continue;
      if (g_.value(n.inputs[static_cast<size_t>(side)]).shape != out_shape) continue;  // c grows it
      const std::vector<int> perm = std::get<Transpose>(t->op).perm;
      const ValueId moved = g_.add_value(transposed_constant(c, out_shape.size(), inverse(perm)));
      n.inputs[static_cast<size_t>(side)] = t->inputs[0];
      n.inputs[static_cast<size_t>(1 - side)] = moved;
      sink_below(n, perm);
      return true;
    }
    // Transpose(p)(x) op Transpose(p)(y), same shapes.
    if (ta && tb && ta != tb && std::get<Transpose>(ta->op).perm == std::get<Transpose>(tb->op).perm &&
        a.shape == b.shape) {
      const std::vector<int> perm = std::get<Transpose>(ta->op).perm;
      n.inputs = {ta->inputs[0], tb->inputs[0]};
      sink_below(n, perm);
      return true;
    }
    emit(std::move(n));
    return false;
  }

  // n now reads untransposed operands: it writes a new value in their axis order, and a
  // Transpose(perm) of that value takes over n's output.
  void sink_below(Node& n, const std::vector<int>& perm) {
    const Value out = g_.value(n.outputs[0]);
    Layout layout = out.layout;  // the activation operand's (a constant may come first)
    for (ValueId v : n.inputs)
      if (!g_.value(v).is_constant()) layout = g_.value(v).layout;
    const ValueId inner =
        g_.add_value(Value{out.name + "_untransposed", permuted(out.shape, inverse(perm)), out.dtype, layout});
    const std::vector<ValueId> outputs = n.outputs;
    const std::string name = n.name;
    n.outputs = {inner};
    emit(std::move(n));
    emit(Node{name + "_transpose", Transpose{perm}, {inner}, outputs, {"transpose"}});
  }

  Graph g_;
  const std::vector<std::vector<NodeId>> uses_;  // of the graph as the sweep began
  std::vector<Node> out_;
  std::map<uint32_t, size_t> producer_;     // value -> index in out_
  std::map<uint32_t, ValueId> replaced_;    // value -> the value its readers take instead
};

bool is_perm(const Node* n, const std::vector<int>& perm) {
  const auto* t = n ? std::get_if<Transpose>(&n->op) : nullptr;
  return t && t->perm == perm && n->inputs.size() == 1 && n->outputs.size() == 1;
}

bool is_view(const Node* n) {
  return n && std::holds_alternative<Reshape>(n->op) && n->inputs.size() == 1 &&
         n->outputs.size() == 1;
}

// The rewrites below leave the Transpose or Reshape they replace without a reader: the graph
// is rebuilt without such nodes.
Graph rebuilt(Graph g, std::vector<Node> nodes) {
  const std::vector<bool> dead = unread_nodes(g, nodes);
  g.rebuild(std::move(nodes), dead);
  return g;
}

Graph tokens_as_images(const Graph& input) {
  Graph g = input;
  const patterns::View view(input);
  std::vector<Node> nodes;
  for (const Node& n : input.nodes()) {
    const bool one_to_one = n.inputs.size() == 1 && n.outputs.size() == 1;
    const Node* producer = one_to_one ? view.sole_producer(n.inputs[0], view.index(n)) : nullptr;
    if (!producer) {
      nodes.push_back(n);
      continue;
    }
    const Shape& in = input.value(n.inputs[0]).shape;
    const Value& out = input.value(n.outputs[0]);
    // Reshape [B, C, N] -> [B, C, H, W] of Transpose(0, 2, 1) of tokens [B, N, C].
    const Shape& s = out.shape;
    if (is_view(&n) && is_perm(producer, {0, 2, 1}) && s.size() == 4 &&
        in == Shape{s[0], s[1], s[2] * s[3]}) {
      const Shape pixels{s[0], s[2], s[3], s[1]};
      const ValueId v = g.add_value(Value{out.name + "_pixels", pixels, out.dtype, Layout::nchw});
      nodes.push_back(Node{n.name + "_pixels",
                           Reshape{pixels, Layout::any},
                           producer->inputs,
                           {v},
                           {"reshape (no copy)"}});
      nodes.push_back(Node{n.name, Transpose{{0, 3, 1, 2}}, {v}, n.outputs, {"transpose"}});
      continue;
    }
    // Transpose(0, 2, 1) of Reshape [B, C, H, W] -> [B, C, H * W].
    const Shape* x = is_view(producer) ? &input.value(producer->inputs[0]).shape : nullptr;
    if (is_perm(&n, {0, 2, 1}) && x && x->size() == 4 &&
        in == Shape{(*x)[0], (*x)[1], (*x)[2] * (*x)[3]}) {
      const Shape pixels{(*x)[0], (*x)[2], (*x)[3], (*x)[1]};
      const ValueId p = g.add_value(Value{out.name + "_pixels", pixels, out.dtype, Layout::nchw});
      nodes.push_back(
          Node{n.name + "_pixels", Transpose{{0, 2, 3, 1}}, producer->inputs, {p}, {"transpose"}});
      nodes.push_back(
          Node{n.name, Reshape{out.shape, Layout::any}, {p}, n.outputs, {"reshape (no copy)"}});
      continue;
    }
    nodes.push_back(n);
  }
  return rebuilt(std::move(g), std::move(nodes));
}

// f(Reshape(Transpose(x))) for a one-input elementwise f that alone reads the view: f applies
// before the view (so the Transpose can sink past it), the view after it.
Graph hoist_unary_above_views(const Graph& input) {
  Graph g = input;
  const patterns::View view(input);
  std::vector<Node> nodes;
  for (const Node& n : input.nodes()) {
    const Node* r =
        is_unary_elementwise(n) ? view.sole_producer(n.inputs[0], view.index(n)) : nullptr;
    const Node* t = is_view(r) ? view.sole_producer(r->inputs[0], view.index(*r)) : nullptr;
    bool affine = false;
    if (const auto* chain = std::get_if<ElementwiseChain>(&n.op))
      for (const ChainStep& step : chain->steps) affine |= per_channel_step(step.kind);
    if (!t || !std::holds_alternative<Transpose>(t->op) || affine) {
      nodes.push_back(n);
      continue;
    }
    const Value& y = input.value(r->inputs[0]);
    const ValueId early = g.add_value(Value{y.name + "_" + n.name, y.shape, y.dtype, y.layout});
    Node f = n;
    f.inputs = r->inputs;
    f.outputs = {early};
    nodes.push_back(std::move(f));
    Node moved = *r;
    moved.inputs = {early};
    moved.outputs = n.outputs;
    nodes.push_back(std::move(moved));
  }
  return rebuilt(std::move(g), std::move(nodes));
}

}  // namespace

Graph sink_transposes(const Graph& input) {
  Graph g = hoist_unary_above_views(tokens_as_images(input));
  // Each sweep moves every movable Transpose at least one op down or cancels it, and there
  // are finitely many ops below each: the bound only guards against a bug.
  for (size_t sweep = 0; sweep <= input.num_nodes(); ++sweep) {
    Sinker s(g);
    const bool changed = s.sweep();
    g = s.take();
    if (!changed) break;
  }
  return g;
}

}  // namespace kiln::graph
