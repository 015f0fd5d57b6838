// ONNX import: model-level checks (opsets, names, graph inputs and outputs), the node loop,
// and the public entry points. The op table is in op_table.cpp, per-op conversion in ops_*.cpp,
// constant evaluation and dead-node removal in import_constants.cpp.
#include "graph/onnx/onnx_import.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "graph/onnx/functions.h"
#include "graph/onnx/importer.h"
#include "graph/onnx/input_shapes.h"
#include "graph/shape_inference.h"
#include "graph/verify.h"

namespace kiln::graph::onnx {
namespace {

// The newest opset of the default domain whose changes to the supported ops the converters
// know (docs/onnx.md): ONNX 1.23's.
constexpr int kMaxOpset = 28;

// A graph output's declared type, where the model gives one, must be what Kiln computes: FLOAT
// (or FLOAT16 or BFLOAT16, returned as FLOAT: docs/onnx.md, "Half-precision models") and the
// inferred shape (symbolic and missing dimensions match anything). BOOL is accepted for
// a boolean (`boolean`: a comparison's or logic op's result, or a BOOL input), which the
// caller receives as float32 0.0/1.0; INT64 for an `index` output (one an ArgMax or ArgMin
// produces, TopK's indices, or data movement of them), returned as FLOAT holding the exact index.
void check_declared_output(const ::onnx::ValueInfoProto& v, const Shape& computed, bool boolean,
                           bool index) {
  const std::string what = "graph output '" + v.name() + "' is declared ";
  if (!v.has_type()) return;
  if (!v.type().has_tensor_type())
    throw Error(what + "as something other than a tensor (a sequence, map or optional)");
  const auto& t = v.type().tensor_type();
  const int32_t dtype = t.elem_type();
  if (dtype == ::onnx::TensorProto::BOOL && !boolean)
    throw Error(what + "BOOL, but Kiln computes it as FLOAT (not from a comparison, logic op or "
                "BOOL input)");
  if (dtype != ::onnx::TensorProto::UNDEFINED && !is_graph_float_dtype(dtype) &&
      dtype != ::onnx::TensorProto::BOOL && !(index && dtype == ::onnx::TensorProto::INT64))
    throw Error(what + dtype_name(dtype) + ", but Kiln computes it as FLOAT" +
                (dtype == ::onnx::TensorProto::INT64
                     ? " (only ArgMax/ArgMin outputs, TopK's indices and data movement of them "
                       "may be INT64)"
                     : ""));
  if (!t.has_shape()) return;
  bool agree = t.shape().dim_size() == static_cast<int>(computed.size());
  std::string dims;
  for (int k = 0; k < t.shape().dim_size(); ++k) {
    const auto& d = t.shape().dim(k);
    dims += (k ? ", " : "") + (d.has_dim_value() ? std::to_string(d.dim_value())
                                                 : d.has_dim_param() ? d.dim_param() : "?");
    if (d.has_dim_value() && agree) agree = d.dim_value() == computed[k];
  }
  if (!agree)
    throw Error(what + "[" + dims + "], but Kiln computes " + to_string(computed) +
                " (a dimension that differs, or a different rank)");
}

int64_t saturating_round(float v, const std::string& what) {
  if (std::isnan(v)) throw Error(what + " holds NaN where an integer is expected");
  if (v >= 9.2233720368547758e18f) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18f) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(std::nearbyint(v));
}

// A graph input bound through ImportOptions::constant_inputs, typed as declared.
HostTensor bound_input(const ::onnx::ValueInfoProto& v, const Tensor& t) {
  const std::string what = "constant input '" + v.name() + "'";
  const auto& tt = v.type().tensor_type();
  if (checked_elements(t.shape, what) != static_cast<int64_t>(t.data.size()))
    throw Error(what + " holds " + std::to_string(t.data.size()) + " values for shape " +
                to_string(t.shape));
  if (tt.has_shape()) {
    bool ok = tt.shape().dim_size() == static_cast<int>(t.shape.size());
    for (int k = 0; ok && k < tt.shape().dim_size(); ++k)
      ok = !tt.shape().dim(k).has_dim_value() || tt.shape().dim(k).dim_value() == t.shape[k];
    if (!ok)
      throw Error(what + " is " + to_string(t.shape) + ", which does not match its declared shape");
  }
  HostTensor h;
  h.dtype = tt.elem_type();
  h.dims = t.shape;
  switch (h.dtype) {
    case ::onnx::TensorProto::FLOAT:
    case ::onnx::TensorProto::DOUBLE:
    case ::onnx::TensorProto::FLOAT16:
    case ::onnx::TensorProto::BFLOAT16:
      h.f = t.data;
      for (float& f : h.f) f = round_to_dtype(f, h.dtype);  // a bound half input holds halves
      break;
    case ::onnx::TensorProto::INT64:
    case ::onnx::TensorProto::INT32:
    case ::onnx::TensorProto::INT16:
    case ::onnx::TensorProto::INT8:
    case ::onnx::TensorProto::UINT16:
    case ::onnx::TensorProto::UINT8:
      for (float f : t.data) h.i.push_back(saturating_round(f, what));
      break;
    case ::onnx::TensorProto::BOOL:
      for (float f : t.data) h.i.push_back(f != 0.0f);
      break;
    default:
      throw Error(what + " is declared " + dtype_name(h.dtype) + ", which Kiln cannot bind");
  }
  return h;
}

}  // namespace

