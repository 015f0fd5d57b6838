// split_grouped_convs: a 3x3 stride-1 convolution of two to four wide groups (ResNeSt's
// split-attention convolution: radix 2, 32-256 input channels per group) becomes one dense
// convolution per group, each reading its group's channels (a Slice) and writing its part of
// the output (a Concat). Each group is then a dense layer, which takes the Winograd schedule
// (F(4x4) multiplies 4x fewer times than the direct grouped schedule can), and the memory plan
// makes the Slices views of the input and has the convolutions write their parts of the
// Concat in place, so nothing is copied. Many narrow groups (ResNeXt, RegNet) stay one
// convolution: the grouped schedule handles them, and a kernel per group would not pay.
//
// Runs after fuse_epilogues (the activation goes with every group) and before the layout pass.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/passes/passes.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

constexpr int kMaxGroups = 4;
// Channels per group: ResNeSt's narrowest groups have 32 inputs. Narrower groups stay with the
// grouped schedule (its 8-lane form takes RegNet's 24-channel groups); splitting them was not
// measured.
constexpr int64_t kMinGroupChannels = 32;
// The Winograd default's output bound (schedules::default_conv_params).
constexpr int64_t kMinOutputSide = 13;

// Whether node n is a convolution this pass splits, its epilogue a plain activation.
bool splits(const Graph& g, const Node& n) {
  const auto* c = std::get_if<Conv2d>(&n.op);
  if (!c || c->groups < 2 || c->groups > kMaxGroups || n.inputs.size() != 3 ||
      n.outputs.size() != 1 || c->residual || !c->post.empty() || !c->pre.empty() ||
      c->nchw_input || c->pool || c->bf16 || c->expand || c->input_scale || c->resize ||
      c->shortcut || c->stride_h != 1 || c->stride_w != 1 || c->dilation_h != 1 ||
      c->dilation_w != 1)
    return false;
  const Value &x = g.value(n.inputs[0]), &w = g.value(n.inputs[1]), &b = g.value(n.inputs[2]);
  const Value& y = g.value(n.outputs[0]);
  if (x.layout != Layout::nchw || x.shape.size() != 4 || w.layout != Layout::oihw ||
      !w.is_constant() || !b.is_constant() || y.shape.size() != 4)
    return false;
  const FilterDims f = filter_dims(w.shape, w.layout);
  return f.kh == 3 && f.kw == 3 && f.ci >= kMinGroupChannels &&
         f.co / c->groups >= kMinGroupChannels && y.shape[2] >= kMinOutputSide &&
         y.shape[3] >= kMinOutputSide;
}

}  // namespace

Graph split_grouped_convs(const Graph& input) {
  Graph g = input;
  std::vector<Node> nodes;
  for (const Node& n : input.nodes()) {
    if (!splits(input, n)) {
      nodes.push_back(n);
      continue;
    }
    const Conv2d& c = std::get<Conv2d>(n.op);
    const Value x = g.value(n.inputs[0]), w = g.value(n.inputs[1]), b = g.value(n.inputs[2]);
    const Value y = g.value(n.outputs[0]);
    const FilterDims f = filter_dims(w.shape, w.layout);
    const int64_t ci = f.ci, co = f.co / c.groups;  // per group
    const size_t group_weights = static_cast<size_t>(co * ci * f.kh * f.kw);
    std::vector<ValueId> parts;
    for (int i = 0; i < c.groups; ++i) {
      const std::string tag = "/group" + std::to_string(i);
      const ValueId in = g.add_value(
          Value{x.name + tag, {x.shape[0], ci, x.shape[2], x.shape[3]}, x.dtype, Layout::nchw});
      nodes.push_back(Node{
          n.name + tag + "_input",
          Slice{
              {0, i * ci, 0, 0}, {x.shape[0], (i + 1) * ci, x.shape[2], x.shape[3]}, {1, 1, 1, 1}},
          {n.inputs[0]},
          {in},
          {"slice (the group's input channels)"}});
      Value wi{w.name + tag, {co, ci, f.kh, f.kw}, w.dtype, Layout::oihw};
      wi.data = std::make_shared<const std::vector<float>>(
          w.data->begin() + static_cast<std::ptrdiff_t>(i * group_weights),
          w.data->begin() + static_cast<std::ptrdiff_t>((i + 1) * group_weights));
      Value bi{b.name + tag, {co}, b.dtype, b.layout};
      bi.data = std::make_shared<const std::vector<float>>(b.data->begin() + i * co,
                                                           b.data->begin() + (i + 1) * co);
      const ValueId part = g.add_value(
          Value{y.name + tag, {y.shape[0], co, y.shape[2], y.shape[3]}, y.dtype, y.layout});
      Conv2d dense = c;
      dense.groups = 1;
      Node conv{n.name + tag,
                dense,
                {in, g.add_value(std::move(wi)), g.add_value(std::move(bi))},
                {part},
                n.computes};
      conv.computes.push_back("group " + std::to_string(i + 1) + " of " + std::to_string(c.groups) +
                              " as a dense convolution");
      nodes.push_back(std::move(conv));
      parts.push_back(part);
    }
    nodes.push_back(
        Node{n.name, Concat{1}, parts, n.outputs, {"concat (the groups' outputs, in place)"}});
  }
  g.rebuild(std::move(nodes));
  return g;
}

}  // namespace kiln::graph
