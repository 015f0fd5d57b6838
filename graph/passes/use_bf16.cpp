// use_bf16: marks the convolutions that run their multiply-adds in bfloat16 (Conv2d::bf16).
// Runs last: the flag is a property of the fused kernel (its pre steps, epilogue and pooling
// stay float32), and the folded weights are the ones rounded.
#include "graph/kernel_spec.h"
#include "graph/passes/passes.h"

namespace kiln::graph {
namespace {

// A convolution whose float32 kernel is Winograd by default (schedules::default_conv_params:
// dense 3x3, stride and dilation 1, 16+ input channels, 13x13+ outputs) and that has at most
// 64 output channels stays float32: Winograd does 2.25-4x fewer multiply-adds, and the bf16
// kernels measured slower there (ResNet-18's 56x56 64 -> 64 layers, AMX: 0.68-0.78x the
// float32 Winograd kernel; preact_se's 32 -> 16 layers made the whole bf16 model slower than
// float32). Wider layers keep bf16: AMX ran ResNet-18's 128- and 256-channel Winograd layers
// 1.7-2.1x faster.
bool winograd_beats_bf16(const Graph& g, const Node& n, const Conv2d& c) {
  const Shape& w = g.value(n.inputs[1]).shape;        // HWIO [Kh, Kw, Ci, Co]
  const Shape& out = g.value(n.outputs[0]).shape;     // NHWC [N, H, W, Co]
  return w[0] == 3 && w[1] == 3 && c.stride_h == 1 && c.stride_w == 1 && c.dilation_h == 1 &&
         c.dilation_w == 1 && w[2] >= 16 && w[3] <= 64 && out[1] >= 13 && out[2] >= 13;
}

}  // namespace

Graph use_bf16(const Graph& input) {
  Graph g = input;
  std::vector<Node> nodes = g.nodes();
  for (Node& n : nodes) {
    auto* c = std::get_if<Conv2d>(&n.op);
    if (!c || c->bf16 || !bf16_conv_refusal(g, n).empty()) continue;
    if (winograd_beats_bf16(g, n, *c)) {
      n.computes.push_back("float32 multiply-adds in bf16 mode: Winograd's are fewer here");
      continue;
    }
    c->bf16 = true;
    n.computes.push_back("bf16 multiply-adds");
  }
  g.rebuild(std::move(nodes));
  return g;
}

}  // namespace kiln::graph
