// fuse_conv_resize: a Resize that alone reads a convolution's output goes into that convolution
// (Conv2d::resize). A segmentation head ends with a 1x1 classifier convolution, a transform back
// to NCHW and a bilinear upsampling to the input's size; a feature pyramid upsamples a lateral
// convolution by nearest neighbour. Unfused, the convolution's output is written by one kernel,
// re-laid-out by a second and read back by a third; fused, one kernel computes the convolution
// into a buffer of its own and writes only the resized tensor, in NCHW where the Resize read the
// convolution through a layout transform (Conv2d::nchw_output). Runs after fuse_conv_pooling: a
// convolution takes a pooling or a resize, not both.
#include "graph/kernel_spec.h"
#include "graph/passes/passes.h"

namespace kiln::graph {

Graph fuse_conv_resize(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  // Whether value v is read by node `reader` alone (and is no graph output).
  const auto only_reader = [&](ValueId v, size_t reader) {
    return !g.is_graph_output(v) && uses[v.index].size() == 1 && uses[v.index][0].index == reader;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto* resize = std::get_if<Resize>(&nodes[i].op);
    if (!resize || nodes[i].inputs.size() != 1 || nodes[i].outputs.size() != 1) continue;
    const ValueId v = nodes[i].inputs[0];
    const Value& x = g.value(v);
    if (x.shape.size() != 4 || !only_reader(v, i) || !x.producer.valid()) continue;
    // Interpolation reads NCHW (shape inference), so it fuses through the transform to NCHW;
    // a nearest resize reads NHWC where it lies.
    size_t transform = nodes.size();  // none
    ValueId conv_output = v;
    if (x.layout == Layout::nchw) {
      const Node& t = nodes[x.producer.index];
      const auto* lt = std::get_if<LayoutTransform>(&t.op);
      if (!lt || lt->from != Layout::nhwc || lt->to != Layout::nchw || t.inputs.size() != 1 ||
          !only_reader(t.inputs[0], x.producer.index))
        continue;
      transform = x.producer.index;
      conv_output = t.inputs[0];
    } else if (x.layout != Layout::nhwc || resize->mode != ResizeMode::nearest) {
      continue;
    }
    const Value& y = g.value(conv_output);
    const size_t channel_axis = x.layout == Layout::nchw ? 1 : 3;
    if (!y.producer.valid() || !resize_axis_is_identity(*resize, 0, x.shape[0]) ||
        !resize_axis_is_identity(*resize, channel_axis, x.shape[channel_axis]))
      continue;
    Node& conv = nodes[y.producer.index];
    auto* attrs = std::get_if<Conv2d>(&conv.op);
    if (!attrs || attrs->has_tail() || attrs->expand || conv.outputs.size() != 1 ||
        !lowers_to_halide_conv(g, conv))
      continue;
    attrs->resize = *resize;
    attrs->nchw_output = transform != nodes.size();
    conv.outputs[0] = nodes[i].outputs[0];
    if (attrs->nchw_output) {
      conv.computes.insert(conv.computes.end(), nodes[transform].computes.begin(),
                           nodes[transform].computes.end());
      dead[transform] = true;
    }
    conv.computes.insert(conv.computes.end(), nodes[i].computes.begin(), nodes[i].computes.end());
    dead[i] = true;
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