Importer::Importer(const ::onnx::ModelProto& model, const ImportOptions& options)
    : model_(model), options_(options) {}

Graph Importer::run() {
  check_opsets();
  nodes_ =
      live_nodes(expand_qlinear_ops(flatten_functions(model_, opset_, kMaxOpset)), model_.graph());
  add_initializers();
  add_graph_inputs();
  for (const FlatNode& n : nodes_)
    for (const std::string& in : n.proto->input()) used_names_.insert(in);
  for (const auto& out : model_.graph().output()) used_names_.insert(out.name());
  convert_nodes();
  add_graph_outputs();
  drop_unused_nodes();
  verify(g_, "after ONNX import");
  return std::move(g_);
}

void Importer::check_opsets() {
  bool found = false;
  for (const auto& op : model_.opset_import()) {
    if (!op.domain().empty() && op.domain() != "ai.onnx") continue;  // used by no node: harmless
    if (found) throw Error("the model imports the default ONNX domain twice");
    found = true;
    if (op.version() < 1 || op.version() > kMaxOpset)
      throw Error("the model uses opset " + std::to_string(op.version()) +
                  " of the default ONNX domain; Kiln supports opsets 1 to " +
                  std::to_string(kMaxOpset));
    opset_ = static_cast<int>(op.version());
  }
  if (!found) throw Error("the model imports no opset of the default ONNX domain (opset_import)");
}

void Importer::add_entry(const std::string& name, Entry e, const std::string& what) {
  if (name.empty()) throw Error(what + " has no name");
  const auto it = table_.find(name);
  if (it != table_.end())
    throw Error(what + " '" + name + "' has the same name as " + it->second.origin +
                " (duplicate value name)");
  table_.emplace(name, std::move(e));
}

void Importer::add_initializers() {
  const auto& g = model_.graph();
  if (g.sparse_initializer_size() > 0)
    throw Error("sparse initializer '" + g.sparse_initializer(0).values().name() +
                "' is not supported");
  for (const auto& t : g.initializer()) {
    auto slot = std::make_shared<Slot>();
    slot->host = std::make_shared<HostTensor>(
        decode_tensor(t, "initializer '" + t.name() + "'", options_.base_dir));
    add_entry(t.name(), {slot, "an initializer"}, "initializer");
  }
}

