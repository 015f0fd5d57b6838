// Lowering an optimized graph to kernel specs, and printing each spec as a task description.
#include "graph/kernel_spec.h"

#include "graph/op_kind.h"

#include <sstream>

namespace kiln::graph {
namespace {

// A rank-0 tensor reaches the kernels as one element of shape [1]: the same bytes, and a shape
// every builder indexes (broadcasting a [1] operand is broadcasting a scalar).
TensorDesc desc(const Graph& g, ValueId v) {
  const Value& x = g.value(v);
  return {v, x.name, x.shape.empty() ? Shape{1} : x.shape, x.layout, x.dtype};
}

std::string pair_or_one(int a, int b) {
  return a == b ? std::to_string(a) : std::to_string(a) + "x" + std::to_string(b);
}

std::string epilogue_line(const Activation& a, bool residual) {
  const std::string sum = residual ? "acc + b' + residual" : "acc + b'";
  if (a.is_identity()) return "none, out = " + sum;
  if (a.is_relu()) return "relu, out = max(0, " + sum + ")";
  if (a.is_relu6()) return "relu6, out = min(6, max(0, " + sum + "))";
  std::ostringstream s;
  s << to_string(a) << ", out = min(" << a.hi << ", max(" << a.lo << ", " << sum << "))";
  return s.str();
}

// For an input stored inside a larger tensor (TensorDesc::strides); empty for a dense one.
std::string strides_note(const TensorDesc& t) {
  return t.strides.empty() ? "" : ", read at strides " + to_string(t.strides) + " (a slice of a larger tensor)";
}

std::string describe_conv(const ConvKernelSpec& k) {
  std::ostringstream s;
  s << "kernel: ";
  for (size_t i = 0; i < k.computes.size(); ++i) s << (i ? " + " : "") << k.computes[i];
  s << "\n";
  if (k.nchw_input)
    s << "input:  " << k.input.name << ", shape [N, C, H, W] = " << to_string(k.input.shape)
      << " (NCHW, read in place of a layout transform), " << to_string(k.input.dtype) << "\n";
  else
    s << "input:  " << k.input.name << ", shape [N, H, W, C] = " << to_string(k.input.shape)
      << " (NHWC), " << to_string(k.input.dtype) << strides_note(k.input) << "\n";
  s << "weight: " << k.weights.name
    << (k.depthwise ? ", shape [Kh, Kw, 1, C] = "
                    : k.groups > 1 ? ", shape [Kh, Kw, Ci / groups, Co] = " : ", shape [Kh, Kw, Ci, Co] = ")
    << to_string(k.weights.shape)
    << (k.depthwise ? " (depthwise: one filter per channel, C innermost)"
                    : " (HWIO: Co innermost, the vectorized dimension)")
    << "; bias " << k.bias.name << ", shape [Co] = " << to_string(k.bias.shape) << "\n";
  s << "output: " << k.output.name
    << (k.nchw_output ? ", shape [N, Co, Ho, Wo] = " : ", shape [N, Ho, Wo, Co] = ")
    << to_string(k.output.shape) << (k.nchw_output ? " (NCHW), " : " (NHWC), ")
    << to_string(k.output.dtype) << "\n";
  if (!k.unmerged_output.empty())
    s << "rows:   merged: the image is " << to_string(k.unmerged_output)
      << " (NHWC); a pointwise convolution computes the same on its rows read as longer ones\n";
  const bool symmetric = k.pad_top == k.pad_left && k.pad_top == k.pad_bottom &&
                         k.pad_top == k.pad_right;
  s << "conv:   " << (k.groups > 1 && !k.depthwise ? "groups " + std::to_string(k.groups) + ", " : "")
    << "stride " << pair_or_one(k.stride_h, k.stride_w) << ", padding ";
  if (symmetric) {
    s << k.pad_top;
  } else {
    s << "[top " << k.pad_top << ", left " << k.pad_left << ", bottom " << k.pad_bottom
      << ", right " << k.pad_right << "]";
  }
  s << ", dilation " << pair_or_one(k.dilation_h, k.dilation_w) << "\n";
  if (k.residual)
    s << "residual: " << k.residual->name << ", shape " << to_string(k.residual->shape)
      << " (NHWC)" << strides_note(*k.residual) << ", added before the epilogue\n";
  s << "epilogue: " << epilogue_line(k.activation, k.residual.has_value()) << "\n";
  if (!k.post.empty()) {
    s << "then:    ";
    for (size_t i = 0; i < k.post.size(); ++i) s << (i ? ", " : " ") << to_string(k.post[i].kind);
    s << " (in registers)\n";
  }
  if (k.shortcut)
    s << "shortcut: " << k.shortcut->name << ", shape " << to_string(k.shortcut->shape)
      << strides_note(*k.shortcut) << ", added after the epilogue (in registers)\n";
  if (!k.pre.empty()) {
    s << "prologue:";
    for (size_t i = 0; i < k.pre.size(); ++i) s << (i ? ", " : " ") << to_string(k.pre[i].kind);
    s << " (on the input, as the kernel stages it; then the zero padding)\n";
  }
  if (k.pool && pools_before_conv(k))
    s << "pooling: " << op_name(Op{*k.pool}) << " " << op_attributes(Op{*k.pool}) << " of the input"
      << (k.pre.empty() ? "" : " (after the prologue)")
      << (k.pool_first ? ", before the convolution (as in the graph)"
                       : ", before the convolution (they commute: a 1x1 window and a linear "
                         "epilogue)")
      << ", in the same kernel, as it stages its input: the convolution runs on the "
      << to_string(conv_input_nhwc(k)) << " pooled input, never stored\n";
  else if (k.pool)
    s << "pooling: " << op_name(Op{*k.pool}) << " " << op_attributes(Op{*k.pool}) << " of the convolution's "
      << to_string(conv_output_nhwc(k)) << " output, in the same kernel "
      << (pool_reaches_below(k)
              ? "(its last windows reach the padding below: the convolution computed whole first)\n"
              : "(the wide CPU schedule computes it a band of rows at a time, never stored whole)\n");
  if (k.resize)
    s << "resize: " << op_attributes(Op{*k.resize}) << " of the convolution's "
      << to_string(conv_output_nhwc(k)) << " output" << (k.nchw_output ? " as NCHW" : "")
      << ", in the same kernel (the convolution computed whole first, in a buffer of its own)\n";
  if (k.expand)
    s << "expansion: the input is computed in the kernel as a 1x1 convolution of " << k.input.name << " by "
      << k.expand_weights->name << " " << to_string(k.expand_weights->shape) << " (HWIO) + bias "
      << k.expand_bias->name << ", then " << to_string(*k.expand) << ": " << to_string(conv_input_nhwc(k))
      << ", a few rows at a time on CPUs, never stored whole\n";
  if (k.input_scale)
    s << "input scale: the input multiplied per image and channel by " << k.input_scale->name << " "
      << to_string(k.input_scale->shape) << " (a squeeze-and-excitation block's excitation), "
      << "folded into the weights per image\n";
  if (k.bf16)
    s << "precision: bf16 multiply-adds (input and weights rounded to bfloat16, to nearest even; "
      << "float32 sums and epilogue)\n";
  if (k.max_winograd_tile != 4)
    s << "winograd: " << (k.max_winograd_tile ? "F(2x2, 3x3) at most" : "none (direct only)")
      << ", capped by the model's output check\n";
  return s.str();
}

}  // namespace

bool conv_epilogue_supported(const Activation& a) {
  return a.is_identity() || a.is_relu() || a.is_relu6();
}

namespace {

// Depthwise: one input and one output channel per group (no channel multiplier).
bool is_depthwise(const Graph& g, const Node& n, const Conv2d& c) {
  const Value& x = g.value(n.inputs[0]);
  // With an expansion the convolution reads its output, not x (Conv2d::expand).
  const int64_t channels =
      c.expand ? g.value(n.inputs[c.first_expand_input()]).shape[3] : x.shape[3];
  return c.groups > 1 && x.layout == Layout::nhwc && c.groups == channels &&
         c.groups == g.value(n.outputs[0]).shape[3];
}

// NHWC (or an NCHW input read in place, Conv2d::nchw_input) with constant weights and bias:
// what every Halide convolution kernel takes.
bool nhwc_constant_conv(const Graph& g, const Node& n) {
  const auto* c = std::get_if<Conv2d>(&n.op);
  const Layout input = c && c->nchw_input ? Layout::nchw : Layout::nhwc;
  return g.value(n.inputs[0]).layout == input && g.value(n.inputs[1]).is_constant() &&
         g.value(n.inputs[2]).is_constant();
}

// The convolutions codegen takes, with a residual and post steps: dense, grouped or depthwise,
// NHWC, with constant weights and bias.
bool generatable_conv(const Graph& g, const Node& n, const Conv2d&) { return nhwc_constant_conv(g, n); }

bool halide_conv(const Graph& g, const Node& n, const Conv2d& c) {
  return generatable_conv(g, n, c) && conv_epilogue_supported(c.activation);
}

// `cold_weights`: the model's constants take more than kColdWeightBytes (the same for every
// convolution of the graph: lower_to_kernels counts them once).
ConvKernelSpec conv_spec(const Graph& g, const Node& n, const Conv2d& c, bool cold_weights) {
  ConvKernelSpec k;
  k.depthwise = is_depthwise(g, n, c);
  k.groups = c.groups;
  k.name = n.name;
  k.computes = n.computes;
  k.input = desc(g, n.inputs[0]);
  k.weights = desc(g, n.inputs[1]);
  k.constant_weights = g.value(n.inputs[1]).is_constant();
  k.bias = desc(g, n.inputs[2]);
  if (c.residual) k.residual = desc(g, n.inputs[3]);
  k.output = desc(g, n.outputs[0]);
  k.stride_h = c.stride_h;
  k.stride_w = c.stride_w;
  k.pad_top = c.pad_top;
  k.pad_left = c.pad_left;
  k.pad_bottom = c.pad_bottom;
  k.pad_right = c.pad_right;
  k.dilation_h = c.dilation_h;
  k.dilation_w = c.dilation_w;
  k.activation = c.activation;
  k.post = c.post;
  for (size_t i = c.first_post_input(); i < c.first_pre_input(); ++i) k.post_params.push_back(desc(g, n.inputs[i]));
  k.pre = c.pre;
  k.nchw_input = c.nchw_input;
  k.pool = c.pool;
  k.pool_first = c.pool_first;
  k.resize = c.resize;
  k.nchw_output = c.nchw_output;
  k.bf16 = c.bf16;
  k.max_winograd_tile = c.max_winograd_tile;
  k.cold_weights = cold_weights;
  for (size_t i = c.first_pre_input(); i < c.first_expand_input(); ++i) k.pre_params.push_back(desc(g, n.inputs[i]));
  if (c.expand) {
    k.expand = c.expand;
    k.expand_post = c.expand_post;
    k.expand_weights = desc(g, n.inputs[c.first_expand_input()]);
    k.expand_bias = desc(g, n.inputs[c.first_expand_input() + 1]);
  }
  if (c.input_scale) k.input_scale = desc(g, n.inputs[c.scale_input()]);
  if (c.shortcut) k.shortcut = desc(g, n.inputs[c.shortcut_input()]);
  return k;
}

}  // namespace

std::vector<KernelSpec> lower_to_kernels(const Graph& g) {
  std::vector<KernelSpec> kernels;
  int64_t constant_bytes = 0;
  for (const Value& v : g.values())
    if (v.is_constant()) constant_bytes += v.size_bytes();
  const bool cold_weights = constant_bytes > kColdWeightBytes;
  for (const Node& n : g.nodes()) {
    const auto* c = std::get_if<Conv2d>(&n.op);
    const auto* t = std::get_if<LayoutTransform>(&n.op);
    if (c && halide_conv(g, n, *c)) {
      kernels.push_back(conv_spec(g, n, *c, cold_weights));
    } else if (t && t->from == Layout::nchw && t->to == Layout::nhwc) {
      kernels.push_back(LayoutKernelSpec{n.name, desc(g, n.inputs[0]), desc(g, n.outputs[0])});
    } else {
      OpKernelSpec k{n.name, n.computes, n.op, {}, desc(g, n.outputs[0])};
      for (ValueId v : n.inputs) k.inputs.push_back(desc(g, v));
      kernels.push_back(std::move(k));
    }
  }
  return kernels;
}

bool is_depthwise_conv(const Graph& g, const Node& n) {
  const auto* c = std::get_if<Conv2d>(&n.op);
  return c && is_depthwise(g, n, *c);
}

bool pool_reaches_below(const ConvKernelSpec& k) {
  if (!k.pool || pools_before_conv(k)) return false;
  const Pool2d& p = *k.pool;
  const int64_t last_row =
      (k.output.shape[1] - 1) * p.stride_h + (p.kernel_h - 1) * p.dilation_h - p.pad_top;
  return last_row >= conv_output_nhwc(k)[1];
}

bool pools_before_conv(const ConvKernelSpec& k) {
  if (k.pool_first) return true;
  if (!k.pool || k.pool->kind != PoolKind::avg || k.depthwise || k.groups != 1 || k.expand ||
      k.nchw_input || k.residual || !k.post.empty() || !k.activation.is_identity())
    return false;
  const Shape& w = k.weights.shape;  // HWIO
  if (w[0] != 1 || w[1] != 1 || k.stride_h != 1 || k.stride_w != 1 || k.pad_top || k.pad_left ||
      k.pad_bottom || k.pad_right)
    return false;
  const Pool2d& p = *k.pool;
  if (p.pad_top || p.pad_left || p.pad_bottom || p.pad_right || p.dilation_h != 1 ||
      p.dilation_w != 1 || p.kernel_h * p.kernel_w > 16)
    return false;
  // Every window whole: ceil_mode may add a last window that reaches past the image.
  const Shape& in = k.input.shape;
  const Shape& out = k.output.shape;
  return (out[1] - 1) * p.stride_h + p.kernel_h <= in[1] &&
         (out[2] - 1) * p.stride_w + p.kernel_w <= in[2];
}

Shape conv_input_nhwc(const ConvKernelSpec& k) {
  const Shape& s = k.input.shape;
  if (k.expand) return {s[0], s[1], s[2], k.expand_weights->shape[3]};
  if (pools_before_conv(k)) return {s[0], k.output.shape[1], k.output.shape[2], s[3]};
  return k.nchw_input ? Shape{s[0], s[2], s[3], s[1]} : s;
}

Shape conv_output_nhwc(const ConvKernelSpec& k) {
  if (!k.resize && (!k.pool || pools_before_conv(k))) return k.output.shape;
  const int64_t channels = k.output.shape[k.nchw_output ? 1 : 3];
  const Shape in = conv_input_nhwc(k);
  const Shape& w = k.weights.shape;  // [Kh, Kw, ., Co]
  const int64_t h = in[1] + k.pad_top + k.pad_bottom - (int64_t{k.dilation_h} * (w[0] - 1) + 1);
  const int64_t wd = in[2] + k.pad_left + k.pad_right - (int64_t{k.dilation_w} * (w[1] - 1) + 1);
  return {in[0], h / k.stride_h + 1, wd / k.stride_w + 1, channels};
}

bool lowers_to_halide_conv(const Graph& g, const Node& n) {
  const auto* c = std::get_if<Conv2d>(&n.op);
  return c && halide_conv(g, n, *c);
}

std::string bf16_conv_refusal(const Graph& g, const Node& n) {
  const auto* c = std::get_if<Conv2d>(&n.op);
  if (!c) return "not a convolution";
  if (!lowers_to_halide_conv(g, n)) return "not a generated NHWC convolution with constant weights";
  if (c->groups != 1) return "grouped or depthwise (bf16 covers dense convolutions)";
  const Value& w = g.value(n.inputs[1]);
  if (w.layout != Layout::hwio) return "weights not HWIO";
  if (c->input_scale) return "scales its input per image (its weights are scaled per call)";
  return "";
}

bool conv_accepts_post_steps(const Graph& g, const Node& n) {
  const auto* c = std::get_if<Conv2d>(&n.op);
  return c && generatable_conv(g, n, *c) && conv_epilogue_supported(c->activation) && !c->has_tail();
}

bool is_generated(const KernelSpec& k) {
  if (std::holds_alternative<ConvKernelSpec>(k) || std::holds_alternative<LayoutKernelSpec>(k))
    return true;
  const auto* o = std::get_if<OpKernelSpec>(&k);
  if (!o) return false;
  const bool nhwc_image = o->inputs.size() == 1 && o->inputs[0].layout == Layout::nhwc &&
                          o->inputs[0].shape.size() == 4;
  const Op& op = o->op;
  // Products: a channels-last linear layer (ConvNeXt's MLP, [N, H, W, K] x [K, M], generated
  // as the 1x1 convolution it is), Gemm, and MatMuls whose operands are matrices or batches of
  // them (matmul_to_conv gives a 1-D operand its matrix form).
  if (std::holds_alternative<MatMul>(op))
    return o->inputs[0].shape.size() >= 2 && o->inputs[1].shape.size() >= 2;
  if (std::holds_alternative<Gemm>(op)) return true;  // A and B are matrices, C of rank <= 2
  if (std::holds_alternative<Pool2d>(op)) return nhwc_image;
  if (const auto* gp = std::get_if<GlobalPool>(&op))
    return nhwc_image || (gp->kind == PoolKind::avg && o->inputs[0].shape.size() == 4);
  if (std::holds_alternative<LayoutTransform>(op)) return o->inputs[0].shape.size() == 4;
  if (const auto* t = std::get_if<Transpose>(&op)) return t->perm.size() == o->inputs[0].shape.size();
  if (std::holds_alternative<Reduce>(op)) return true;
  return std::holds_alternative<ElementwiseChain>(op) || std::holds_alternative<Binary>(op) ||
         std::holds_alternative<Reshape>(op) || std::holds_alternative<Transpose>(op) ||
         std::holds_alternative<Concat>(op) || std::holds_alternative<Slice>(op) ||
         std::holds_alternative<Pad>(op) || std::holds_alternative<Softmax>(op) ||
         std::holds_alternative<LayerNorm>(op) || std::holds_alternative<Resize>(op) ||
         std::holds_alternative<Tile>(op) || std::holds_alternative<Where>(op) ||
         std::holds_alternative<GroupNorm>(op) || std::holds_alternative<GridSample>(op) ||
         std::holds_alternative<TopK>(op) || std::holds_alternative<GatherElements>(op) ||
         std::holds_alternative<ScatterElements>(op);
}

std::string not_generated_reason(const KernelSpec& k) {
  const auto* o = std::get_if<OpKernelSpec>(&k);
  if (!o) return "";
  const bool nhwc_input = !o->inputs.empty() && o->inputs[0].layout == Layout::nhwc;
  if (std::holds_alternative<Conv2d>(o->op))
    return nhwc_input ? "its weights or bias are not constants" : "its input is not NHWC";
  if (std::holds_alternative<Pool2d>(o->op) || std::holds_alternative<GlobalPool>(o->op))
    return "its input is not an NHWC image";
  if (std::holds_alternative<MatMul>(o->op)) return "an operand is 1-D";
  if (op_kind(o->op) == OpKind::elementwise) return "a lone elementwise op; the passes make it a chain";
  return "its tensors' ranks or layouts";
}

std::vector<TensorDesc> generated_kernel_arguments(const KernelSpec& k) {
  KILN_CHECK(is_generated(k), "kernel '" + kernel_name(k) + "' is not a generated kernel");
  if (const auto* c = std::get_if<ConvKernelSpec>(&k)) {
    std::vector<TensorDesc> args = {c->input, c->weights, c->bias};
    if (c->residual) args.push_back(*c->residual);
    args.insert(args.end(), c->post_params.begin(), c->post_params.end());
    args.insert(args.end(), c->pre_params.begin(), c->pre_params.end());
    if (c->expand) args.insert(args.end(), {*c->expand_weights, *c->expand_bias});
    if (c->input_scale) args.push_back(*c->input_scale);
    if (c->shortcut) args.push_back(*c->shortcut);
    args.push_back(c->output);
    return args;
  }
  if (const auto* t = std::get_if<LayoutKernelSpec>(&k)) return {t->input, t->output};
  const auto& o = std::get<OpKernelSpec>(k);
  std::vector<TensorDesc> args = o.inputs;
  args.push_back(o.output);
  return args;
}

namespace {

// Hex floats: exact, so equal text is equal maths.
void write_steps(std::ostream& s, const std::vector<ChainStep>& steps) {
  s << "[";
  for (const ChainStep& st : steps)
    s << static_cast<int>(st.kind) << ":" << std::hexfloat << st.a << ":" << st.b << std::defaultfloat << ";";
  s << "]";
}

}  // namespace

std::string kernel_signature(const KernelSpec& k) {
  KILN_CHECK(is_generated(k), "kernel '" + kernel_name(k) + "' is not a generated kernel");
  std::ostringstream s;
  if (const auto* c = std::get_if<ConvKernelSpec>(&k)) {
    s << "Conv2d[" << (c->depthwise ? "dw" : "g") << c->groups << "," << c->stride_h << ","
      << c->stride_w << "," << c->pad_top << "," << c->pad_left << "," << c->pad_bottom << ","
      << c->pad_right << "," << c->dilation_h << "," << c->dilation_w << "," << std::hexfloat
      << c->activation.lo << "," << c->activation.hi << std::defaultfloat
      << (c->residual ? ",residual" : "") << (c->constant_weights ? "" : ",weights=input")
      << (c->schedule.empty() ? "" : ",schedule=" + c->schedule)
      << (c->nchw_input ? ",nchw_input" : "") << (c->bf16 ? ",bf16" : "")
      << (c->max_winograd_tile == 4 ? "" : ",winograd<=" + std::to_string(c->max_winograd_tile));
    if (const std::optional<Pool2d>& p = c->pool)
      s << ",pool=" << static_cast<int>(p->kind) << ":" << p->kernel_h << ":" << p->kernel_w << ":"
        << p->stride_h << ":" << p->stride_w << ":" << p->pad_top << ":" << p->pad_left << ":"
        << p->pad_bottom << ":" << p->pad_right << ":" << p->dilation_h << ":" << p->dilation_w
        << ":" << p->ceil_mode << ":" << p->count_include_pad << (c->pool_first ? ":first" : "");
    if (const std::optional<Resize>& r = c->resize) {
      s << ",resize=" << static_cast<int>(r->mode) << ":" << static_cast<int>(r->coordinates) << ":"
        << static_cast<int>(r->nearest) << ":" << std::hexfloat << r->cubic_a << ":"
        << r->exclude_outside << ":" << r->extrapolation << ":";
      for (float f : r->scales) s << f << ",";
      for (float f : r->roi) s << f << ",";
      s << std::defaultfloat << (c->nchw_output ? "nchw" : "nhwc");
    }
    if (c->expand)
      s << ",expand=" << std::hexfloat << c->expand->lo << ":" << c->expand->hi << std::defaultfloat;
    s << "]";
    if (!c->expand_post.empty()) {  // absent otherwise: older signatures stay as they were
      s << "expand_post";
      write_steps(s, c->expand_post);
    }
    if (c->input_scale) s << "input_scale";
    if (c->shortcut) s << "shortcut";
    write_steps(s, c->post);
    if (!c->pre.empty()) {  // absent otherwise, so kernels without pre steps keep their signature
      s << "pre";
      write_steps(s, c->pre);
    }
  }
  if (std::holds_alternative<LayoutKernelSpec>(k)) s << "LayoutTransform[nchw->nhwc]";
  const auto* op = std::get_if<OpKernelSpec>(&k);
  if (op) s << op_name(op->op);
  if (const auto* ch = op ? std::get_if<ElementwiseChain>(&op->op) : nullptr) {
    write_steps(s, ch->steps);
  } else if (const auto* b = op ? std::get_if<Binary>(&op->op) : nullptr) {
    s << "[" << static_cast<int>(b->op) << "]";
  } else if (const auto* p = op ? std::get_if<Pool2d>(&op->op) : nullptr) {
    s << "[" << static_cast<int>(p->kind) << "," << p->kernel_h << "," << p->kernel_w << ","
      << p->stride_h << "," << p->stride_w << "," << p->pad_top << "," << p->pad_left << ","
      << p->pad_bottom << "," << p->pad_right << "," << p->dilation_h << "," << p->dilation_w << ","
      << p->ceil_mode << "," << p->count_include_pad << "]";
  } else if (const auto* gp = op ? std::get_if<GlobalPool>(&op->op) : nullptr) {
    s << "[" << static_cast<int>(gp->kind) << "]";
  } else if (const auto* gm = op ? std::get_if<Gemm>(&op->op) : nullptr) {
    s << "[" << gm->trans_a << "," << gm->trans_b << "," << std::hexfloat << gm->alpha << ","
      << gm->beta << std::defaultfloat << "]";
  } else if (const auto* t = op ? std::get_if<Transpose>(&op->op) : nullptr) {
    s << "[";
    for (int p : t->perm) s << p << ",";
    s << "]";
  } else if (const auto* c = op ? std::get_if<Concat>(&op->op) : nullptr) {
    s << "[" << c->axis << "]";
  } else if (const auto* sl = op ? std::get_if<Slice>(&op->op) : nullptr) {
    s << "[";
    for (size_t a = 0; a < sl->starts.size(); ++a)
      s << sl->starts[a] << ":" << sl->ends[a] << ":" << sl->steps[a] << ",";
    s << "]";
  } else if (const auto* p = op ? std::get_if<Pad>(&op->op) : nullptr) {
    s << "[";
    for (int64_t v : p->pads) s << v << ",";
    s << std::hexfloat << p->value << std::defaultfloat;
    if (p->mode != PadMode::constant) s << "," << to_string(p->mode);  // constant: as before
    s << "]";
  } else if (const auto* sm = op ? std::get_if<Softmax>(&op->op) : nullptr) {
    s << "[" << sm->axis << "," << sm->coerce_2d << "]";  // the kind is in op_name
  } else if (const auto* rm = op ? std::get_if<Reduce>(&op->op) : nullptr) {
    s << "[";  // the kind is in op_name
    for (int a : rm->axes) s << a << ",";
    s << rm->keepdims;
    if (rm->kind == ReduceKind::argmax_last || rm->kind == ReduceKind::argmin_last) s << ",last";
    s << "]";
  } else if (const auto* tl = op ? std::get_if<Tile>(&op->op) : nullptr) {
    s << "[";
    for (int64_t r : tl->repeats) s << r << ",";
    s << "]";
  } else if (const auto* ln = op ? std::get_if<LayerNorm>(&op->op) : nullptr) {
    s << "[" << ln->axis << "," << std::hexfloat << ln->epsilon << std::defaultfloat << "]";
  } else if (const auto* gn = op ? std::get_if<GroupNorm>(&op->op) : nullptr) {
    s << "[" << gn->groups << "," << std::hexfloat << gn->epsilon << std::defaultfloat << ","
      << gn->residual;
    write_steps(s, gn->post);
    s << "]";
  } else if (const auto* rs = op ? std::get_if<Resize>(&op->op) : nullptr) {
    s << "[" << static_cast<int>(rs->mode) << "," << static_cast<int>(rs->coordinates) << ","
      << static_cast<int>(rs->nearest) << "," << std::hexfloat;
    for (float f : rs->scales) s << f << ",";
    if (rs->mode == ResizeMode::cubic) s << "cubic:" << rs->cubic_a << "," << rs->exclude_outside << ",";
    if (rs->coordinates == ResizeCoordinates::tf_crop_and_resize) {
      s << "roi:";
      for (float f : rs->roi) s << f << ",";
      s << rs->extrapolation << ",";
    }
    s << std::defaultfloat << "]";
  } else if (const auto* lt = op ? std::get_if<LayoutTransform>(&op->op) : nullptr) {
    s << "[" << to_string(lt->from) << "->" << to_string(lt->to) << "]";
  } else if (const auto* tk = op ? std::get_if<TopK>(&op->op) : nullptr) {
    s << "[" << tk->axis << "," << tk->k << "," << tk->largest << "," << tk->indices << "]";
  } else if (const auto* ge = op ? std::get_if<GatherElements>(&op->op) : nullptr) {
    s << "[" << ge->axis << "," << ge->broadcast << "]";
  } else if (const auto* se = op ? std::get_if<ScatterElements>(&op->op) : nullptr) {
    s << "[" << se->axis << "," << to_string(se->reduction) << "]";
  } else if (const auto* gs = op ? std::get_if<GridSample>(&op->op) : nullptr) {
    s << "[" << to_string(gs->mode) << "," << to_string(gs->padding) << "," << gs->align_corners
      << "]";
  }
  for (const TensorDesc& t : generated_kernel_arguments(k)) {
    s << " " << to_string(t.shape) << to_string(t.layout) << to_string(t.dtype);
    if (!t.strides.empty()) s << "@" << to_string(t.strides);
  }
  return s.str();
}

std::string schedule_signature(const KernelSpec& k) {
  const auto* c = std::get_if<ConvKernelSpec>(&k);
  if (!c || c->max_winograd_tile == 4) return kernel_signature(k);
  ConvKernelSpec uncapped = *c;
  uncapped.max_winograd_tile = 4;
  return kernel_signature(uncapped);
}

const std::string& kernel_name(const KernelSpec& k) {
  return std::visit([](const auto& s) -> const std::string& { return s.name; }, k);
}

std::string describe(const KernelSpec& k) {
  if (const auto* c = std::get_if<ConvKernelSpec>(&k)) return describe_conv(*c);
  if (const auto* o = std::get_if<OpKernelSpec>(&k)) {
    std::string s = "kernel: ";
    for (size_t i = 0; i < o->computes.size(); ++i) s += (i ? " + " : "") + o->computes[i];
    s += is_generated(k) ? " (Halide, generated for these shapes)\n" : " (no kernel: " + not_generated_reason(k) + ")\n";
    for (const TensorDesc& in : o->inputs)
      s += "input:  " + in.name + ", shape " + to_string(in.shape) +
           (in.layout == Layout::any ? "" : std::string(" (") + to_string(in.layout) + ")") +
           strides_note(in) + "\n";
    s += "output: " + o->output.name + ", shape " + to_string(o->output.shape) +
         (o->output.layout == Layout::any ? "" : std::string(" (") + to_string(o->output.layout) + ")") +
         "\n";
    return s;
  }
  const auto& t = std::get<LayoutKernelSpec>(k);
  return "kernel: layout_transform (NCHW -> NHWC)\ninput:  " + t.input.name + ", shape " +
         to_string(t.input.shape) + " (NCHW), fp32\noutput: " + t.output.name + ", shape " +
         to_string(t.output.shape) + " (NHWC), fp32\n";
}

}  // namespace kiln::graph
