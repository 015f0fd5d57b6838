// ONNX export: values become initializers and value infos, nodes ONNX or "ai.kiln" nodes.
#include "graph/onnx/onnx_export.h"

#include "graph/file_io.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "graph/shape_inference.h"
#include "onnx/onnx_pb.h"

namespace kiln::graph::onnx {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "ONNX raw_data is little-endian; values are copied as they are");

using AP = ::onnx::AttributeProto;
using NP = ::onnx::NodeProto;
using TP = ::onnx::TensorProto;
constexpr const char* kKilnDomain = "ai.kiln";

AP& add_attr(NP& p, const std::string& name, AP::AttributeType type) {
  AP* a = p.add_attribute();
  a->set_name(name);
  a->set_type(type);
  return *a;
}
void attr_int(NP& p, const std::string& name, int64_t v) { add_attr(p, name, AP::INT).set_i(v); }
void attr_float(NP& p, const std::string& name, float v) { add_attr(p, name, AP::FLOAT).set_f(v); }
void attr_string(NP& p, const std::string& name, const std::string& v) {
  add_attr(p, name, AP::STRING).set_s(v);
}
template <typename T>
void attr_ints(NP& p, const std::string& name, const std::vector<T>& v) {
  AP& a = add_attr(p, name, AP::INTS);
  for (T x : v) a.add_ints(x);
}
void attr_floats(NP& p, const std::string& name, const std::vector<float>& v) {
  AP& a = add_attr(p, name, AP::FLOATS);
  for (float x : v) a.add_floats(x);
}
void attr_strings(NP& p, const std::string& name, const std::vector<std::string>& v) {
  AP& a = add_attr(p, name, AP::STRINGS);
  for (const std::string& x : v) a.add_strings(x);
}

// Kiln's NHWC tensors are stored permuted, so a reader needs the layout to make sense of the
// dims; values whose layout carries no meaning get no doc_string.
std::string layout_doc(const Value& v) {
  if (v.layout == Layout::any && v.shape.size() != 4) return "";
  return to_string(v.layout);
}

const char* pool_kind(PoolKind k) { return k == PoolKind::max ? "max" : "avg"; }

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? sep : "") + parts[i];
  return s;
}

// Builds the ModelProto: value names first (unique), then the interface, the initializers, the
// value infos and the nodes in Kiln's (topological) order.
class Exporter {
 public:
  Exporter(const Graph& g, const ExportOptions& o) : g_(g), opt_(o) {}
  ::onnx::ModelProto run();

  const Graph& graph() const { return g_; }
  const std::string& name(ValueId v) const { return names_.at(v.index); }
  // Operands ONNX takes as tensor inputs where Kiln has attributes (Clip bounds, a Reshape's
  // shape): small initializers named after the node, always with their data.
  std::string scalar_param(const std::string& base, float v);
  std::string int64_param(const std::string& base, const std::vector<int64_t>& v);

 private:
  std::string unique(const std::string& base);
  void name_values();
  void declare(::onnx::ValueInfoProto* info, ValueId v) const;
  void add_initializer(ValueId v);
  void add_node(const Node& n);

  const Graph& g_;
  const ExportOptions& opt_;
  ::onnx::ModelProto m_;
  ::onnx::GraphProto* gp_ = nullptr;
  std::vector<std::string> names_;
  std::set<std::string> taken_;
};

// Sets op_type, domain and attributes for one node, and appends ONNX-only operand inputs.
class NodeWriter {
 public:
  NodeWriter(Exporter& ex, const Node& n, NP& p) : ex_(ex), n_(n), p_(p) {}

  // Chain steps as three attributes: NAME (the kinds), step_a and step_b (their parameters).
  void steps(const std::string& name, const std::vector<ChainStep>& chain) {
    std::vector<std::string> kinds;
    std::vector<float> a, b;
    for (const ChainStep& st : chain) {
      kinds.push_back(to_string(st.kind));
      a.push_back(st.a);
      b.push_back(st.b);
    }
    attr_strings(p_, name, kinds);
    attr_floats(p_, name == "steps" ? "step_a" : name + "_a", a);
    attr_floats(p_, name == "steps" ? "step_b" : name + "_b", b);
  }

