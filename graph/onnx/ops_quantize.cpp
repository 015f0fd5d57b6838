// Quantized models as float computation (docs/onnx.md, "Quantized models"): QuantizeLinear and
// DequantizeLinear; QLinearConv, QLinearMatMul and onnxruntime's com.microsoft QOperator ops
// expanded into them around their float op; dynamic quantization (DynamicQuantizeLinear,
// ConvInteger, MatMulInteger) expanded into ONNX ops; Resize of a quantized tensor. A quantized
// tensor is a float32 tensor holding its integers (exact up to 2^24, so for 8- and 16-bit
// types); its type is remembered so that only DequantizeLinear and data movement may read it.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/onnx/importer.h"
#include "graph/shape_inference.h"

namespace kiln::graph::onnx {
namespace {

using TP = ::onnx::TensorProto;

// The integer range of a quantized type Kiln computes in float32; false for the others.
bool quantized_range(int32_t dtype, float* lo, float* hi) {
  switch (dtype) {
    case TP::UINT8:
      *lo = 0, *hi = 255;
      return true;
    case TP::INT8:
      *lo = -128, *hi = 127;
      return true;
    case TP::UINT16:
      *lo = 0, *hi = 65535;
      return true;
    case TP::INT16:
      *lo = -32768, *hi = 32767;
      return true;
    default:
      return false;
  }
}

// A scale (or zero point) input: a scalar, or 1-D along `axis` of x. Returns the axis it runs
// along (-1 for per-tensor) after checking its length.
int per_axis(const NodeCtx& c, const HostTensor& t, const Shape& x, const std::string& role) {
  if (attr_int(c, "block_size", 0) != 0)
    node_error(c, "blocked quantization (block_size) is not supported");
  const int64_t n = t.size();
  if (t.dims.size() > 1) node_error(c, role + " must be a scalar or 1-D, got " + to_string(t.dims));
  if (t.dims.empty() || n == 1) return -1;
  const int axis = normalize_axis(c, attr_int(c, "axis", 1), x.size(), "axis");
  if (n != x[static_cast<size_t>(axis)])
    node_error(c, role + " has " + std::to_string(n) + " entries; axis " + std::to_string(axis) +
                      " of " + to_string(x) + " has " +
                      std::to_string(x[static_cast<size_t>(axis)]));
  return axis;
}

struct QuantParams {
  std::vector<float> scale, zero;  // one entry (per tensor) or one per index of `axis`
  int axis = -1;
  int32_t dtype = TP::UINT8;
  float lo = 0, hi = 255;
  bool any_zero_point() const {
    for (float z : zero)
      if (z != 0.0f) return true;
    return false;
  }
  size_t at(const Shape& x, int64_t flat) const {  // the parameter index of element `flat`
    if (axis < 0) return 0;
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) inner *= x[d];
    return static_cast<size_t>((flat / inner) % x[static_cast<size_t>(axis)]);
  }
};

// Inputs 1 (scale) and 2 (zero point) of QuantizeLinear / DequantizeLinear for an x shaped `x`;
// `dtype` is the quantized type: the zero point's, else the output_dtype attribute's (Quantize
// only), else `fallback` (UINT8 for QuantizeLinear; x's own for DequantizeLinear).
QuantParams quant_params(Importer& im, const NodeCtx& c, const Shape& x, int32_t fallback) {
  QuantParams p;
  const HostTensor& s = im.constant_input(c, 1, "scale");
  if (!s.is_float()) node_error(c, "the scale is " + dtype_name(s.dtype) + ", not FLOAT");
  p.axis = per_axis(c, s, x, "the scale");
  p.scale = s.f;
  for (float v : p.scale)
    if (!(v > 0.0f) || !std::isfinite(v))
      node_error(c, "the scale holds " + std::to_string(v) + "; Kiln takes positive scales");
  p.dtype = fallback;
  if (c.op() == "QuantizeLinear" && attr_int(c, "output_dtype", 0) != 0)
    p.dtype = static_cast<int32_t>(attr_int(c, "output_dtype", 0));
  p.zero.assign(p.scale.size(), 0.0f);
  if (im.has_input(c, 2)) {
    const HostTensor& z = im.constant_input(c, 2, "zero point");
    // One scale for zero points per axis: the unit scale of ConvInteger's and MatMulInteger's
    // expansion (expand_qlinear_ops), whose zero points may run along an axis.
    if (p.scale.size() == 1 && z.size() > 1 && !z.is_float()) {
      p.axis = per_axis(c, z, x, "the zero point");
      p.scale.assign(static_cast<size_t>(z.size()), p.scale[0]);
      p.zero.assign(p.scale.size(), 0.0f);
    }
    if (z.is_float() || z.size() != static_cast<int64_t>(p.scale.size()))
      node_error(c, "the zero point must be an integer tensor shaped like the scale " +
                        to_string(s.dims) + ", got " + dtype_name(z.dtype) + " " +
                        to_string(z.dims));
    p.dtype = z.dtype;
    for (size_t k = 0; k < z.i.size(); ++k) p.zero[k] = static_cast<float>(z.i[k]);
  }
  if (!quantized_range(p.dtype, &p.lo, &p.hi) &&
      !(p.dtype == TP::INT32 && c.op() != "QuantizeLinear"))
    node_error(c, "quantized type " + dtype_name(p.dtype) +
                      " is not supported (Kiln computes UINT8, INT8, UINT16 and INT16; INT32 "
                      "for a constant's DequantizeLinear)");
  return p;
}

// `v` (a scale or zero point) as a constant that broadcasts along `axis` of a rank-`rank`
// tensor: [n, 1, ..., 1], or [1] for one value.
ValueId broadcast_constant(Importer& im, const std::string& name, const std::vector<float>& v,
                           int axis, size_t rank) {
  Shape dims{static_cast<int64_t>(v.size())};
  if (axis >= 0)
    for (size_t d = static_cast<size_t>(axis) + 1; d < rank; ++d) dims.push_back(1);
  return im.add_constant(name, dims, v, logical_layout(dims.size()));
}

}  // namespace