void Importer::add_graph_inputs() {
  std::map<std::string, const Tensor*> bound;
  for (const auto& [name, t] : options_.constant_inputs)
    if (!bound.emplace(name, &t).second)
      throw Error("constant input '" + name + "' is bound twice");
  const ShapeBindings shapes = bind_shapes(options_.input_shapes, model_.graph().input());
  check_shape_names(shapes, model_.graph());
  std::set<std::string> seen;
  for (const auto& in : model_.graph().input()) {
    const std::string& name = in.name();
    if (!seen.insert(name).second) throw Error("graph input '" + name + "' is listed twice");
    const auto it = table_.find(name);
    if (it != table_.end() && it->second.origin == "an initializer") continue;  // a default value
    if (!in.type().has_tensor_type())
      throw Error("graph input '" + name +
                  "' is not a tensor (sequence, map and optional "
                  "inputs are not supported)");
    auto slot = std::make_shared<Slot>();
    const auto b = bound.find(name);
    if (b != bound.end()) {
      slot->host = std::make_shared<HostTensor>(bound_input(in, *b->second));
      bound.erase(b);
    } else {
      // A BOOL input is exchanged as float32 0.0/1.0 (docs/onnx.md, "Booleans"), a FLOAT16 or
      // BFLOAT16 one as float32 ("Half-precision models").
      const int32_t dtype = in.type().tensor_type().elem_type();
      if (!is_graph_float_dtype(dtype) && dtype != ::onnx::TensorProto::BOOL)
        throw Error("graph input '" + name + "' has dtype " + dtype_name(dtype) +
                    "; Kiln graph tensors are FLOAT (FLOAT16 and BFLOAT16 exchanged as FLOAT), "
                    "or BOOL as float 0/1 (bind shape-like inputs as constants)");
      Shape s = static_shape(in, shapes);
      const Layout l = s.size() == 4 ? Layout::nchw : Layout::any;
      slot->value = g_.add_value(Value{name, std::move(s), DType::f32, l});
      if (dtype == ::onnx::TensorProto::BOOL) mark_boolean(slot->value);
      g_.inputs.push_back(slot->value);
    }
    add_entry(name, {slot, "a graph input"}, "graph input");
  }
  if (!bound.empty())
    throw Error("constant input '" + bound.begin()->first +
                "' does not name a graph input of the model");
}

void Importer::convert_nodes() {
  for (const FlatNode& n : nodes_) {
    const auto& p = *n.proto;
    const NodeCtx c{&p, n.name, n.opset};
    if (!p.domain().empty() && p.domain() != "ai.onnx")
      node_error(c, "domain '" + p.domain() + "' is not supported (only the default ONNX domain)");
    const OpInfo* info = find_op(p.op_type());
    if (!info) node_error(c, "op not supported");
    for (const auto& a : p.attribute())
      if (!has_attribute(*info, a.name()))
        node_error(c, "unknown attribute '" + a.name() + "' (" + p.op_type() + " has " +
                          (*info->attributes ? info->attributes : "none") + ")");
    if (c.opset < info->min_opset)
      node_error(c, "opset " + std::to_string(c.opset) + " is not supported for " + p.op_type() +
                        " (Kiln implements it from opset " + std::to_string(info->min_opset) + ")");
    for (const std::string& in : p.input())
      if (!in.empty() && !table_.count(in))
        node_error(c, "input '" + in +
                          "' is not produced by any earlier node, initializer or "
                          "graph input (nodes must be in topological order)");
    std::set<std::string> outs;
    for (const std::string& out : p.output()) {
      if (out.empty()) continue;
      const auto it = table_.find(out);
      if (it != table_.end())
        node_error(c, "output '" + out + "' is already produced by " + it->second.origin +
                          " (duplicate value name)");
      if (!outs.insert(out).second) node_error(c, "lists output '" + out + "' twice");
    }
    const int32_t quantized = quantized_inputs(c);
    info->fn(*this, c);
    if (quantized != 0) requantize_resized(*this, c, quantized);
    for (int k = 0; quantized != 0 && k < p.output_size(); ++k) {  // data movement: still quantized
      const ValueId v = output_value(c, k);
      if (v.valid()) mark_quantized(v, quantized);
    }
    for (int k = 0; k < p.output_size(); ++k)
      if (output_used(c, k) && !table_.count(p.output(k)))
        node_error(c, "output #" + std::to_string(k) + " '" + p.output(k) +
                          "' is used, but Kiln does not support computing it");
  }
}

void Importer::add_graph_outputs() {
  if (model_.graph().output_size() == 0) throw Error("the graph has no outputs");
  for (const auto& out : model_.graph().output()) {
    const auto it = table_.find(out.name());
    if (it == table_.end())
      throw Error("graph output '" + out.name() +
                  "' is not produced by any node, initializer or graph input");
    Slot& s = *it->second.slot;
    if (s.sequence)
      throw Error("graph output '" + out.name() + "' is a sequence; Kiln's outputs are tensors");
    const Layout l = logical_layout(s.host && !s.value.valid() ? s.host->dims.size() : 0);
    const ValueId id = slot_value(out.name(), s, l, nullptr);
    const Value& v = g_.value(id);
    if (quantized_dtype(id) != 0)
      throw Error("graph output '" + out.name() + "' is a quantized " +
                  dtype_name(quantized_dtype(id)) +
                  " tensor; Kiln's outputs are FLOAT (end the graph with DequantizeLinear)");
    check_declared_output(out, v.shape, is_boolean(id), is_index(id));
    g_.outputs.push_back(named_output(id, out.name()));
  }
}

