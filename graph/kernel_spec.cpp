// Lowering an optimized graph to kernel specs, and printing each spec as a task description.
#include "graph/kernel_spec.h"

#include <sstream>

namespace kiln::graph {
namespace {

TensorDesc desc(const Graph& g, ValueId v) {
  const Value& x = g.value(v);
  return {v, x.name, x.shape, x.layout, x.dtype};
}

[[noreturn]] void unsupported(const Node& n, const std::string& why) {
  throw Error(std::string(op_name(n.op)) + " node '" + n.name + "': " + why);
}

std::string pair_or_one(int a, int b) {
  return a == b ? std::to_string(a) : std::to_string(a) + "x" + std::to_string(b);
}

std::string epilogue_line(const Activation& a) {
  if (a.is_identity()) return "none, out = acc + b'";
  if (a.is_relu()) return "relu, out = max(0, acc + b')";
  if (a.is_relu6()) return "relu6, out = min(6, max(0, acc + b'))";
  std::ostringstream s;
  s << to_string(a) << ", out = min(" << a.hi << ", max(" << a.lo << ", acc + b'))";
  return s.str();
}

std::string describe_conv(const ConvKernelSpec& k) {
  std::ostringstream s;
  s << "kernel: ";
  for (size_t i = 0; i < k.computes.size(); ++i) s << (i ? " + " : "") << k.computes[i];
  s << "\n";
  s << "input:  " << k.input.name << ", shape [N, H, W, C] = " << to_string(k.input.shape)
    << " (NHWC), " << to_string(k.input.dtype) << "\n";
  s << "weight: " << k.weights.name << ", shape [Kh, Kw, Ci, Co] = "
    << to_string(k.weights.shape) << " (HWIO: Co innermost, the vectorized dimension); bias "
    << k.bias.name << ", shape [Co] = " << to_string(k.bias.shape) << "\n";
  s << "output: " << k.output.name << ", shape [N, Ho, Wo, Co] = " << to_string(k.output.shape)
    << " (NHWC), " << to_string(k.output.dtype) << "\n";
  const bool symmetric = k.pad_top == k.pad_left && k.pad_top == k.pad_bottom &&
                         k.pad_top == k.pad_right;
  s << "conv:   stride " << pair_or_one(k.stride_h, k.stride_w) << ", padding ";
  if (symmetric) {
    s << k.pad_top;
  } else {
    s << "[top " << k.pad_top << ", left " << k.pad_left << ", bottom " << k.pad_bottom
      << ", right " << k.pad_right << "]";
  }
  s << ", dilation " << pair_or_one(k.dilation_h, k.dilation_w) << "\n";
  s << "epilogue: " << epilogue_line(k.activation) << "\n";
  return s.str();
}

}  // namespace

bool conv_epilogue_supported(const Activation& a) {
  return a.is_identity() || a.is_relu() || a.is_relu6();
}

std::vector<KernelSpec> lower_to_kernels(const Graph& g) {
  std::vector<KernelSpec> kernels;
  for (const Node& n : g.nodes()) {
    if (const auto* c = std::get_if<Conv2d>(&n.op)) {
      const Value& x = g.value(n.inputs[0]);
      if (x.layout != Layout::nhwc)
        unsupported(n, "the convolution kernels take NHWC input, this one is " +
                           std::string(to_string(x.layout)) + " (run convert_to_nhwc)");
      if (!g.value(n.inputs[1]).is_constant() || !g.value(n.inputs[2]).is_constant())
        unsupported(n, "weights and bias must be constants");
      if (!conv_epilogue_supported(c->activation))
        unsupported(n, "no kernel implements the epilogue " + to_string(c->activation));
      ConvKernelSpec k;
      k.name = n.name;
      k.computes = n.computes;
      k.input = desc(g, n.inputs[0]);
      k.weights = desc(g, n.inputs[1]);
      k.bias = desc(g, n.inputs[2]);
      k.output = desc(g, n.outputs[0]);
      k.stride_h = c->stride_h;
      k.stride_w = c->stride_w;
      k.pad_top = c->pad_top;
      k.pad_left = c->pad_left;
      k.pad_bottom = c->pad_bottom;
      k.pad_right = c->pad_right;
      k.dilation_h = c->dilation_h;
      k.dilation_w = c->dilation_w;
      k.activation = c->activation;
      kernels.push_back(std::move(k));
    } else if (const auto* t = std::get_if<LayoutTransform>(&n.op)) {
      if (t->from != Layout::nchw || t->to != Layout::nhwc)
        unsupported(n, "only NCHW -> NHWC transforms have a kernel");
      kernels.push_back(LayoutKernelSpec{n.name, desc(g, n.inputs[0]), desc(g, n.outputs[0])});
    } else {
      unsupported(n, "no standalone kernel for this op yet; it runs only when fused into a "
                     "convolution (or folded, for BatchNorm)");
    }
  }
  return kernels;
}

std::string describe(const KernelSpec& k) {
  if (const auto* c = std::get_if<ConvKernelSpec>(&k)) return describe_conv(*c);
  const auto& t = std::get<LayoutKernelSpec>(k);
  return "kernel: layout_transform (NCHW -> NHWC)\ninput:  " + t.input.name + ", shape " +
         to_string(t.input.shape) + " (NCHW), fp32\noutput: " + t.output.name + ", shape " +
         to_string(t.output.shape) + " (NHWC), fp32\n";
}

}  // namespace kiln::graph
