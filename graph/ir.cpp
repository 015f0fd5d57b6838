// Graph IR: names of its kinds, storage, id bookkeeping, compaction after a pass and subgraphs
// (the text dump: ir_dump.cpp).
#include "graph/ir.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <sstream>

namespace kiln::graph {

const char* to_string(DType d) {
  switch (d) {
    case DType::f32: return "fp32";
  }
  return "?";
}

const char* to_string(Layout l) {
  switch (l) {
    case Layout::any: return "any";
    case Layout::nchw: return "NCHW";
    case Layout::nhwc: return "NHWC";
    case Layout::oihw: return "OIHW";
    case Layout::hwio: return "HWIO";
  }
  return "?";
}

bool is_boolean(BinaryOp op) {
  switch (op) {
    case BinaryOp::add:
    case BinaryOp::sub:
    case BinaryOp::mul:
    case BinaryOp::div:
    case BinaryOp::max:
    case BinaryOp::min:
    case BinaryOp::pow:
      return false;
    case BinaryOp::equal:
    case BinaryOp::less:
    case BinaryOp::greater:
    case BinaryOp::less_equal:
    case BinaryOp::greater_equal:
    case BinaryOp::logical_and:
    case BinaryOp::logical_or:
    case BinaryOp::logical_xor:
      return true;
  }
  return false;
}

const char* to_string(ChainStepKind k) {
  switch (k) {
    case ChainStepKind::clamp: return "clamp";
    case ChainStepKind::leaky_relu: return "leaky_relu";
    case ChainStepKind::sigmoid: return "sigmoid";
    case ChainStepKind::hard_sigmoid: return "hard_sigmoid";
    case ChainStepKind::hard_swish: return "hard_swish";
    case ChainStepKind::affine: return "affine";
    case ChainStepKind::prelu:
      return "prelu";
    case ChainStepKind::silu: return "silu";
    case ChainStepKind::tanh: return "tanh";
    case ChainStepKind::erf: return "erf";
    case ChainStepKind::exp: return "exp";
    case ChainStepKind::log: return "log";
    case ChainStepKind::sqrt: return "sqrt";
    case ChainStepKind::abs: return "abs";
    case ChainStepKind::neg: return "neg";
    case ChainStepKind::reciprocal: return "reciprocal";
    case ChainStepKind::softplus: return "softplus";
    case ChainStepKind::softsign: return "softsign";
    case ChainStepKind::elu: return "elu";
    case ChainStepKind::selu: return "selu";
    case ChainStepKind::celu: return "celu";
    case ChainStepKind::thresholded_relu: return "thresholded_relu";
    case ChainStepKind::pow: return "pow";
    case ChainStepKind::gelu: return "gelu";
    case ChainStepKind::gelu_tanh: return "gelu_tanh";
    case ChainStepKind::mish: return "mish";
    case ChainStepKind::floor: return "floor";
    case ChainStepKind::ceil: return "ceil";
    case ChainStepKind::round: return "round";
    case ChainStepKind::logical_not: return "not";
    case ChainStepKind::greater: return "greater";
    case ChainStepKind::less: return "less";
    case ChainStepKind::equal: return "equal";
    case ChainStepKind::greater_equal: return "greater_equal";
    case ChainStepKind::less_equal: return "less_equal";
    case ChainStepKind::sign:
      return "sign";
    case ChainStepKind::shrink:
      return "shrink";
    case ChainStepKind::is_nan:
      return "is_nan";
    case ChainStepKind::is_inf:
      return "is_inf";
    case ChainStepKind::sin:
      return "sin";
    case ChainStepKind::cos:
      return "cos";
    case ChainStepKind::tan:
      return "tan";
    case ChainStepKind::sinh:
      return "sinh";
    case ChainStepKind::cosh:
      return "cosh";
    case ChainStepKind::asin:
      return "asin";
    case ChainStepKind::acos:
      return "acos";
    case ChainStepKind::atan:
      return "atan";
    case ChainStepKind::asinh:
      return "asinh";
    case ChainStepKind::acosh:
      return "acosh";
    case ChainStepKind::atanh:
      return "atanh";
  }
  return "?";
}

bool costly_step(const ChainStep& s) {
  using K = ChainStepKind;
  switch (s.kind) {
    case K::sigmoid: case K::silu: case K::tanh: case K::erf: case K::exp: case K::log:
    case K::sqrt: case K::reciprocal: case K::softplus: case K::softsign: case K::elu:
    case K::selu:
    case K::celu:
    case K::gelu:
    case K::gelu_tanh:
    case K::mish:
    case K::sin:
    case K::cos:
    case K::tan:
    case K::sinh:
    case K::cosh:
    case K::asin:
    case K::acos:
    case K::atan:
    case K::asinh:
    case K::acosh:
    case K::atanh:
      return true;
    case K::pow:  // 0 to 3 are multiplications (generators/ops/elementwise.cpp)
      return !(s.a == 0.0f || s.a == 1.0f || s.a == 2.0f || s.a == 3.0f);
    default:
      return false;
  }
}

const char* to_string(SoftmaxKind k) {
  switch (k) {
    case SoftmaxKind::softmax: return "softmax";
    case SoftmaxKind::log_softmax: return "log_softmax";
    case SoftmaxKind::hardmax: return "hardmax";
  }
  return "?";
}

const char* to_string(ReduceKind k) {
  switch (k) {
    case ReduceKind::mean: return "mean";
    case ReduceKind::sum: return "sum";
    case ReduceKind::max: return "max";
    case ReduceKind::min: return "min";
    case ReduceKind::prod: return "prod";
    case ReduceKind::l1: return "l1";
    case ReduceKind::l2: return "l2";
    case ReduceKind::log_sum: return "log_sum";
    case ReduceKind::log_sum_exp: return "log_sum_exp";
    case ReduceKind::sum_square: return "sum_square";
    case ReduceKind::argmax: return "argmax";
    case ReduceKind::argmin: return "argmin";
    case ReduceKind::argmax_last: return "argmax_last";
    case ReduceKind::argmin_last: return "argmin_last";
  }
  return "?";
}

bool is_arg_reduce(ReduceKind k) {
  return k == ReduceKind::argmax || k == ReduceKind::argmin || k == ReduceKind::argmax_last ||
         k == ReduceKind::argmin_last;
}

const char* to_string(PadMode m) {
  return m == PadMode::constant ? "constant" : m == PadMode::reflect ? "reflect" : "edge";
}

int64_t pad_source_index(PadMode mode, int64_t j, int64_t begin, int64_t n) {
  int64_t i = j - begin;
  if (mode == PadMode::edge) return std::clamp<int64_t>(i, 0, n - 1);
  if (mode == PadMode::reflect) {
    if (i < 0) i = -i;
    if (i > n - 1) i = 2 * (n - 1) - i;
  }
  return i;
}

const char* to_string(ResizeMode m) {
  return m == ResizeMode::nearest ? "nearest" : m == ResizeMode::linear ? "linear" : "cubic";
}

bool resize_axis_is_identity(const Resize& r, size_t a, int64_t in_len) {
  if (r.sizes[a] != in_len || r.scales[a] != 1.0f) return false;
  switch (r.coordinates) {
    case ResizeCoordinates::tf_half_pixel_for_nn:  // i + 1/2: only rounding down brings it back
      return r.mode == ResizeMode::nearest &&
             (r.nearest == NearestRounding::floor || r.nearest == NearestRounding::round_prefer_floor);
    case ResizeCoordinates::tf_crop_and_resize:  // the whole axis as the crop
      return in_len == 1 || (r.roi[a] == 0.0f && r.roi[r.sizes.size() + a] == 1.0f);
    default: return true;
  }
}

const char* to_string(ResizeCoordinates c) {
  switch (c) {
    case ResizeCoordinates::half_pixel: return "half_pixel";
    case ResizeCoordinates::pytorch_half_pixel: return "pytorch_half_pixel";
    case ResizeCoordinates::align_corners: return "align_corners";
    case ResizeCoordinates::asymmetric: return "asymmetric";
    case ResizeCoordinates::tf_half_pixel_for_nn: return "tf_half_pixel_for_nn";
    case ResizeCoordinates::tf_crop_and_resize: return "tf_crop_and_resize";
  }
  return "?";
}

const char* to_string(NearestRounding r) {
  switch (r) {
    case NearestRounding::round_prefer_floor: return "round_prefer_floor";
    case NearestRounding::round_prefer_ceil: return "round_prefer_ceil";
    case NearestRounding::floor: return "floor";
    case NearestRounding::ceil: return "ceil";
  }
  return "?";
}

const char* to_string(GridSampleMode m) {
  switch (m) {
    case GridSampleMode::linear:
      return "linear";
    case GridSampleMode::nearest:
      return "nearest";
    case GridSampleMode::cubic:
      return "cubic";
  }
  return "?";
}

const char* to_string(GridSamplePadding p) {
  switch (p) {
    case GridSamplePadding::zeros:
      return "zeros";
    case GridSamplePadding::border:
      return "border";
    case GridSamplePadding::reflection:
      return "reflection";
  }
  return "?";
}

const char* to_string(ScatterReduction r) {
  switch (r) {
    case ScatterReduction::none:
      return "none";
    case ScatterReduction::add:
      return "add";
    case ScatterReduction::mul:
      return "mul";
    case ScatterReduction::max:
      return "max";
    case ScatterReduction::min:
      return "min";
  }
  return "?";
}

BinaryOp combining_op(ScatterReduction r) {
  switch (r) {
    case ScatterReduction::add:
      return BinaryOp::add;
    case ScatterReduction::mul:
      return BinaryOp::mul;
    case ScatterReduction::max:
      return BinaryOp::max;
    case ScatterReduction::min:
      return BinaryOp::min;
    case ScatterReduction::none:
      break;
  }
  throw Error("ScatterElements without a reduction has no combining op");
}

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t num_elements(const Shape& s) {
  // Shapes come from files: a zero anywhere makes the product 0 whatever the other dimensions
  // are, and a product past int64 is refused instead of overflowing (undefined behaviour).
  for (int64_t d : s)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n))
      throw Error("shape " + to_string(s) + " has more elements than a 64-bit count holds");
  return n;
}