ValueId Importer::output_value(const NodeCtx& c, int k) const {
  const auto it = table_.find(output_name(c, k));
  if (it == table_.end()) return ValueId{};
  const Slot& s = *it->second.slot;
  return s.host || s.sequence ? ValueId{} : s.value;
}

int32_t Importer::quantized_inputs(const NodeCtx& c) const {
  const bool moves = moves_quantized(c.op());
  int32_t found = 0;
  bool plain = false;  // a FLOAT graph tensor among the inputs
  for (int i = 0; i < c.proto->input_size(); ++i) {
    const auto it = has_input(c, i) ? table_.find(c.proto->input(i)) : table_.end();
    if (it == table_.end()) continue;  // input() would refuse a sequence: the op's to judge
    const Slot& s = *it->second.slot;
    if (s.host || s.sequence || !s.value.valid()) continue;
    const int32_t q = quantized_dtype(s.value);
    plain = plain || q == 0;
    if (q == 0 || (c.op() == "DequantizeLinear" && i != 1)) continue;  // x, its zero point
    if (!moves)
      node_error(c, "reads '" + input_name(c, i) + "', a quantized " + dtype_name(q) +
                        " tensor; Kiln computes on quantized tensors only through "
                        "DequantizeLinear, moving them unchanged before it (Reshape, Transpose, "
                        "Slice, Concat, MaxPool, ...)");
    if (found != 0 && found != q)
      node_error(c, "mixes quantized " + dtype_name(found) + " and " + dtype_name(q) + " tensors");
    found = q;
  }
  if (found != 0 && plain && c.op() != "DequantizeLinear")
    node_error(c, "mixes a quantized " + dtype_name(found) + " tensor with FLOAT ones");
  return found;
}

// A graph output keeps the model's name for it where it is another tensor under a new name (an
// Identity, an inference Dropout or a Cast to float before it: tf2onnx ends every graph with
// `Identity:0`). The tensor is renamed, unless the caller binds it (a graph input) or reads it
// under another name (an earlier graph output): then the output is a copy of it.
ValueId Importer::named_output(ValueId id, const std::string& name) {
  if (g_.value(id).name == name) return id;
  const bool shared = g_.is_graph_input(id) || g_.is_graph_output(id);
  if (!shared) {
    g_.value(id).name = name;
    return id;
  }
  const Value& v = g_.value(id);
  Node n{name + "/copy", Reshape{v.shape}, {id}, {}, {"copy"}};
  const ValueId copy = g_.add_value(Value{name, v.shape, v.dtype, infer_output(g_, n).layout});
  n.outputs = {copy};
  g_.add_node(std::move(n));
  if (is_boolean(id)) mark_boolean(copy);
  if (is_index(id)) index_values_.insert(copy.index);
  return copy;
}

// --- inputs ---

bool Importer::has_input(const NodeCtx& c, int i) const {
  return i < c.proto->input_size() && !c.proto->input(i).empty();
}

const std::string& Importer::input_name(const NodeCtx& c, int i) const {
  if (!has_input(c, i)) node_error(c, "input #" + std::to_string(i) + " is missing");
  return c.proto->input(i);
}

const Entry& Importer::input(const NodeCtx& c, int i) const {
  const Entry& e = table_.at(input_name(c, i));  // presence checked before conversion
  if (e.slot->sequence)
    node_error(c, "input '" + input_name(c, i) + "' is a sequence; " + c.op() +
                      " takes a tensor (Kiln reads sequences only through the sequence ops)");
  return e;
}

ValueId Importer::slot_value(const NodeCtx& c, const std::string& name, Slot& s) {
  const Layout l = s.value.valid() ? Layout::any : logical_layout(s.host->dims.size());
  return slot_value(name, s, l, &c);
}

const HostTensor* Importer::host_input(const NodeCtx& c, int i) const {
  return input(c, i).slot->host.get();
}

const HostTensor* Importer::known_input(const NodeCtx& c, int i) const {
  const HostTensor* h = host_input(c, i);
  Slot& s = *input(c, i).slot;
  if (!h && s.value.valid() && (s.host = evaluate_constant(s.value))) h = s.host.get();
  return h;
}

