// fuse_conv_prologues: an ElementwiseChain whose output only a convolution reads, as its input,
// goes into that convolution as its pre steps (Conv2d::pre). In pre-activation networks
// (DenseNet, pre-activation ResNets) every BatchNorm + ReLU before a convolution is such a
// chain: it could not fold (no convolution produces its input alone) and ran as a kernel of its
// own, writing the activated tensor to memory for the convolution to read back. The
// convolution's kernel computes the steps as it stages its input instead. The chain's input
// is then the convolution's input, so a slice of an in-place Concat stays a slice. Then the
// NCHW -> NHWC transform of a network's image input goes into the stem convolution that alone
// reads it (Conv2d::nchw_input): the kernel reads the NCHW input as it stages it. And a
// squeeze-and-excitation block's per-image channel scale goes into the dense convolution that
// alone reads the scaled tensor (Conv2d::input_scale), folded into its weights per image. Runs
// after the epilogue fusions.
#include "graph/kernel_spec.h"
#include "graph/passes/passes.h"

namespace kiln::graph {

namespace {

// Chains into the convolutions that alone read them (Conv2d::pre).
Graph absorb_chains(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto* chain = std::get_if<ElementwiseChain>(&nodes[i].op);
    if (!chain || nodes[i].outputs.size() != 1 || nodes[i].inputs.empty()) continue;
    const ValueId v = nodes[i].outputs[0];
    if (g.is_graph_output(v) || uses[v.index].size() != 1) continue;
    const Value& x = g.value(nodes[i].inputs[0]);
    if (x.layout != Layout::nhwc || x.shape.size() != 4) continue;
    bool constant_params = true;
    for (size_t k = 1; k < nodes[i].inputs.size(); ++k)
      constant_params = constant_params && g.value(nodes[i].inputs[k]).is_constant();
    Node& conv = nodes[uses[v.index][0].index];
    auto* attrs = std::get_if<Conv2d>(&conv.op);
    // Dense and grouped convolutions stage their input once per task; a depthwise one reads
    // each element for every tap and would compute the steps that many times.
    if (!constant_params || !attrs || !attrs->pre.empty() || conv.inputs[0] != v ||
        !lowers_to_halide_conv(g, conv) || is_depthwise_conv(g, conv))
      continue;
    attrs->pre = chain->steps;
    conv.inputs[0] = nodes[i].inputs[0];
    conv.inputs.insert(conv.inputs.end(), nodes[i].inputs.begin() + 1, nodes[i].inputs.end());
    conv.computes.insert(conv.computes.begin(), nodes[i].computes.begin(), nodes[i].computes.end());
    dead[i] = true;
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

// Whether folding a squeeze-and-excitation scale into a convolution's weights costs no more
// than scaling the image: Kh * Kw * Co multiplies (and bytes written) per input channel against
// H * W. RegNetY-800MF's 7x7 stage (torchvision; 784 -> 784 1x1 convolutions, 49 pixels) took
// 0.47-0.52 ms with its weights scaled per call, 2.4 MB of them, at 50-55% of the FMA peak.
bool scaling_weights_pays(const Shape& image, const Value& weights) {
  const Shape& w = weights.shape;  // HWIO [Kh, Kw, Ci, Co] or OIHW [Co, Ci, Kh, Kw]
  const int64_t per_input_channel =
      weights.layout == Layout::hwio ? w[0] * w[1] * w[3] : w[0] * w[2] * w[3];
  return per_input_channel <= image[1] * image[2];
}

// A Mul of an NHWC tensor by a [N, 1, 1, C] one (a squeeze-and-excitation block's scale)
// whose product only a dense convolution reads, as its input, goes into that convolution
// (Conv2d::input_scale): its kernel scales its weights per image instead, and the scaled
// tensor is never written (EfficientNet's and MobileNetV3's blocks, before their projection).
// Only where scaling_weights_pays; elsewhere the Mul stays a kernel of its own.
Graph absorb_scales(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto* mul = std::get_if<Binary>(&nodes[i].op);
    if (!mul || mul->op != BinaryOp::mul || nodes[i].inputs.size() != 2 || nodes[i].outputs.size() != 1)
      continue;
    const ValueId v = nodes[i].outputs[0];
    if (g.is_graph_output(v) || uses[v.index].size() != 1) continue;
    // Which operand is the image and which the scale (either order).
    ValueId x = nodes[i].inputs[0], s = nodes[i].inputs[1];
    auto is_scale_of = [&](ValueId scale, ValueId image) {
      const Value &sv = g.value(scale), &xv = g.value(image);
      return xv.layout == Layout::nhwc && xv.shape.size() == 4 && sv.layout == Layout::nhwc &&
             sv.shape == Shape{xv.shape[0], 1, 1, xv.shape[3]} && xv.shape[1] * xv.shape[2] > 1;
    };
    if (!is_scale_of(s, x)) std::swap(x, s);
    if (!is_scale_of(s, x)) continue;
    Node& conv = nodes[uses[v.index][0].index];
    auto* attrs = std::get_if<Conv2d>(&conv.op);
    if (!attrs || conv.inputs[0] != v || attrs->groups != 1 || !attrs->pre.empty() ||
        attrs->nchw_input || attrs->expand || attrs->bf16 || attrs->input_scale ||
        !lowers_to_halide_conv(g, conv) || is_depthwise_conv(g, conv))
      continue;
    if (!scaling_weights_pays(g.value(x).shape, g.value(conv.inputs[1]))) continue;
    attrs->input_scale = true;
    conv.inputs[0] = x;
    conv.inputs.push_back(s);  // Conv2d::scale_input(): no expansion inputs before it
    conv.computes.insert(conv.computes.begin(), nodes[i].computes.begin(), nodes[i].computes.end());
    dead[i] = true;
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

// The NCHW -> NHWC transform of an image with at most this many channels (a network's RGB or
// grayscale input), read by a convolution alone, is read in place by that convolution: its
// staged input strip is contiguous along x in NCHW, so it loads whole vectors of pixels.
constexpr int64_t kMaxInPlaceNchwChannels = 4;

Graph absorb_input_transforms(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto* t = std::get_if<LayoutTransform>(&nodes[i].op);
    if (!t || t->from != Layout::nchw || t->to != Layout::nhwc || nodes[i].inputs.size() != 1 ||
        nodes[i].outputs.size() != 1)
      continue;
    const ValueId v = nodes[i].outputs[0];
    const Value& x = g.value(nodes[i].inputs[0]);
    if (g.is_graph_output(v) || uses[v.index].size() != 1 || x.shape.size() != 4 ||
        x.shape[1] > kMaxInPlaceNchwChannels)
      continue;
    Node& conv = nodes[uses[v.index][0].index];
    auto* attrs = std::get_if<Conv2d>(&conv.op);
    if (!attrs || attrs->nchw_input || conv.inputs[0] != v || !lowers_to_halide_conv(g, conv) ||
        is_depthwise_conv(g, conv))
      continue;
    attrs->nchw_input = true;
    conv.inputs[0] = nodes[i].inputs[0];
    conv.computes.insert(conv.computes.begin(), nodes[i].computes.begin(), nodes[i].computes.end());
    dead[i] = true;
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace

Graph fuse_conv_prologues(const Graph& input) {
  return absorb_input_transforms(absorb_scales(absorb_chains(input)));
}

}  // namespace kiln::graph