  void operator()(const Conv2d& c) {
    kiln("FusedConv");
    const Value& w = input(1);
    const FilterDims f = filter_dims(w.shape, w.layout);
    attr_ints(p_, "kernel_shape", std::vector<int64_t>{f.kh, f.kw});
    window(c.stride_h, c.stride_w, {c.pad_top, c.pad_left, c.pad_bottom, c.pad_right}, c.dilation_h,
           c.dilation_w, true);
    attr_int(p_, "group", c.groups);
    attr_int(p_, "residual", c.residual);
    attr_string(p_, "activation", to_string(c.activation));
    attr_float(p_, "activation_min", c.activation.lo);
    attr_float(p_, "activation_max", c.activation.hi);
    if (!c.post.empty()) steps("post", c.post);
    if (!c.pre.empty()) steps("pre", c.pre);
    if (c.nchw_input) attr_int(p_, "nchw_input", 1);
    if (c.input_scale) attr_int(p_, "input_scale", 1);  // the last input: [N, 1, 1, Ci]
    if (c.bf16) attr_string(p_, "precision", "bf16");
    if (const std::optional<Pool2d>& p = c.pool) {  // the pooling of the result
      attr_string(p_, "pool_kind", pool_kind(p->kind));
      attr_ints(p_, "pool_kernel_shape", std::vector<int>{p->kernel_h, p->kernel_w});
      attr_ints(p_, "pool_strides", std::vector<int>{p->stride_h, p->stride_w});
      attr_ints(p_, "pool_pads", std::vector<int>{p->pad_top, p->pad_left, p->pad_bottom, p->pad_right});
      attr_ints(p_, "pool_dilations", std::vector<int>{p->dilation_h, p->dilation_w});
      attr_int(p_, "pool_ceil_mode", p->ceil_mode);
      attr_int(p_, "pool_count_include_pad", p->count_include_pad);
    }
    if (const std::optional<Resize>& r = c.resize) {  // the resize of the result
      attr_string(p_, "resize_mode", to_string(r->mode));
      attr_string(p_, "resize_coordinate_transformation_mode", to_string(r->coordinates));
      attr_string(p_, "resize_nearest_mode", to_string(r->nearest));
      attr_ints(p_, "resize_sizes", r->sizes);
      attr_floats(p_, "resize_scales", r->scales);
      if (c.nchw_output) attr_int(p_, "nchw_output", 1);
    }
    if (c.shortcut) attr_int(p_, "shortcut", 1);  // the last input, added after the post steps
    if (c.expand) {  // the last two inputs are the 1x1 expansion's weights and bias
      attr_string(p_, "expand_activation", to_string(*c.expand));
      attr_float(p_, "expand_activation_min", c.expand->lo);
      attr_float(p_, "expand_activation_max", c.expand->hi);
      if (!c.expand_post.empty()) steps("expand_post", c.expand_post);
    }
    attr_string(p_, "weight_layout", to_string(w.layout));
  }
  void operator()(const BatchNorm& b) {
    // ONNX normalizes along axis 1; NHWC keeps its channels on axis 3.
    if (nhwc())
      kiln("BatchNorm");
    else
      plain("BatchNormalization");
    attr_float(p_, "epsilon", b.epsilon);
  }
  void operator()(const Relu&) { plain("Relu"); }
  void operator()(const Clip& c) {
    plain("Clip");  // since opset 11 the bounds are inputs, not attributes
    p_.add_input(ex_.scalar_param(n_.name + "_min", c.min));
    p_.add_input(ex_.scalar_param(n_.name + "_max", c.max));
  }
  void operator()(const LeakyRelu& l) {
    plain("LeakyRelu");
    attr_float(p_, "alpha", l.alpha);
  }
  void operator()(const Sigmoid&) { plain("Sigmoid"); }
  void operator()(const HardSigmoid& h) {
    plain("HardSigmoid");
    attr_float(p_, "alpha", h.alpha);
    attr_float(p_, "beta", h.beta);
  }
  // ONNX has HardSwish only from opset 14; under the exported opset 13 it is Kiln's op.
  void operator()(const HardSwish&) { kiln("HardSwish"); }
  // Next to an NHWC operand the layout pass re-laid the other one out, so numpy broadcasting
  // of the stored shapes is exactly what Kiln computes.
  // The comparisons and logic ops give (and read) booleans as float 0/1, which ONNX's typed
  // versions do not: they are Kiln's ops, and so is Where (its condition is a float).
  void operator()(const Binary& b) {
    if (is_boolean(b.op)) kiln(op_name(n_.op), false);
    else plain(op_name(n_.op));
  }
  void operator()(const Where&) { kiln("Where", false); }
  void operator()(const Pool2d& p) {
    // ONNX pools are NCHW, and AveragePool has no dilations before opset 19.
    const bool dilated = p.dilation_h != 1 || p.dilation_w != 1;
    const bool onnx = !nhwc() && (p.kind == PoolKind::max || !dilated);
    if (onnx) {
      plain(op_name(n_.op));
    } else {
      kiln("Pool2d");
      attr_string(p_, "kind", pool_kind(p.kind));
    }
    attr_ints(p_, "kernel_shape", std::vector<int>{p.kernel_h, p.kernel_w});
    window(p.stride_h, p.stride_w, {p.pad_top, p.pad_left, p.pad_bottom, p.pad_right}, p.dilation_h,
           p.dilation_w, !onnx || p.kind == PoolKind::max);
    attr_int(p_, "ceil_mode", p.ceil_mode);
    if (!onnx || p.kind == PoolKind::avg) attr_int(p_, "count_include_pad", p.count_include_pad);
  }
  void operator()(const GlobalPool& gp) {
    if (!nhwc()) return plain(op_name(n_.op));
    kiln("GlobalPool");
    attr_string(p_, "kind", pool_kind(gp.kind));
  }
  void operator()(const Gemm& g) {
    plain("Gemm");
    attr_int(p_, "transA", g.trans_a);
    attr_int(p_, "transB", g.trans_b);
    attr_float(p_, "alpha", g.alpha);
    attr_float(p_, "beta", g.beta);
  }
  void operator()(const MatMul&) { plain("MatMul"); }
  void operator()(const Reshape& r) {
    // The target shape is an input since opset 5; Kiln's has only positive dims, so ONNX's
    // special 0 and -1 never occur.
    plain("Reshape");
    p_.add_input(ex_.int64_param(n_.name + "_shape", r.shape));
  }
  void operator()(const Transpose& t) {
    plain("Transpose");
    attr_ints(p_, "perm", t.perm);
  }
  // On NHWC tensors the axis already is the stored one, which is what the exported dims show.
  void operator()(const Concat& c) {
    plain("Concat");
    attr_int(p_, "axis", c.axis);
  }
  // ONNX's Slice and Pad take their parameters as tensor inputs; Kiln's are normalized
  // attributes (one entry per axis), clearer to read as they are.
  void operator()(const Slice& s) {
    kiln("Slice");
    attr_ints(p_, "starts", s.starts);
    attr_ints(p_, "ends", s.ends);
    attr_ints(p_, "steps", s.steps);
  }
  void operator()(const Pad& pd) {
    kiln("Pad");
    attr_ints(p_, "pads", pd.pads);
    attr_float(p_, "value", pd.value);
    if (pd.mode != PadMode::constant) attr_string(p_, "mode", to_string(pd.mode));
  }
  void operator()(const Softmax& s) {
    // coerce_2d (the opset < 13 semantics) matches opset 13's Softmax, LogSoftmax and Hardmax
    // only on the last axis.
    if (!s.coerce_2d || s.axis + 1 == static_cast<int>(input(0).shape.size())) {
      plain(op_name(n_.op));
    } else {
      kiln(op_name(n_.op));
      attr_int(p_, "coerce_2d", 1);
    }
    attr_int(p_, "axis", s.axis);
  }
  void operator()(const Reduce& r) {
    plain(op_name(n_.op));
    if (is_arg_reduce(r.kind)) {  // ArgMax / ArgMin: one axis; the index as float32 in Kiln
      attr_int(p_, "axis", r.axes.at(0));
      attr_int(p_, "keepdims", r.keepdims);
      attr_int(p_, "select_last_index",
               r.kind == ReduceKind::argmax_last || r.kind == ReduceKind::argmin_last);
      return;
    }
    // Opset 13's ReduceSum takes its axes as an input, the others as an attribute; none means
    // every axis, as in Kiln.
    if (!r.axes.empty() && r.kind == ReduceKind::sum)
      p_.add_input(
          ex_.int64_param(n_.name + "_axes", std::vector<int64_t>(r.axes.begin(), r.axes.end())));
    else if (!r.axes.empty())
      attr_ints(p_, "axes", r.axes);
    attr_int(p_, "keepdims", r.keepdims);
  }
  void operator()(const Tile& t) {
    plain("Tile");
    p_.add_input(ex_.int64_param(n_.name + "_repeats", t.repeats));
  }
  // ONNX has LayerNormalization only from opset 17; under the exported opset 13 it is Kiln's op.
  void operator()(const LayerNorm& l) {
    kiln("LayerNorm", false);
    attr_int(p_, "axis", l.axis);
    attr_float(p_, "epsilon", l.epsilon);
  }
  // Kiln's op: ONNX's GroupNormalization (opset 18) is channels-first only, with one scale per
  // group until opset 21.
  void operator()(const GroupNorm& gn) {
    kiln("GroupNorm");
    attr_int(p_, "num_groups", gn.groups);
    attr_float(p_, "epsilon", gn.epsilon);
  }
  // TopK's K is an input in ONNX, and each node here computes one of its two outputs: Kiln's op.
  void operator()(const TopK& t) {
    kiln("TopK");
    attr_int(p_, "axis", t.axis);
    attr_int(p_, "k", t.k);
    attr_int(p_, "largest", t.largest);
    attr_int(p_, "indices", t.indices);
  }
  // Kiln's indices are float32 (ONNX's are integers): Kiln's ops.
  void operator()(const GatherElements& ge) {
    kiln("GatherElements", false);
    attr_int(p_, "axis", ge.axis);
    attr_int(p_, "broadcast", ge.broadcast);
  }
  void operator()(const ScatterElements& se) {
    kiln("ScatterElements", false);
    attr_int(p_, "axis", se.axis);
    attr_string(p_, "reduction", to_string(se.reduction));
  }
  // ONNX has GridSample only from opset 16; under the exported opset 13 it is Kiln's op.
  void operator()(const GridSample& gs) {
    kiln("GridSample");
    attr_string(p_, "mode", to_string(gs.mode));
    attr_string(p_, "padding_mode", to_string(gs.padding));
    attr_int(p_, "align_corners", gs.align_corners);
  }
  // Kiln's normalized form: the output sizes and per-axis scales as attributes.
  void operator()(const Resize& r) {
    kiln("Resize");
    attr_string(p_, "mode", to_string(r.mode));
    attr_string(p_, "coordinate_transformation_mode", to_string(r.coordinates));
    attr_string(p_, "nearest_mode", to_string(r.nearest));
    attr_ints(p_, "sizes", r.sizes);
    attr_floats(p_, "scales", r.scales);
    if (r.mode == ResizeMode::cubic) {
      attr_float(p_, "cubic_coeff_a", r.cubic_a);
      attr_int(p_, "exclude_outside", r.exclude_outside);
    }
    if (r.coordinates == ResizeCoordinates::tf_crop_and_resize) {
      attr_floats(p_, "roi", r.roi);
      attr_float(p_, "extrapolation_value", r.extrapolation);
    }
  }
  void operator()(const ElementwiseChain& c) {
    kiln("ElementwiseChain");
    steps("steps", c.steps);
  }
  void operator()(const LayoutTransform& t) {
    kiln("LayoutTransform", false);
    attr_string(p_, "from", to_string(t.from));
    attr_string(p_, "to", to_string(t.to));
    // The same move as a transpose of the stored tensor, for readers who think in ONNX.
    std::vector<int> perm{0, 1, 2, 3};
    if (t.from != t.to)
      perm = t.to == Layout::nhwc ? std::vector<int>{0, 2, 3, 1} : std::vector<int>{0, 3, 1, 2};
    attr_ints(p_, "perm", perm);
  }