const HostTensor& Importer::constant_input(const NodeCtx& c, int i, const std::string& role) const {
  const HostTensor* h = known_input(c, i);
  if (!h)
    node_error(c, role + " '" + input_name(c, i) +
                      "' must be a constant (an initializer, a "
                      "Constant or a bound input), but it is computed at run time");
  return *h;
}

std::vector<int64_t> Importer::int_list_input(const NodeCtx& c, int i,
                                              const std::string& role) const {
  const HostTensor& h = constant_input(c, i, role);
  if (h.is_float() || h.dims.size() > 1)
    node_error(c, role + " '" + input_name(c, i) + "' must be a 1-D integer tensor, got " +
                      dtype_name(h.dtype) + " " + to_string(h.dims));
  return h.i;
}

ValueId Importer::value_input(const NodeCtx& c, int i) {
  return slot_value(c, input_name(c, i), *input(c, i).slot);
}

ValueId Importer::constant_value(const NodeCtx& c, int i, Layout layout) {
  constant_input(c, i, "input");
  return slot_value(input_name(c, i), *input(c, i).slot, layout, &c, /*as_constant=*/true);
}

Shape Importer::input_shape(const NodeCtx& c, int i) const {
  const Slot& s = *input(c, i).slot;
  return s.value.valid() ? g_.value(s.value).shape : s.host->dims;
}

ValueId Importer::slot_value(const std::string& name, Slot& s, Layout layout, const NodeCtx* c,
                             bool as_constant) {
  if (!as_constant && s.value.valid()) return s.value;
  if (!as_constant && s.materialize) {
    s.value = s.materialize();
    return s.value;
  }
  KILN_CHECK(s.host != nullptr, "a slot with neither a graph value nor host data");
  const HostTensor& h = *s.host;
  auto fail = [&](const std::string& what) {
    if (c) node_error(*c, what);
    throw Error(what);
  };
  const bool boolean = h.dtype == ::onnx::TensorProto::BOOL;  // float 0/1 in the graph
  // FLOAT16 and BFLOAT16 values are float32 in the graph (docs/onnx.md, "Half-precision models").
  if (!is_graph_float_dtype(h.dtype) && !boolean)
    fail("tensor '" + name + "' is " + dtype_name(h.dtype) +
         "; Kiln graph tensors are FLOAT "
         "(integer tensors may only feed shape-like inputs)");
  for (int64_t d : h.dims)
    if (d <= 0)
      fail("tensor '" + name + "' is empty " + to_string(h.dims) +
           "; Kiln graph tensors cannot be");
  const auto it = constants_.find({&s, layout});
  if (it != constants_.end()) return it->second;
  bool renamed = false;
  for (const auto& [key, v] : constants_) renamed |= key.first == &s;
  const std::string vname = renamed ? name + "#" + to_string(layout) : name;
  std::vector<float> data = h.f;
  if (boolean)
    for (int64_t b : h.i) data.push_back(b != 0 ? 1.0f : 0.0f);
  const ValueId v = add_constant(vname, h.dims, std::move(data), layout);
  if (boolean) mark_boolean(v);
  constants_[{&s, layout}] = v;
  return v;
}

ValueId Importer::add_constant(const std::string& name, Shape shape, std::vector<float> data,
                               Layout layout) {
  Value v{name, std::move(shape), DType::f32, layout};
  v.data = std::make_shared<const std::vector<float>>(std::move(data));
  return g_.add_value(std::move(v));
}

// --- outputs ---

const std::string& Importer::output_name(const NodeCtx& c, int k) const {
  static const std::string none;
  return k < c.proto->output_size() ? c.proto->output(k) : none;
}

bool Importer::output_used(const NodeCtx& c, int k) const {
  const std::string& n = output_name(c, k);
  return !n.empty() && used_names_.count(n) > 0;
}