// y = clamp(round_half_even(x / scale) + zero_point, type range). On a constant x the integers
// are computed now (float32 division, as ONNX's reference does); on a graph tensor the graph
// computes x / scale (multiplied by 1 / scale once fused: a result within an ulp of a half may
// round the other way), the rounding, the shift and the clamp, all chain steps.
void convert_quantize_linear(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 3);
  const Shape x = im.input_shape(c, 0);
  const QuantParams p = quant_params(im, c, x, TP::UINT8);
  if (const HostTensor* h = im.host_input(c, 0)) {
    if (!h->is_float())
      node_error(c, "x is " + dtype_name(h->dtype) + "; QuantizeLinear takes FLOAT");
    HostTensor q;
    q.dtype = p.dtype;
    q.dims = h->dims;
    for (int64_t k = 0; k < h->size(); ++k) {
      const size_t i = p.at(h->dims, k);
      const float v = std::nearbyint(h->f[static_cast<size_t>(k)] / p.scale[i]) + p.zero[i];
      q.i.push_back(static_cast<int64_t>(std::isnan(v) ? 0.0f : std::clamp(v, p.lo, p.hi)));
    }
    return im.define_host(c, 0, std::move(q));
  }
  const ValueId in = im.value_input(c, 0);
  if (im.quantized_dtype(in) != 0)
    node_error(c, "x '" + im.input_name(c, 0) + "' is already quantized (" +
                      dtype_name(im.quantized_dtype(in)) + ")");
  const std::string& out = im.output_name(c, 0);
  const ValueId scale = broadcast_constant(im, out + "/scale", p.scale, p.axis, x.size());
  ValueId v = im.emit(c, Binary{BinaryOp::div}, {in, scale}, out + "/scaled", c.name + "/div");
  v = im.emit(c, ElementwiseChain{{ChainStep{ChainStepKind::round, 0, 0}}}, {v}, out + "/rounded",
              c.name + "/round");
  if (p.any_zero_point()) {
    const ValueId zero = broadcast_constant(im, out + "/zero_point", p.zero, p.axis, x.size());
    v = im.emit(c, Binary{BinaryOp::add}, {v, zero}, out + "/shifted", c.name + "/add");
  }
  v = im.emit(c, Clip{p.lo, p.hi}, {v}, out, c.name + "/clip");
  im.mark_quantized(v, p.dtype);
  im.define_value(c, 0, v);
}