 private:
  const Value& input(size_t i) const { return ex_.graph().value(n_.inputs.at(i)); }
  bool nhwc() const { return !n_.inputs.empty() && input(0).layout == Layout::nhwc; }
  void plain(const std::string& op_type) { p_.set_op_type(op_type); }
  // Kiln ops that see a 4-D input say in which layout, as their semantics depend on it.
  void kiln(const std::string& op_type, bool with_layout = true) {
    p_.set_op_type(op_type);
    p_.set_domain(kKilnDomain);
    if (with_layout && !n_.inputs.empty() && input(0).shape.size() == 4)
      attr_string(p_, "layout", to_string(input(0).layout));
  }
  void window(int sh, int sw, const std::vector<int>& pads, int dh, int dw, bool dilations) {
    attr_ints(p_, "strides", std::vector<int>{sh, sw});
    attr_ints(p_, "pads", pads);  // ONNX order: top, left, bottom, right
    if (dilations) attr_ints(p_, "dilations", std::vector<int>{dh, dw});
  }

  Exporter& ex_;
  const Node& n_;
  NP& p_;
};

::onnx::ModelProto Exporter::run() {
  m_.set_ir_version(8);
  m_.set_producer_name("kiln");
  auto* onnx_opset = m_.add_opset_import();
  onnx_opset->set_domain("");
  onnx_opset->set_version(13);
  auto* kiln_opset = m_.add_opset_import();
  kiln_opset->set_domain(kKilnDomain);
  kiln_opset->set_version(1);
  m_.set_doc_string(
      std::string("A Kiln graph. ai.kiln nodes are Kiln kernels; each node's kiln_computes (an "
                  "attribute, or the doc_string of standard ops) lists the operators it computes. Tensors have their stored shapes; doc_strings give "
                  "layouts (NHWC is stored [N, H, W, C]).") +
      (opt_.include_weights ? "" : " Weights omitted: for viewing only, not runnable."));
  gp_ = m_.mutable_graph();
  gp_->set_name("kiln");
  name_values();
  for (ValueId v : g_.inputs) declare(gp_->add_input(), v);
  for (ValueId v : g_.outputs) declare(gp_->add_output(), v);
  for (uint32_t i = 0; i < g_.values().size(); ++i) {
    const ValueId v{i};
    if (g_.value(v).is_constant())
      add_initializer(v);
    else if (!g_.is_graph_input(v) && !g_.is_graph_output(v))
      declare(gp_->add_value_info(), v);
  }
  for (const Node& n : g_.nodes()) add_node(n);
  return std::move(m_);
}