ValueId Importer::emit(const NodeCtx& c, Op op, std::vector<ValueId> inputs,
                       const std::string& out_name, const std::string& node_name) {
  Node n{node_name.empty() ? c.name : node_name, std::move(op), std::move(inputs), {}, {}};
  n.computes = {op_label(n.op)};
  TypedShape out;
  try {
    out = infer_output(g_, n);
  } catch (const Error& e) {
    node_error(c, e.what());
  }
  if (g_.num_nodes() >= kMaxGraphNodes)
    node_error(c, "the graph exceeds " + std::to_string(kMaxGraphNodes) + " nodes");
  if (out.shape.size() > kMaxRank)
    node_error(c, "output '" + out_name + "' would have rank " + std::to_string(out.shape.size()) +
                      "; Kiln supports up to " + std::to_string(kMaxRank));
  for (int64_t d : out.shape)
    if (d <= 0) node_error(c, "output '" + out_name + "' would be " + to_string(out.shape));
  if (checked_elements(out.shape, "output '" + out_name + "'") > kMaxGraphElements)
    node_error(c, "output '" + out_name + "' would be " + to_string(out.shape) + ", too large");
  // Data movement of booleans gives booleans (docs/onnx.md, "Booleans"), of indices indices: the
  // inputs whose elements the output holds, all of them one or the other.
  std::vector<ValueId> moved;
  if (std::holds_alternative<Reshape>(n.op) || std::holds_alternative<Transpose>(n.op) ||
      std::holds_alternative<Slice>(n.op) || std::holds_alternative<Tile>(n.op) ||
      std::holds_alternative<Concat>(n.op)) {
    moved = n.inputs;
  } else if (std::holds_alternative<GatherElements>(n.op)) {
    moved = {n.inputs[0]};
  } else if (std::holds_alternative<ScatterElements>(n.op)) {
    moved = {n.inputs[0], n.inputs[2]};
  }
  bool boolean = !moved.empty(), index = !moved.empty();
  for (ValueId in : moved) boolean = boolean && is_boolean(in), index = index && is_index(in);
  const Reduce* r = std::get_if<Reduce>(&n.op);
  const TopK* t = std::get_if<TopK>(&n.op);
  index = index || (r && is_arg_reduce(r->kind)) || (t && t->indices);
  const ValueId v = g_.add_value(Value{out_name, out.shape, DType::f32, out.layout});
  n.outputs = {v};
  g_.add_node(std::move(n));
  if (boolean) mark_boolean(v);
  if (index) index_values_.insert(v.index);
  return v;
}

void Importer::define(const NodeCtx& c, int k, std::shared_ptr<Slot> slot) {
  const std::string& name = output_name(c, k);
  if (name.empty()) return;  // an optional output the model does not use
  table_[name] = Entry{std::move(slot), "node '" + c.name + "' (" + c.op() + ")"};
}

void Importer::define_value(const NodeCtx& c, int k, ValueId v) {
  auto s = std::make_shared<Slot>();
  s->value = v;
  define(c, k, std::move(s));
}

void Importer::define_host(const NodeCtx& c, int k, HostTensor t,
                           std::function<ValueId()> materialize) {
  if (t.dims.size() > kMaxRank)
    node_error(c, "result has rank " + std::to_string(t.dims.size()) + "; Kiln supports up to " +
                      std::to_string(kMaxRank));
  folded_elements_ += t.size();
  if (folded_elements_ > kMaxFoldTotal)
    node_error(c, "constant folding exceeds the import budget of " + std::to_string(kMaxFoldTotal) +
                      " elements");
  auto s = std::make_shared<Slot>();
  s->host = std::make_shared<const HostTensor>(std::move(t));
  s->materialize = std::move(materialize);
  define(c, k, std::move(s));
}

void Importer::define_alias(const NodeCtx& c, int k, int input_index) {
  define(c, k, table_.at(input_name(c, input_index)).slot);  // a tensor's or a sequence's
}

// --- public API ---

Graph import_model_from_bytes(const std::string& bytes, const ImportOptions& options) {
  if (static_cast<int64_t>(bytes.size()) > kMaxFileBytes)
    throw Error("the model is over 2 GiB; Kiln refuses it (protobuf's own limit)");
  ::onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    throw Error("cannot parse the model: not a serialized ONNX ModelProto (corrupt or truncated)");
  if (!model.has_graph()) throw Error("the model has no graph");
  return Importer(model, options).run();
}

std::string read_model_file(const std::string& path) { return read_file(path, "ONNX model"); }

Graph import_model(const std::string& path, const ImportOptions& options) {
  const std::string bytes = read_model_file(path);
  ImportOptions with_dir = options;
  if (with_dir.base_dir.empty()) {
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    with_dir.base_dir = dir.empty() ? "." : dir.string();
  }
  try {
    return import_model_from_bytes(bytes, with_dir);
  } catch (const Error& e) {
    throw Error("'" + path + "': " + e.what());
  }
}

}  // namespace kiln::graph::onnx
