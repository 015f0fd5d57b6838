// fuse_expand_depthwise: the pointwise expansion of a MobileNet inverted-residual block (1x1
// convolution + activation) goes into the depthwise convolution that alone reads it
// (Conv2d::expand), where expansion_fusion_pays. Unfused, the expansion writes the block's
// widest tensor (6x the channels of its input) and the depthwise convolution reads it back;
// fused, each task of the kernel (a block of channels by a band of rows) computes its
// channels' expanded rows one at a time as its depthwise rows need them, and the expanded
// tensor never leaves the cache. Runs after fuse_conv_pooling (a depthwise convolution with a
// pooling keeps its producer). In bf16 mode (keep_expansions_apart) nothing is fused: a fused
// expansion runs in float32 (the depthwise family has no bf16 form), and on its own it runs
// bf16. MobileNetV2 in bf16 on Zen 4 (AVX512_BF16 dot products, 2 threads, three alternating
// runs): 2.64-2.81 ms fused, 2.12-2.56 apart; on an AMX CPU fused had measured 1.03x faster
// (2.88-2.92 against 2.96-3.01 ms), while in float32 fusing stays 1.02-1.10x faster on Zen 4.
#include "graph/kernel_spec.h"
#include "graph/passes/passes.h"

namespace kiln::graph {
namespace {

// The expansion the pass absorbs: a dense 1x1 stride-1 unpadded NHWC convolution with
// constant HWIO weights, an activation and post steps without inputs (SiLU, HardSwish; no
// residual, affine steps, pre steps, pooling, resize or shortcut, bf16 or input scale).
bool is_pointwise_expansion(const Graph& g, const Node& n) {
  const auto* c = std::get_if<Conv2d>(&n.op);
  if (!c || !lowers_to_halide_conv(g, n) || c->groups != 1 || c->residual || affine_steps(c->post) ||
      !c->pre.empty() || c->nchw_input || c->has_tail() || c->bf16 || c->expand || c->input_scale ||
      n.outputs.size() != 1)
    return false;
  const Value& w = g.value(n.inputs[1]);
  return w.layout == Layout::hwio && w.shape[0] == 1 && w.shape[1] == 1 && c->stride_h == 1 &&
         c->stride_w == 1 && !c->pad_top && !c->pad_left && !c->pad_bottom && !c->pad_right &&
         g.value(n.inputs[0]).layout == Layout::nhwc;
}

}  // namespace

bool expansion_fusion_pays(int64_t input_channels, const Shape& expanded, int stride, int kernel) {
  // Measured on MobileNetV2 (AVX-512, 2 threads; the medians of the block's kernels unfused
  // over fused, three alternating runs; docs/benchmarks.md): stride 2 1.04x (112x112 input),
  // 1.45x (56x56), 1.16x (28x28), 0.98x (14x14): the expanded tensor is 4x the depthwise
  // output, so its round trip is most of the unfused pair's traffic; stride 1 1.01-1.05x at
  // 28x28, 1.01-1.12x at 14x14, but 0.92-1.00x at 7x7 (per row the expansion gets 7-pixel
  // register tiles, where the unfused kernel runs the deep family); at 56x56 first 0.79x,
  // and since (thirty-second session) 1.14x per layer with the model unchanged (2.70 against
  // 2.71 ms, four alternating runs), so it stays apart.
  // EfficientNet's SiLU blocks (2 threads, AVX-512, per-layer medians of three alternating
  // runs): 3x3 stride 2 at 112x112 1.25x, 5x5 stride 2 at 56x56 1.14x, but 5x5 stride 1 at
  // 28x28 0.92-0.99x: each band of rows recomputes the expansion of its window's 4 halo rows.
  // Every task of the fused kernel reads the whole expansion weight matrix again: with
  // Xception's 728 -> 728 (2 MiB) at 14x14 the fused kernel took 1.59 ms in the network (weights
  // from DRAM) against 1.08 for the pair, and alone 1.07 against 1.00; 384 -> 768 (1.1 MiB)
  // 0.96-1.02x alone, 256 -> 512 (0.5 MiB) 0.98-1.05x, 96 -> 576 (216 KiB) 1.04-1.09x. The
  // fusions that paid above have at most 112 x 672 weights (294 KiB).
  const int64_t weight_bytes = input_channels * expanded[3] * int64_t{sizeof(float)};
  const int64_t width = expanded[2], pixels = expanded[1] * expanded[2];
  return weight_bytes <= 512 * 1024 && width >= 14 &&
         (stride >= 2 || (pixels <= 28 * 28 && kernel <= 3));
}

namespace {

enum class Fusion { where_it_pays, everywhere, never };

Graph fuse(const Graph& input, Fusion mode) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& dw = nodes[i];
    auto* c = std::get_if<Conv2d>(&dw.op);
    if (!c || !is_depthwise_conv(g, dw) || !lowers_to_halide_conv(g, dw) || !c->pre.empty() ||
        c->nchw_input || c->has_tail() || c->bf16 || c->expand)
      continue;
    const ValueId v = dw.inputs[0];
    const Value& expanded = g.value(v);
    if (g.is_graph_output(v) || uses[v.index].size() != 1 || !expanded.producer.valid()) continue;
    const Node& e = nodes[expanded.producer.index];
    if (dead[expanded.producer.index] || !is_pointwise_expansion(g, e)) continue;
    const int kernel = static_cast<int>(g.value(dw.inputs[1]).shape[0]);  // HWIO: Kh
    if (mode == Fusion::never) {
      dw.computes.push_back("its 1x1 expansion kept apart in bf16 mode: it runs bf16 on its own, "
                            "float32 fused");
      continue;
    }
    const int64_t input_channels = g.value(e.inputs[0]).shape[3];  // NHWC
    if (mode == Fusion::where_it_pays &&
        !expansion_fusion_pays(input_channels, expanded.shape, c->stride_h, kernel)) {
      dw.computes.push_back("its 1x1 expansion kept apart: " + std::to_string(input_channels) +
                            " -> " + to_string(expanded.shape) + " at stride " +
                            std::to_string(c->stride_h) + " measured slower fused");
      continue;
    }
    c->expand = std::get<Conv2d>(e.op).activation;
    c->expand_post = std::get<Conv2d>(e.op).post;
    dw.inputs[0] = e.inputs[0];
    dw.inputs.push_back(e.inputs[1]);
    dw.inputs.push_back(e.inputs[2]);
    std::string expansion;
    for (const std::string& step : e.computes) expansion += (expansion.empty() ? "" : " + ") + step;
    std::vector<std::string> computes = {"1x1 expansion (" + expansion + ")"};
    computes.insert(computes.end(), dw.computes.begin(), dw.computes.end());
    dw.computes = std::move(computes);
    dead[expanded.producer.index] = true;
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace

Graph fuse_expand_depthwise(const Graph& g) { return fuse(g, Fusion::where_it_pays); }
Graph fuse_expand_depthwise_everywhere(const Graph& g) { return fuse(g, Fusion::everywhere); }
Graph keep_expansions_apart(const Graph& g) { return fuse(g, Fusion::never); }

}  // namespace kiln::graph