bool Activation::is_identity() const { return std::isinf(lo) && lo < 0 && std::isinf(hi); }
bool Activation::is_relu() const { return lo == 0.0f && std::isinf(hi); }
bool Activation::is_relu6() const { return lo == 0.0f && hi == 6.0f; }

Activation Activation::then(const Activation& next) const {
  // clamp(clamp(v, lo, hi), nlo, nhi) == clamp(v, max(lo, nlo), min(hi, nhi)) when the
  // intervals overlap; when they do not, every value lands on one bound of `next`.
  Activation r{std::max(lo, next.lo), std::min(hi, next.hi)};
  if (r.lo > r.hi) {
    const float v = hi < next.lo ? next.lo : next.hi;
    r = {v, v};
  }
  return r;
}

std::string to_string(const Activation& a) {
  if (a.is_identity()) return "none";
  if (a.is_relu()) return "relu";
  if (a.is_relu6()) return "relu6";
  std::ostringstream s;
  s << "clamp(" << a.lo << ", " << a.hi << ")";
  return s.str();
}

const char* op_name(const Op& op) {
  struct Visitor {
    const char* operator()(const Conv2d&) { return "Conv2d"; }
    const char* operator()(const BatchNorm&) { return "BatchNorm"; }
    const char* operator()(const Relu&) { return "Relu"; }
    const char* operator()(const Clip&) { return "Clip"; }
    const char* operator()(const LeakyRelu&) { return "LeakyRelu"; }
    const char* operator()(const Sigmoid&) { return "Sigmoid"; }
    const char* operator()(const HardSigmoid&) { return "HardSigmoid"; }
    const char* operator()(const HardSwish&) { return "HardSwish"; }
    const char* operator()(const Binary& b) {
      switch (b.op) {
        case BinaryOp::add: return "Add";
        case BinaryOp::sub: return "Sub";
        case BinaryOp::mul: return "Mul";
        case BinaryOp::div: return "Div";
        case BinaryOp::max: return "Max";
        case BinaryOp::min: return "Min";
        case BinaryOp::pow: return "Pow";
        case BinaryOp::equal: return "Equal";
        case BinaryOp::less: return "Less";
        case BinaryOp::greater: return "Greater";
        case BinaryOp::less_equal: return "LessOrEqual";
        case BinaryOp::greater_equal: return "GreaterOrEqual";
        case BinaryOp::logical_and: return "And";
        case BinaryOp::logical_or: return "Or";
        case BinaryOp::logical_xor: return "Xor";
      }
      return "Binary";
    }
    const char* operator()(const Pool2d& p) { return p.kind == PoolKind::max ? "MaxPool" : "AveragePool"; }
    const char* operator()(const GlobalPool& p) {
      return p.kind == PoolKind::max ? "GlobalMaxPool" : "GlobalAveragePool";
    }
    const char* operator()(const Gemm&) { return "Gemm"; }
    const char* operator()(const MatMul&) { return "MatMul"; }
    const char* operator()(const Reshape&) { return "Reshape"; }
    const char* operator()(const Transpose&) { return "Transpose"; }
    const char* operator()(const Concat&) { return "Concat"; }
    const char* operator()(const Slice&) { return "Slice"; }
    const char* operator()(const Pad&) { return "Pad"; }
    const char* operator()(const Softmax& s) {
      switch (s.kind) {
        case SoftmaxKind::softmax: return "Softmax";
        case SoftmaxKind::log_softmax: return "LogSoftmax";
        case SoftmaxKind::hardmax: return "Hardmax";
      }
      return "Softmax";
    }
    const char* operator()(const Reduce& r) {  // ONNX's names
      switch (r.kind) {
        case ReduceKind::mean: return "ReduceMean";
        case ReduceKind::sum: return "ReduceSum";
        case ReduceKind::max: return "ReduceMax";
        case ReduceKind::min: return "ReduceMin";
        case ReduceKind::prod: return "ReduceProd";
        case ReduceKind::l1: return "ReduceL1";
        case ReduceKind::l2: return "ReduceL2";
        case ReduceKind::log_sum: return "ReduceLogSum";
        case ReduceKind::log_sum_exp: return "ReduceLogSumExp";
        case ReduceKind::sum_square: return "ReduceSumSquare";
        case ReduceKind::argmax:
        case ReduceKind::argmax_last: return "ArgMax";
        case ReduceKind::argmin:
        case ReduceKind::argmin_last: return "ArgMin";
      }
      return "Reduce";
    }
    const char* operator()(const Tile&) { return "Tile"; }
    const char* operator()(const Where&) { return "Where"; }
    const char* operator()(const LayerNorm&) { return "LayerNorm"; }
    const char* operator()(const GroupNorm&) { return "GroupNorm"; }
    const char* operator()(const Resize&) { return "Resize"; }
    const char* operator()(const GridSample&) { return "GridSample"; }
    const char* operator()(const TopK&) { return "TopK"; }
    const char* operator()(const GatherElements&) { return "GatherElements"; }
    const char* operator()(const ScatterElements&) { return "ScatterElements"; }
    const char* operator()(const ElementwiseChain&) { return "ElementwiseChain"; }
    const char* operator()(const LayoutTransform&) { return "LayoutTransform"; }
  };
  return std::visit(Visitor{}, op);
}