std::string Exporter::unique(const std::string& base) {
  const std::string stem = base.empty() ? "value" : base;
  std::string name = stem;
  for (int k = 1; !taken_.insert(name).second; ++k) name = stem + "_" + std::to_string(k);
  return name;
}

// The graph interface claims its names first, so a clash renames an internal value instead.
void Exporter::name_values() {
  names_.assign(g_.values().size(), "");
  std::vector<bool> named(g_.values().size(), false);
  auto claim = [&](ValueId v) {
    if (named.at(v.index)) return;
    named[v.index] = true;
    names_[v.index] = unique(g_.value(v).name);
  };
  for (ValueId v : g_.inputs) claim(v);
  for (ValueId v : g_.outputs) claim(v);
  for (uint32_t i = 0; i < g_.values().size(); ++i) claim(ValueId{i});
}

void Exporter::declare(::onnx::ValueInfoProto* info, ValueId id) const {
  const Value& v = g_.value(id);
  info->set_name(name(id));
  info->set_doc_string(layout_doc(v));
  auto* t = info->mutable_type()->mutable_tensor_type();
  t->set_elem_type(TP::FLOAT);
  auto* shape = t->mutable_shape();
  for (int64_t d : v.shape) shape->add_dim()->set_dim_value(d);
}

void Exporter::add_initializer(ValueId id) {
  const Value& v = g_.value(id);
  TP& t = *gp_->add_initializer();
  t.set_name(name(id));
  t.set_data_type(TP::FLOAT);
  t.set_doc_string(layout_doc(v));
  for (int64_t d : v.shape) t.add_dims(d);
  if (opt_.include_weights)
    t.set_raw_data(reinterpret_cast<const char*>(v.data->data()), v.data->size() * sizeof(float));
}

