// fuse_pooling_into_conv: the other way round, a pooling whose output alone feeds a 1x1
// convolution goes into that convolution as the pooling of its input (Conv2d::pool_first): the
// pooling branch of Inception blocks (3x3/s1/p1 average pooling, then a 1x1 projection) and of
// GoogLeNet's (the same with a max pooling), a ResNet-D shortcut (2x2/s2 average pooling, then a
// 1x1). Such a pooling reads a wide tensor (a block's concatenated output) and writes one as wide
// for the convolution to read back once; fused, the kernel pools its input as it stages it and
// the pooled tensor is never stored. The pooling costs kernel_h * kernel_w additions per pooled
// element against the convolution's output-channel count of multiply-adds. 1x1 convolutions
// only: a larger window reads each pooled element once per tap, and not every schedule stages
// its input once. Runs last of the fusions, so the convolution keeps its epilogue.
#include "graph/kernel_spec.h"
#include "graph/passes/passes.h"

namespace kiln::graph {

Graph fuse_pooling_into_conv(const Graph& input) {
  // Windows summed in one expression (generators::ops::pool2d unrolls up to 25 taps).
  constexpr int kMaxTaps = 25;
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto* pool = std::get_if<Pool2d>(&nodes[i].op);
    if (!pool || nodes[i].inputs.size() != 1 || nodes[i].outputs.size() != 1 ||
        pool->kernel_h * pool->kernel_w > kMaxTaps)
      continue;
    const ValueId pooled = nodes[i].outputs[0];
    const Value& x = g.value(nodes[i].inputs[0]);
    if (x.layout != Layout::nhwc || x.shape.size() != 4 || g.is_graph_output(pooled) ||
        uses[pooled.index].size() != 1)  // read once: as the convolution's input alone
      continue;
    Node& conv = nodes[uses[pooled.index][0].index];
    auto* attrs = std::get_if<Conv2d>(&conv.op);
    if (!attrs || conv.inputs[0] != pooled || !lowers_to_halide_conv(g, conv) || attrs->pool ||
        attrs->resize || attrs->shortcut || attrs->expand || attrs->input_scale ||
        !attrs->pre.empty() || attrs->nchw_input || attrs->groups != 1 || attrs->stride_h != 1 ||
        attrs->stride_w != 1 || attrs->pad_top || attrs->pad_left || attrs->pad_bottom ||
        attrs->pad_right)
      continue;
    const Shape& w = g.value(conv.inputs[1]).shape;  // HWIO
    if (w.size() != 4 || w[0] != 1 || w[1] != 1) continue;
    attrs->pool = *pool;
    attrs->pool_first = true;
    conv.inputs[0] = nodes[i].inputs[0];
    conv.computes.insert(conv.computes.begin(), nodes[i].computes.begin(), nodes[i].computes.end());
    dead[i] = true;
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