std::string op_label(const Op& op) {
  if (std::holds_alternative<Conv2d>(op)) return "conv2d";
  if (std::holds_alternative<BatchNorm>(op)) return "batchnorm";
  if (const auto* c = std::get_if<Clip>(&op)) return to_string(Activation{c->min, c->max});
  if (std::holds_alternative<LayoutTransform>(op)) return "layout_transform";
  if (const auto* ch = std::get_if<ElementwiseChain>(&op)) {  // "erf", "pow", "tanh + sqrt"
    std::string steps;
    for (const ChainStep& st : ch->steps) steps += (steps.empty() ? "" : " + ") + std::string(to_string(st.kind));
    if (!steps.empty()) return steps;
  }
  std::string name = op_name(op);
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return name;
}

ValueId Graph::add_value(Value v) {
  values_.push_back(std::move(v));
  return ValueId{static_cast<uint32_t>(values_.size() - 1)};
}

NodeId Graph::add_node(Node n) {
  const NodeId id{static_cast<uint32_t>(nodes_.size())};
  for (ValueId out : n.outputs) value(out).producer = id;
  nodes_.push_back(std::move(n));
  return id;
}

Value& Graph::value(ValueId id) {
  KILN_CHECK(id.index < values_.size(), "value id out of range");
  return values_[id.index];
}
const Value& Graph::value(ValueId id) const {
  KILN_CHECK(id.index < values_.size(), "value id out of range");
  return values_[id.index];
}
Node& Graph::node(NodeId id) {
  KILN_CHECK(id.index < nodes_.size(), "node id out of range");
  return nodes_[id.index];
}
const Node& Graph::node(NodeId id) const {
  KILN_CHECK(id.index < nodes_.size(), "node id out of range");
  return nodes_[id.index];
}