std::string Exporter::scalar_param(const std::string& base, float v) {
  TP& t = *gp_->add_initializer();
  t.set_name(unique(base));
  t.set_data_type(TP::FLOAT);
  t.set_raw_data(reinterpret_cast<const char*>(&v), sizeof v);
  return t.name();
}

std::string Exporter::int64_param(const std::string& base, const std::vector<int64_t>& v) {
  TP& t = *gp_->add_initializer();
  t.set_name(unique(base));
  t.set_data_type(TP::INT64);
  t.add_dims(static_cast<int64_t>(v.size()));
  t.set_raw_data(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
  return t.name();
}

void Exporter::add_node(const Node& n) {
  NP& p = *gp_->add_node();
  p.set_name(n.name);
  for (ValueId v : n.inputs) p.add_input(name(v));
  for (ValueId v : n.outputs) p.add_output(name(v));
  std::visit(NodeWriter(*this, n, p), n.op);
  // Fusion provenance where a reader looks: an attribute of Kiln's own ops (Netron shows it);
  // the doc_string of standard ops, whose schemas forbid unknown attributes (onnx.checker and
  // onnxruntime reject them), so a graph of standard ops stays valid ONNX.
  const std::string computes = n.computes.empty() ? op_label(n.op) : join(n.computes, " + ");
  if (p.domain() == kKilnDomain) attr_string(p, "kiln_computes", computes);
  else p.set_doc_string("kiln_computes: " + computes);
}

}  // namespace

std::string export_model_bytes(const Graph& g, const ExportOptions& options) {
  const ::onnx::ModelProto m = Exporter(g, options).run();
  const size_t size = m.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX))
    throw Error("the exported model would be " + std::to_string(size) +
                " bytes, over protobuf's 2 GiB limit; export it without weights "
                "(ExportOptions::include_weights = false) to view it");
  std::string bytes;
  KILN_CHECK(m.SerializeToString(&bytes), "serializing the exported ModelProto failed");
  return bytes;
}

void export_model(const Graph& g, const std::string& path, const ExportOptions& options) {
  write_file_atomically(path, export_model_bytes(g, options));
}

}  // namespace kiln::graph::onnx
