// merge_parallel_convs: an Add of two branches that read the same tensor x, each a convolution of
// x or x itself (perhaps through an unfolded BatchNorm, a per-channel affine map), becomes one
// convolution. Convolution is linear in its weights, so the sum of two convolutions of x with the
// same stride and groups is one convolution whose kernel is the sum of theirs, placed at the taps
// each reads; x itself is a convolution whose kernel is 1 at the tap that reads the output's own
// pixel. RepVGG's training-form block (3x3 + BN, 1x1 + BN, BN of the input, summed) becomes one
// 3x3 convolution, ACNet's 3x3 + 1x3 + 3x1 one 3x3: one kernel instead of three, no branch tensor
// written or read. Runs after fold_batch_norm, which puts the branches' BatchNorms into their
// weights, and before fuse_epilogues, which would make one branch the other's residual.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/passes/passes.h"
#include "graph/passes/pattern_util.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

// A convolution's weight element (co, ci, y, x) in its layout (ci counts within a group).
size_t weight_index(const FilterDims& f, Layout l, int64_t co, int64_t ci, int64_t y, int64_t x) {
  const int64_t i = l == Layout::oihw ? ((co * f.ci + ci) * f.kh + y) * f.kw + x
                                      : ((y * f.kw + x) * f.ci + ci) * f.co + co;
  return static_cast<size_t>(i);
}

// Where a kernel of extent `k` (dilation `d`, leading padding `pad`) sits inside the base's
// window along one axis: the base tap its tap 0 reads, if each of its taps is one of the base's.
std::optional<int64_t> tap_offset(int64_t base_k, int base_d, int base_pad, int64_t k, int d, int pad) {
  if (k > 1 && d != base_d) return std::nullopt;
  const int64_t shift = base_pad - pad;
  if (shift < 0 || shift % base_d != 0) return std::nullopt;
  const int64_t offset = shift / base_d;
  if (offset + k > base_k) return std::nullopt;
  return offset;
}

class Merger {
 public:
  explicit Merger(const Graph& input) : g_(input), nodes_(g_.nodes()), dead_(nodes_.size(), false) {
    uses_ = g_.consumers();
    producer_.assign(g_.values().size(), SIZE_MAX);
    for (size_t i = 0; i < nodes_.size(); ++i)
      for (ValueId o : nodes_[i].outputs) producer_[o.index] = i;
  }