std::vector<std::vector<NodeId>> Graph::consumers() const {
  std::vector<std::vector<NodeId>> uses(values_.size());
  for (uint32_t i = 0; i < nodes_.size(); ++i)
    for (ValueId v : nodes_[i].inputs)
      if (v.index < uses.size()) uses[v.index].push_back(NodeId{i});
  return uses;
}

bool Graph::is_graph_output(ValueId v) const {
  return std::find(outputs.begin(), outputs.end(), v) != outputs.end();
}
bool Graph::is_graph_input(ValueId v) const {
  return std::find(inputs.begin(), inputs.end(), v) != inputs.end();
}

void Graph::rebuild(std::vector<Node> nodes) {
  // Keep values referenced by a node or by the graph interface, in their old order.
  std::vector<bool> used(values_.size(), false);
  for (const Node& n : nodes) {
    for (ValueId v : n.inputs) used.at(v.index) = true;
    for (ValueId v : n.outputs) used.at(v.index) = true;
  }
  for (ValueId v : inputs) used.at(v.index) = true;
  for (ValueId v : outputs) used.at(v.index) = true;

  std::vector<uint32_t> remap(values_.size(), ValueId::kInvalid);
  std::vector<Value> kept;
  for (uint32_t i = 0; i < values_.size(); ++i) {
    if (!used[i]) continue;
    remap[i] = static_cast<uint32_t>(kept.size());
    kept.push_back(std::move(values_[i]));
    kept.back().producer = NodeId{};
  }
  auto fix = [&](std::vector<ValueId>& ids) {
    for (ValueId& v : ids) v.index = remap[v.index];
  };
  values_ = std::move(kept);
  nodes_.clear();
  fix(inputs);
  fix(outputs);
  for (Node& n : nodes) {
    fix(n.inputs);
    fix(n.outputs);
    add_node(std::move(n));
  }
}