namespace {

// DequantizeLinear of a graph tensor by a scale or zero point computed in the graph (those of
// DynamicQuantizeLinear): one value each, subtracted and multiplied as graph tensors.
void dequantize_by_values(Importer& im, const NodeCtx& c, ValueId x, int32_t dtype) {
  for (int i = 1; i <= 2; ++i)
    if (im.has_input(c, i) && num_elements(im.input_shape(c, i)) != 1)
      node_error(c, std::string(i == 1 ? "the scale" : "the zero point") +
                        " is computed in the graph and has " +
                        std::to_string(num_elements(im.input_shape(c, i))) +
                        " values; Kiln takes one there");
  const std::string& out = im.output_name(c, 0);
  ValueId v = x;
  if (im.has_input(c, 2)) {
    ValueId zero;
    if (const HostTensor* z = im.host_input(c, 2)) {
      if (z->dtype != dtype)
        node_error(c, "x is " + dtype_name(dtype) + " but its zero point " + dtype_name(z->dtype));
      zero =
          im.add_constant(out + "/zero_point", {1}, {static_cast<float>(z->i.at(0))}, Layout::any);
    } else {
      zero = im.value_input(c, 2);
      if (im.quantized_dtype(zero) != dtype)
        node_error(c, "the zero point '" + im.input_name(c, 2) + "' is not a " + dtype_name(dtype) +
                          " tensor, as x is");
    }
    v = im.emit(c, Binary{BinaryOp::sub}, {v, zero}, out + "/centered", c.name + "/sub");
  }
  im.define_value(
      c, 0, im.emit(c, Binary{BinaryOp::mul}, {v, im.value_input(c, 1)}, out, c.name + "/mul"));
}

}  // namespace

// y = (x - zero_point) * scale: on constants (quantized weights and biases) now, into a FLOAT
// constant; on a quantized graph tensor as two chain steps.
void convert_dequantize_linear(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 3);
  if (attr_int(c, "output_dtype", TP::FLOAT) != TP::FLOAT)
    node_error(c, "output_dtype " +
                      dtype_name(static_cast<int32_t>(attr_int(c, "output_dtype", 0))) +
                      " is not supported (Kiln computes FLOAT)");
  const Shape x = im.input_shape(c, 0);
  if (const HostTensor* h = im.host_input(c, 0)) {
    if (h->is_float())
      node_error(c, "x is " + dtype_name(h->dtype) + "; DequantizeLinear takes an integer type");
    const QuantParams p = quant_params(im, c, x, h->dtype);
    if (p.dtype != h->dtype)
      node_error(c, "x is " + dtype_name(h->dtype) + " but its zero point " + dtype_name(p.dtype));
    HostTensor f;
    f.dims = h->dims;
    for (int64_t k = 0; k < h->size(); ++k) {
      const size_t i = p.at(h->dims, k);
      f.f.push_back((static_cast<float>(h->i[static_cast<size_t>(k)]) - p.zero[i]) * p.scale[i]);
    }
    return im.define_host(c, 0, std::move(f));
  }
  const ValueId in = im.value_input(c, 0);
  const int32_t dtype = im.quantized_dtype(in);
  if (dtype == 0)
    node_error(c, "x '" + im.input_name(c, 0) +
                      "' is a FLOAT graph tensor; Kiln dequantizes constants and the outputs "
                      "of QuantizeLinear (and of data movement on them)");
  if (!im.host_input(c, 1) || (im.has_input(c, 2) && !im.host_input(c, 2)))
    return dequantize_by_values(im, c, in, dtype);
  const QuantParams p = quant_params(im, c, x, dtype);
  if (p.dtype != dtype)
    node_error(c, "x is " + dtype_name(dtype) + " but its zero point " + dtype_name(p.dtype));
  const std::string& out = im.output_name(c, 0);
  ValueId v = in;
  if (p.any_zero_point()) {
    const ValueId zero = broadcast_constant(im, out + "/zero_point", p.zero, p.axis, x.size());
    v = im.emit(c, Binary{BinaryOp::sub}, {v, zero}, out + "/centered", c.name + "/sub");
  }
  const ValueId scale = broadcast_constant(im, out + "/scale", p.scale, p.axis, x.size());
  im.define_value(c, 0, im.emit(c, Binary{BinaryOp::mul}, {v, scale}, out, c.name + "/mul"));
}

