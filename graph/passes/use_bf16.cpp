// use_bf16: marks the convolutions that run their multiply-adds in bfloat16 (Conv2d::bf16).
// Runs last: the flag is a property of the fused kernel (its pre steps, epilogue and pooling
// stay float32), and the folded weights are the ones rounded.
#include "graph/kernel_spec.h"
#include "graph/passes/passes.h"

namespace kiln::graph {
namespace {

// A convolution whose float32 kernel is Winograd by default (schedules::default_conv_params:
// dense 3x3, stride and dilation 1, 16+ input channels, 13x13+ outputs) and that has at most
// 64 output channels (AMX) or 128 (AVX512_BF16 dot products) stays float32: Winograd does
// 2.25-4x fewer multiply-adds. Measured against the float32 Winograd kernel: on AMX,
// ResNet-18's 56x56 64 -> 64 layers 0.68-0.78x (preact_se's 32 -> 16 layers made the whole
// bf16 model slower than float32), its 128- and 256-channel layers 1.7-2.1x; with dot
// products on Zen 4, its 64-channel layers 0.69-0.75x, its 128-channel ones 0.78-0.93x and
// ResNet-50's 0.83-0.85x, the 256-channel ones 1.07-1.14x.
// Stride-2 layers, Winograd by default in float32 too, go bf16: their F(2x2) does 1.44x fewer
// multiply-adds, under the dot products' 2x (not measured against each other).
bool winograd_beats_bf16(const Graph& g, const Node& n, const Conv2d& c, bool amx) {
  const Shape& w = g.value(n.inputs[1]).shape;        // HWIO [Kh, Kw, Ci, Co]
  const Shape& out = g.value(n.outputs[0]).shape;     // NHWC [N, H, W, Co]
  return w[0] == 3 && w[1] == 3 && c.stride_h == 1 && c.stride_w == 1 && c.dilation_h == 1 &&
         c.dilation_w == 1 && w[2] >= 16 && w[3] <= (amx ? 64 : 128) && out[1] >= 13 &&
         out[2] >= 13;
}

}  // namespace

Graph use_bf16(const Graph& input, bool amx) {
  Graph g = input;
  std::vector<Node> nodes = g.nodes();
  for (Node& n : nodes) {
    auto* c = std::get_if<Conv2d>(&n.op);
    if (!c || c->bf16 || !bf16_conv_refusal(g, n).empty()) continue;
    if (winograd_beats_bf16(g, n, *c, amx)) {
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