std::vector<bool> unread_nodes(const Graph& g, const std::vector<Node>& nodes) {
  std::vector<int> readers(g.values().size(), 0);
  for (const Node& n : nodes)
    for (ValueId v : n.inputs) ++readers[v.index];
  std::vector<bool> unread(nodes.size(), false);
  for (size_t i = nodes.size(); i-- > 0;) {
    bool read = false;
    for (ValueId v : nodes[i].outputs) read = read || readers[v.index] > 0 || g.is_graph_output(v);
    if (read) continue;
    unread[i] = true;
    for (ValueId v : nodes[i].inputs) --readers[v.index];
  }
  return unread;
}

void Graph::rebuild(std::vector<Node> nodes, const std::vector<bool>& erased) {
  KILN_CHECK(erased.size() == nodes.size(), "one erased flag per node");
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!erased[i]) kept.push_back(std::move(nodes[i]));
  rebuild(std::move(kept));
}

Graph subgraph(const Graph& g, const std::vector<NodeId>& nodes, const std::vector<ValueId>& outputs) {
  Graph sub;
  std::map<uint32_t, ValueId> ids;
  const auto copy = [&](ValueId old, bool produced) {
    const auto it = ids.find(old.index);
    if (it != ids.end()) return it->second;
    Value v = g.value(old);
    v.producer = NodeId{};
    const bool input = !produced && !v.is_constant();
    const ValueId id = ids[old.index] = sub.add_value(std::move(v));
    if (input) sub.inputs.push_back(id);
    return id;
  };
  for (NodeId id : nodes) {
    Node n = g.node(id);
    for (ValueId& in : n.inputs) in = copy(in, false);
    for (ValueId& out : n.outputs) out = copy(out, true);
    sub.add_node(std::move(n));
  }
  for (ValueId v : outputs) sub.outputs.push_back(copy(v, true));
  return sub;
}

}  // namespace kiln::graph