  Graph run() {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const auto* add = std::get_if<Binary>(&nodes_[i].op);
      if (!add || add->op != BinaryOp::add || nodes_[i].inputs.size() != 2) continue;
      const ValueId a = nodes_[i].inputs[0], b = nodes_[i].inputs[1];
      if (a == b || g_.value(a).shape != g_.value(nodes_[i].outputs[0]).shape ||
          g_.value(b).shape != g_.value(a).shape)
        continue;
      // Either operand may be the convolution that the other is added into.
      if (!merge(i, a, b)) merge(i, b, a);
    }
    g_.rebuild(std::move(nodes_), dead_);
    return std::move(g_);
  }

 private:
  // The plain convolution (nothing fused into it yet, constant weights and bias) that produces
  // v for the Add `reader` alone.
  std::optional<size_t> branch_conv(ValueId v, size_t reader) const {
    const size_t p = producer_[v.index];
    if (p == SIZE_MAX || g_.is_graph_output(v) || uses_[v.index].size() != 1 ||
        uses_[v.index][0].index != reader)
      return std::nullopt;
    const auto* c = std::get_if<Conv2d>(&nodes_[p].op);
    if (!c || !c->activation.is_identity() || c->residual || !c->post.empty() || !c->pre.empty() ||
        c->nchw_input || c->pool || c->bf16 || c->expand || c->input_scale || c->resize || c->shortcut ||
        nodes_[p].inputs.size() != 3)
      return std::nullopt;
    for (size_t k = 1; k < 3; ++k)
      if (!g_.value(nodes_[p].inputs[k]).is_constant()) return std::nullopt;
    return p;
  }

  // v as a per-channel affine map of x (x itself, or a BatchNorm of x with constant parameters
  // that the Add `reader` alone reads): scale and shift per channel, and the BatchNorm's node.
  struct Affine {
    patterns::ChannelAffine map;
    std::optional<size_t> node;
  };
  std::optional<Affine> affine_of(ValueId v, ValueId x, size_t reader, int64_t channels) const {
    const auto n = static_cast<size_t>(channels);
    if (v == x) return Affine{{std::vector<double>(n, 1.0), std::vector<double>(n, 0.0)}, std::nullopt};
    const size_t p = producer_[v.index];
    if (p == SIZE_MAX || g_.is_graph_output(v) || uses_[v.index].size() != 1 ||
        uses_[v.index][0].index != reader || nodes_[p].inputs.empty() || nodes_[p].inputs[0] != x)
      return std::nullopt;
    std::optional<patterns::ChannelAffine> a = patterns::batch_norm_affine(g_, nodes_[p], channels);
    if (!a) return std::nullopt;
    return Affine{std::move(*a), p};
  }

  // Adds the Add's operand `other` into the convolution producing `v`; false if it cannot.
  bool merge(size_t add, ValueId v, ValueId other) {
    const std::optional<size_t> base = branch_conv(v, add);
    if (!base) return false;
    const Node& conv = nodes_[*base];
    const auto& attrs = std::get<Conv2d>(conv.op);
    const ValueId x = conv.inputs[0];
    const Value& w = g_.value(conv.inputs[1]);
    if (w.layout != Layout::oihw && w.layout != Layout::hwio) return false;
    const FilterDims f = filter_dims(w.shape, w.layout);
    std::vector<double> weights(w.data->begin(), w.data->end());
    std::vector<double> bias(g_.value(conv.inputs[2]).data->begin(), g_.value(conv.inputs[2]).data->end());
    Node merged = conv;
    std::vector<size_t> absorbed;

    if (const std::optional<size_t> second = branch_conv(other, add)) {
      const Node& c2 = nodes_[*second];
      const auto& a2 = std::get<Conv2d>(c2.op);
      const Value& w2 = g_.value(c2.inputs[1]);
      if (c2.inputs[0] != x || w2.layout != w.layout || a2.groups != attrs.groups ||
          a2.stride_h != attrs.stride_h || a2.stride_w != attrs.stride_w)
        return false;
      const FilterDims f2 = filter_dims(w2.shape, w2.layout);
      if (f2.co != f.co || f2.ci != f.ci) return false;
      const auto dy = tap_offset(f.kh, attrs.dilation_h, attrs.pad_top, f2.kh, a2.dilation_h, a2.pad_top);
      const auto dx = tap_offset(f.kw, attrs.dilation_w, attrs.pad_left, f2.kw, a2.dilation_w, a2.pad_left);
      if (!dy || !dx) return false;
      for (int64_t o = 0; o < f.co; ++o)
        for (int64_t i = 0; i < f.ci; ++i)
          for (int64_t y = 0; y < f2.kh; ++y)
            for (int64_t xx = 0; xx < f2.kw; ++xx)
              weights[weight_index(f, w.layout, o, i, y + *dy, xx + *dx)] +=
                  (*w2.data)[weight_index(f2, w2.layout, o, i, y, xx)];
      const std::vector<float>& b2 = *g_.value(c2.inputs[2]).data;
      for (int64_t o = 0; o < f.co; ++o) bias[o] += b2[o];
      merged.computes.insert(merged.computes.end(), c2.computes.begin(), c2.computes.end());
      merged.computes.push_back("add (convolutions merged)");
      absorbed.push_back(*second);
    } else {
      // x (or its affine map) is the convolution with one tap per channel, at the tap reading
      // the output's own pixel: stride 1, Co == Ci, and that tap inside the window.
      if (attrs.stride_h != 1 || attrs.stride_w != 1 || g_.value(x).shape != g_.value(v).shape ||
          f.co != f.ci * attrs.groups || attrs.pad_top % attrs.dilation_h != 0 ||
          attrs.pad_left % attrs.dilation_w != 0)
        return false;
      const int64_t cy = attrs.pad_top / attrs.dilation_h, cx = attrs.pad_left / attrs.dilation_w;
      if (cy >= f.kh || cx >= f.kw) return false;
      const std::optional<Affine> a = affine_of(other, x, add, f.co);
      if (!a) return false;
      for (int64_t o = 0; o < f.co; ++o) {
        weights[weight_index(f, w.layout, o, o % f.ci, cy, cx)] += a->map.scale[o];
        bias[o] += a->map.shift[o];
      }
      merged.computes.push_back(a->node ? "batchnorm of the input (merged)" : "the input (merged)");
      if (a->node) absorbed.push_back(*a->node);
    }

    Value wv{w.name + "+", w.shape, w.dtype, w.layout};
    wv.data = std::make_shared<const std::vector<float>>(weights.begin(), weights.end());
    const Value& bv0 = g_.value(conv.inputs[2]);
    Value bv{bv0.name + "+", bv0.shape, bv0.dtype, bv0.layout};
    bv.data = std::make_shared<const std::vector<float>>(bias.begin(), bias.end());
    merged.inputs[1] = g_.add_value(std::move(wv));
    merged.inputs[2] = g_.add_value(std::move(bv));
    merged.outputs = nodes_[add].outputs;
    // The merged node takes the Add's place: its inputs (x and constants) exist there, and a
    // later Add reading its output sees it as a convolution.
    nodes_[add] = std::move(merged);
    for (ValueId o : nodes_[add].outputs) producer_[o.index] = add;
    dead_[*base] = true;
    for (size_t k : absorbed) dead_[k] = true;
    return true;
  }

  Graph g_;
  std::vector<Node> nodes_;
  std::vector<bool> dead_;
  std::vector<std::vector<NodeId>> uses_;
  std::vector<size_t> producer_;
};

}  // namespace

Graph merge_parallel_convs(const Graph& input) { return Merger(input).run(); }

}  // namespace kiln::graph