namespace {

std::shared_ptr<::onnx::NodeProto> synthetic(const ::onnx::NodeProto& from, const char* op,
                                             std::vector<std::string> in,
                                             std::vector<std::string> out) {
  auto n = std::make_shared<::onnx::NodeProto>();
  n->set_op_type(op);
  n->set_name(from.name());
  while (!in.empty() && in.back().empty()) in.pop_back();  // trailing optional inputs left out
  for (auto& s : in) n->add_input(std::move(s));
  for (auto& s : out) n->add_output(std::move(s));
  return n;
}

void set_axis(::onnx::NodeProto& n, int64_t axis) {
  auto* a = n.add_attribute();
  a->set_name("axis");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(axis);
}

std::string input_or_empty(const ::onnx::NodeProto& n, int i) {
  return i < n.input_size() ? n.input(i) : std::string();
}

}  // namespace

namespace {

// A quantized op of the default domain, or of onnxruntime's (com.microsoft, as its quantizer
// writes them in the QOperator format), and the float op it stands for: each operand (x,
// x_scale, x_zero_point) dequantized, the float op, its result quantized at (y_scale,
// y_zero_point) when the node has them.
struct QLinearOp {
  const char* type;
  bool microsoft;  // com.microsoft, else the default domain
  const char* float_op;
  std::vector<int> operands;  // input index of each operand's x; its scale and zero point follow
  int y_scale;                // input index of y_scale (y_zero_point follows); -1: float output
  int max_inputs;
};

const std::vector<QLinearOp>& qlinear_ops() {
  static const std::vector<QLinearOp> ops = {
      {"QLinearConv", false, "Conv", {0, 3}, 6, 9},
      {"QLinearMatMul", false, "MatMul", {0, 3}, 6, 8},
      {"QLinearAdd", true, "Add", {0, 3}, 6, 8},
      {"QLinearMul", true, "Mul", {0, 3}, 6, 8},
      {"QLinearGlobalAveragePool", true, "GlobalAveragePool", {0}, 3, 5},
      {"QLinearAveragePool", true, "AveragePool", {0}, 3, 5},
      {"QLinearSigmoid", true, "Sigmoid", {0}, 3, 5},
      {"QLinearLeakyRelu", true, "LeakyRelu", {0}, 3, 5},
      {"QLinearConcat", true, "Concat", {}, 0, 1 << 20},  // y first, then (x, scale, zero)...
      {"QGemm", true, "Gemm", {0, 3}, 7, 9},              // C (INT32) at 6; y optional
  };
  return ops;
}

const QLinearOp* find_qlinear(const ::onnx::NodeProto& p) {
  const bool microsoft = p.domain() == "com.microsoft";
  if (!microsoft && !p.domain().empty() && p.domain() != "ai.onnx") return nullptr;
  for (const QLinearOp& op : qlinear_ops())
    if (p.op_type() == op.type && op.microsoft == microsoft) return &op;
  return nullptr;
}

// A Constant node of one float (value_float) or of one UINT8 zero (value).
std::shared_ptr<::onnx::NodeProto> constant(const ::onnx::NodeProto& from, const std::string& name,
                                            float v, bool uint8_zero = false) {
  auto n = synthetic(from, "Constant", {}, {name});
  auto* a = n->add_attribute();
  if (uint8_zero) {
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(TP::UINT8);
    a->mutable_t()->add_int32_data(0);
  } else {
    a->set_name("value_float");
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  return n;
}

// DynamicQuantizeLinear (UINT8 by the range of x, 0 included), ConvInteger and MatMulInteger,
// in ONNX ops: the scale and zero point computed in the graph; the integer products as float
// products of the integers (exact up to 2^24 per sum), which the model then casts to FLOAT.
// Returns false for any other node.
bool expand_dynamic(const FlatNode& f, std::vector<FlatNode>& out) {
  const ::onnx::NodeProto& p = *f.proto;
  const std::string& type = p.op_type();
  if (!(p.domain().empty() || p.domain() == "ai.onnx") ||
      (type != "DynamicQuantizeLinear" && type != "ConvInteger" && type != "MatMulInteger"))
    return false;
  const NodeCtx c{&p, f.name, f.opset};
  const std::string base = (p.output_size() > 0 ? p.output(0) : f.name) + "/" + type + "/";
  auto add = [&](std::shared_ptr<::onnx::NodeProto> n) {
    out.push_back(
        FlatNode{n, f.name + "/" + n->op_type() + "_" + std::to_string(out.size()), f.opset});
  };
  auto node = [&](const char* op, std::vector<std::string> in, const std::string& o) {
    add(synthetic(p, op, std::move(in), {o}));
    return o;
  };
  add(constant(p, base + "one", 1.0f));
  if (type == "DynamicQuantizeLinear") {
    if (p.input_size() != 1 || p.output_size() < 1 || p.output_size() > 3)
      node_error(c, "expected 1 input and up to 3 outputs");
    auto output = [&](int k, const std::string& fallback) {
      return k < p.output_size() && !p.output(k).empty() ? p.output(k) : base + fallback;
    };
    add(constant(p, base + "zero", 0.0f));
    add(constant(p, base + "qmax", 255.0f));
    add(constant(p, base + "uint8_zero", 0.0f, true));
    auto reduce = [&](const char* op, const std::string& o) {
      auto n = synthetic(p, op, {p.input(0)}, {o});
      auto* a = n->add_attribute();
      a->set_name("keepdims");
      a->set_type(::onnx::AttributeProto::INT);
      a->set_i(0);
      add(std::move(n));
      return o;
    };
    const std::string lo =
        node("Min", {reduce("ReduceMin", base + "min"), base + "zero"}, base + "lo");
    const std::string hi =
        node("Max", {reduce("ReduceMax", base + "max"), base + "zero"}, base + "hi");
    // A range of 0 (x all zeros) takes the scale 1, as onnxruntime's kernel does.
    const std::string range = node("Sub", {hi, lo}, base + "range");
    const std::string scale =
        node("Where",
             {node("Equal", {range, base + "zero"}, base + "empty_range"), base + "one",
              node("Div", {range, base + "qmax"}, base + "range_steps")},
             output(1, "scale"));
    // zero point = saturate(round(0 - lo / scale)), a UINT8 (QuantizeLinear by 1 marks it one).
    std::string zp = node("Neg", {node("Div", {lo, scale}, base + "lo_steps")}, base + "neg_steps");
    zp =
        node("Min",
             {node("Max", {node("Round", {zp}, base + "zp_round"), base + "zero"}, base + "zp_low"),
              base + "qmax"},
             base + "zp_float");
    node("QuantizeLinear", {zp, base + "one", base + "uint8_zero"}, output(2, "zero_point"));
    std::string y =
        node("Round", {node("Div", {p.input(0), scale}, base + "steps")}, base + "rounded");
    y = node("Min",
             {node("Max", {node("Add", {y, zp}, base + "shifted"), base + "zero"}, base + "y_low"),
              base + "qmax"},
             base + "y_float");
    node("QuantizeLinear", {y, base + "one", base + "uint8_zero"}, output(0, "y"));
    return true;
  }
  const bool conv = type == "ConvInteger";
  if (p.input_size() < 2 || p.input_size() > 4 || p.output_size() != 1)
    node_error(c, "expected 2 to 4 inputs and 1 output");
  auto dq = [&](int i, const std::string& o, int64_t axis) {
    std::vector<std::string> in = {p.input(i), base + "one", input_or_empty(p, i + 2)};
    auto n = synthetic(p, "DequantizeLinear", std::move(in), {o});
    if (axis != 1) set_axis(*n, axis);
    add(std::move(n));
    return o;
  };
  // B's zero point per output channel (axis 0) / per column (the last axis).
  auto op = synthetic(p, conv ? "Conv" : "MatMul",
                      {dq(0, base + "a", 1), dq(1, base + "b", conv ? 0 : -1)}, {p.output(0)});
  for (const auto& a : p.attribute()) *op->add_attribute() = a;
  add(std::move(op));
  return true;
}

}  // namespace

std::vector<FlatNode> expand_qlinear_ops(std::vector<FlatNode> nodes) {
  std::vector<FlatNode> out;
  out.reserve(nodes.size());
  for (FlatNode& f : nodes) {
    const ::onnx::NodeProto& p = *f.proto;
    if (expand_dynamic(f, out)) continue;
    const QLinearOp* q = find_qlinear(p);
    if (!q) {
      out.push_back(std::move(f));
      continue;
    }
    const NodeCtx c{&p, f.name, f.opset};
    const std::string type = p.op_type();
    std::vector<int> operands = q->operands;
    if (type == "QLinearConcat") {
      if (p.input_size() < 5 || (p.input_size() - 2) % 3 != 0)
        node_error(c,
                   "expected y_scale, y_zero_point and a (x, scale, zero point) triple per input");
      for (int i = 2; i < p.input_size(); i += 3) operands.push_back(i);
    }
    const int min_inputs = type == "QGemm" ? 6 : q->y_scale + 2;
    if (p.input_size() < min_inputs || p.input_size() > q->max_inputs || p.output_size() != 1)
      node_error(c, "expected " + std::to_string(min_inputs) + " to " +
                        std::to_string(std::min(q->max_inputs, 64)) + " inputs and 1 output, got " +
                        std::to_string(p.input_size()) + " and " + std::to_string(p.output_size()));
    // Values of the expansion are named after the node's output, which is unique.
    const std::string base = p.output(0) + "/" + type + "/";
    auto add = [&](std::shared_ptr<::onnx::NodeProto> n, const std::string& suffix) {
      out.push_back(FlatNode{std::move(n), f.name + "/" + suffix, f.opset});
    };
    bool trans_b = false;
    auto op = synthetic(p, q->float_op, {}, {});
    for (const auto& a : p.attribute()) {
      if (a.name() == "channels_last") {
        if (a.i() != 0) node_error(c, "channels_last=1 is not supported");
        continue;
      }
      if (a.name() == "transB") trans_b = a.i() != 0;
      *op->add_attribute() = a;
    }
    for (size_t k = 0; k < operands.size(); ++k) {
      const int i = operands[k];
      const std::string name = base + "x" + std::to_string(k);
      auto dq = synthetic(p, "DequantizeLinear",
                          {p.input(i), p.input(i + 1), input_or_empty(p, i + 2)}, {name});
      // Weights per output channel: a convolution's axis 0, a matrix product's column axis.
      if (k == 1 && type == "QLinearConv") set_axis(*dq, 0);
      if (k == 1 && (type == "QLinearMatMul" || type == "QGemm")) set_axis(*dq, trans_b ? 0 : -1);
      add(std::move(dq), "dequantize_" + std::to_string(k));
      op->add_input(name);
    }
    const int bias = type == "QLinearConv" ? 8 : type == "QGemm" ? 6 : -1;
    if (bias >= 0 && !input_or_empty(p, bias).empty()) {  // INT32 at x_scale * w_scale
      add(synthetic(p, "Mul", {p.input(1), p.input(4)}, {base + "bias_scale"}), "bias_scale");
      auto b =
          synthetic(p, "DequantizeLinear", {p.input(bias), base + "bias_scale"}, {base + "bias"});
      set_axis(*b, type == "QGemm" ? -1 : 0);
      add(std::move(b), "dequantize_bias");
      op->add_input(base + "bias");
    }
    const bool quantized_out = !input_or_empty(p, q->y_scale).empty();
    op->add_output(quantized_out ? base + "y" : p.output(0));
    add(std::move(op), "compute");
    if (quantized_out)
      add(synthetic(p, "QuantizeLinear",
                    {base + "y", p.input(q->y_scale), input_or_empty(p, q->y_scale + 1)},
                    {p.output(0)}),
          "quantize");
  }
  return out;
}

void convert_expanded(Importer& /*im*/, const NodeCtx& c) {
  node_error(c,
             "is expanded into DequantizeLinear, its float op and QuantizeLinear before "
             "conversion; this node was not");
}

// Data movement that carries a quantized tensor's integers unchanged, and Resize / Upsample
// (requantize_resized).
bool moves_quantized(const std::string& op) {
  static const char* const kOps[] = {"Reshape",      "Flatten",      "Squeeze",       "Unsqueeze",
                                     "Transpose",    "Slice",        "Split",         "Concat",
                                     "Identity",     "MaxPool",      "GlobalMaxPool", "Tile",
                                     "DepthToSpace", "SpaceToDepth", "Resize",        "Upsample"};
  for (const char* o : kOps)
    if (op == o) return true;
  return false;
}

// A linear or cubic Resize of a quantized tensor interpolates its integers with weights that sum
// to 1, which commutes with dequantizing them; the result is cast back to the integer type as
// ONNX's reference and onnxruntime do: truncated toward zero (floor for the unsigned types,
// floor above zero and ceil below for the signed), then clamped to the type's range (cubic
// overshoots). Nearest moves the integers as they are.
void requantize_resized(Importer& im, const NodeCtx& c, int32_t dtype) {
  if ((c.op() != "Resize" && c.op() != "Upsample") ||
      attr_string(c, "mode", "nearest") == "nearest")
    return;
  float lo = 0, hi = 0;
  if (!quantized_range(dtype, &lo, &hi))
    node_error(c, "cannot resize a " + dtype_name(dtype) + " tensor");
  const std::string& out = im.output_name(c, 0);
  const ValueId v = im.output_value(c, 0);
  if (!v.valid()) return;  // folded: the importer computed no runtime value
  auto step = [&](ChainStepKind kind, const std::string& suffix) {
    return im.emit(c, ElementwiseChain{{ChainStep{kind, 0, 0}}}, {v}, out + "/" + suffix,
                   c.name + "/" + suffix);
  };
  ValueId t = step(ChainStepKind::floor, "floor");
  if (lo < 0) {
    const ValueId negative = step(ChainStepKind::less, "negative");
    im.mark_boolean(negative);
    t = im.emit(c, Where{}, {negative, step(ChainStepKind::ceil, "ceil"), t}, out + "/truncated",
                c.name + "/truncate");
  }
  im.define_value(c, 0, im.emit(c, Clip{lo, hi}, {t}, out + "/requantized", c.name + "/clip"));
}

}  // namespace kiln::graph::onnx
