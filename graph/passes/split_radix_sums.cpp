// split_radix_sums: a sum over axis 1 of a 5-D [N, R, C, H, W] tensor that views R channel
// blocks of a 4-D image as a radix axis becomes the sum of the R blocks, each a channel Slice
// of the 4-D image. ResNeSt's split attention (timm's SplitAttn) and SKNet's selective kernel
// write it twice per block:
//
//   x5 = Reshape(x, [N, R, C, H, W])      (x: the radix branches' [N, R*C, H, W] output)
//   gap = ReduceSum(x5, axis 1)           -> the attention's input
//   out = ReduceSum(x5 * a5, axis 1)      (a5: the attention, [N, R, C, 1, 1])
//
// The 5-D tensors have no channels-last form, so the layout pass ran all of it in NCHW: a
// transform of the branches' output to NCHW, two reductions over a strided axis and a
// transform back, which took 4-6x the time of the block's convolution (docs/benchmarks.md).
// Split, each sum is Adds (and the weighting Muls) of channel Slices, which the layout pass
// keeps NHWC, the memory plan makes views, and fuse_elementwise_chains merges.
//
// An operand of the summed expression may be: a Reshape that splits axis 1 of a 4-D tensor
// into [R, C] (its radix blocks are channel Slices of that tensor; with R = 1, torch.stack's
// Unsqueeze, the tensor itself); a Concat on axis 1 of such operands (torch.stack: timm's
// SelectiveKernel); Add, Sub, Mul, Div, Max or Min of such operands, broadcasting; or any other
// 5-D tensor with R or 1 on axis 1 (a Slice of it, or the whole, reshaped to 4-D: the 5-D
// Softmax over the radix axis). At least one operand must hold a split Reshape. The 5-D nodes
// nothing reads any more are dropped.
//
// Runs first among the rewrites of exported forms, before simplify_exported_ops (whose mean
// over H and W then sees the 4-D sum, a GlobalPool in NHWC).
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/passes/passes.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

constexpr int64_t kMaxRadix = 8;

// The elementwise arithmetic a radix sum splits through (add, sub, mul, div, max, min: the
// BinaryOps before pow), and its name in lower case for the split nodes' names.
bool is_arithmetic(BinaryOp op) { return op <= BinaryOp::min; }

std::string arithmetic_name(BinaryOp op) {
  std::string name = op_name(Binary{op});
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return name;
}

// Whether v is a Reshape of a 4-D [N, R*C, H, W] tensor to v's [N, R, C, H, W] (R may be 1:
// torch.stack's Unsqueeze).
bool is_radix_split(const Graph& g, const Value& v) {
  if (!v.producer.valid() || v.shape.size() != 5) return false;
  const Node& p = g.node(v.producer);
  if (!std::holds_alternative<Reshape>(p.op) || p.inputs.size() != 1) return false;
  const Value& x = g.value(p.inputs[0]);
  return x.shape.size() == 4 && x.shape[0] == v.shape[0] && x.shape[1] == v.shape[1] * v.shape[2] &&
         x.shape[2] == v.shape[3] && x.shape[3] == v.shape[4];
}

bool holds_split(const Graph& g, const Value& v);

// Whether v is an elementwise arithmetic op of 5-D operands with v's radix (or 1, broadcast),
// one of which holds a split: v's blocks are then the op of its operands' blocks.
bool splits_through(const Graph& g, const Value& v) {
  if (!v.producer.valid() || v.shape.size() != 5) return false;
  const Node& p = g.node(v.producer);
  const auto* b = std::get_if<Binary>(&p.op);
  if (!b || !is_arithmetic(b->op) || p.inputs.size() != 2) return false;
  bool split = false;
  for (ValueId in : p.inputs) {
    const Value& x = g.value(in);
    if (x.shape.size() != 5 || (x.shape[1] != v.shape[1] && x.shape[1] != 1)) return false;
    split = split || holds_split(g, x);
  }
  return split;
}

// Whether v is a Concat on the radix axis (torch.stack's) of 5-D operands, one of which holds a
// split: v's blocks are its operands' blocks.
bool concat_splits(const Graph& g, const Value& v) {
  if (!v.producer.valid() || v.shape.size() != 5) return false;
  const Node& p = g.node(v.producer);
  const auto* c = std::get_if<Concat>(&p.op);
  if (!c || c->axis != 1) return false;
  bool split = false;
  for (ValueId in : p.inputs) {
    const Value& x = g.value(in);
    if (x.shape.size() != 5) return false;
    split = split || holds_split(g, x);
  }
  return split;
}

// Whether v's blocks read a split Reshape (v itself, or through arithmetic and Concats).
bool holds_split(const Graph& g, const Value& v) {
  return is_radix_split(g, v) || splits_through(g, v) || concat_splits(g, v);
}

// Whether n is a sum over axis 1 of a 5-D tensor this pass splits.
bool splits(const Graph& g, const Node& n) {
  const auto* r = std::get_if<Reduce>(&n.op);
  if (!r || r->kind != ReduceKind::sum || r->axes != std::vector<int>{1} || n.inputs.size() != 1)
    return false;
  const Value& x = g.value(n.inputs[0]);
  return x.shape.size() == 5 && x.shape[1] >= 2 && x.shape[1] <= kMaxRadix && holds_split(g, x);
}

// Makes the 4-D radix blocks of 5-D values, each once.
class Blocks {
 public:
  Blocks(Graph& g, std::vector<Node>& nodes) : g_(g), nodes_(nodes) {}

  // Block i of the 5-D value id (block 0 for every i where it has 1 on the radix axis: a
  // broadcast operand).
  ValueId block(ValueId id, int64_t i) {
    const Value v = g_.value(id);
    if (v.shape[1] == 1) i = 0;
    const auto key = std::make_pair(id.index, i);
    if (const auto it = made_.find(key); it != made_.end()) return it->second;
    const Shape out{v.shape[0], v.shape[2], v.shape[3], v.shape[4]};
    const std::string tag = "/radix" + std::to_string(i);
    const std::string which = " (radix block " + std::to_string(i) + ")";
    ValueId r;
    if (is_radix_split(g_, v)) {
      const ValueId x = g_.node(v.producer).inputs[0];
      const Value xv = g_.value(x);
      const int64_t c = v.shape[2];
      r = v.shape[1] == 1
              ? x
              : add(Value{xv.name + tag, out, v.dtype, xv.layout},
                    Slice{{0, i * c, 0, 0}, {out[0], (i + 1) * c, out[2], out[3]}, {1, 1, 1, 1}},
                    {x}, "slice" + which);
    } else if (splits_through(g_, v)) {
      const Node p = g_.node(v.producer);
      const BinaryOp op = std::get<Binary>(p.op).op;
      const ValueId a = block(p.inputs[0], i), b = block(p.inputs[1], i);
      Shape s = g_.value(a).shape;
      const Shape& t = g_.value(b).shape;
      for (size_t d = 0; d < s.size(); ++d) s[d] = std::max(s[d], t[d]);
      r = add(Value{v.name + tag, s, v.dtype, logical_layout(4)}, Binary{op}, {a, b},
              arithmetic_name(op) + which);
    } else if (concat_splits(g_, v)) {
      const Node p = g_.node(v.producer);
      int64_t first = 0;  // the radix index of operand k's block 0
      size_t k = 0;
      while (i >= first + g_.value(p.inputs[k]).shape[1]) first += g_.value(p.inputs[k++]).shape[1];
      r = block(p.inputs[k], i - first);
    } else {
      // Any other operand: its block i (or the whole, if broadcast) reshaped to 4-D.
      ValueId part = id;
      if (v.shape[1] != 1) {
        Shape one = v.shape;
        one[1] = 1;
        part = add(Value{v.name + tag + "_slice", one, v.dtype, v.layout},
                   Slice{{0, i, 0, 0, 0},
                         {v.shape[0], i + 1, v.shape[2], v.shape[3], v.shape[4]},
                         {1, 1, 1, 1, 1}},
                   {id}, "slice" + which);
      }
      r = add(Value{v.name + tag, out, v.dtype, logical_layout(4)}, Reshape{out, Layout::any},
              {part}, "reshape" + which);
    }
    made_[key] = r;
    return r;
  }

  ValueId add(Value v, Op op, std::vector<ValueId> inputs, std::string computes,
              std::optional<ValueId> output = std::nullopt) {
    const ValueId out = output ? *output : g_.add_value(std::move(v));
    nodes_.push_back(
        Node{g_.value(out).name, std::move(op), std::move(inputs), {out}, {std::move(computes)}});
    return out;
  }

 private:
  Graph& g_;
  std::vector<Node>& nodes_;
  std::map<std::pair<uint32_t, int64_t>, ValueId> made_;
};

}  // namespace

Graph split_radix_sums(const Graph& input) {
  Graph g = input;
  std::vector<Node> nodes;
  Blocks blocks(g, nodes);
  bool split = false;
  for (const Node& n : input.nodes()) {
    if (!splits(input, n)) {
      nodes.push_back(n);
      continue;
    }
    split = true;
    const int64_t radix = g.value(n.inputs[0]).shape[1];
    const bool keepdims = std::get<Reduce>(n.op).keepdims;
    ValueId sum = blocks.block(n.inputs[0], 0);
    for (int64_t i = 1; i < radix; ++i) {
      const ValueId b = blocks.block(n.inputs[0], i);
      const Value sv = g.value(sum);
      const bool last = i == radix - 1 && !keepdims;
      sum = blocks.add(
          Value{n.name + "/sum" + std::to_string(i), sv.shape, sv.dtype, logical_layout(4)},
          Binary{BinaryOp::add}, {sum, b}, "add (radix sum)",
          last ? std::optional<ValueId>(n.outputs[0]) : std::nullopt);
    }
    if (keepdims)
      blocks.add(Value{}, Reshape{g.value(n.outputs[0]).shape, Layout::any}, {sum},
                 "reshape (radix sum, axis kept)", n.outputs[0]);
  }
  if (!split) return input;
  // Drop the nodes nothing reads any more (the 5-D reshapes and products).
  const std::vector<bool> erased = unread_nodes(g, nodes);
  g.rebuild(std::move(nodes), erased);
  return g;
}

}  // namespace kiln::graph
