// convert_to_nhwc: the layout decision. Convolution slides over space with channels innermost,
// so the convolution kernels take NHWC, with weights re-laid-out ahead of time to HWIO (and a
// Gemm's transposed constant B stored untransposed, see pretranspose_gemm_weights). Pooling
// windows are generated for NHWC only, so a pool reading an NCHW activation (a graph input, a
// 1-D pool's Reshape) takes it through a transform too. NHWC then spreads from the
// convolutions through every op that works in either layout (pooling, BatchNorm, GroupNorm,
// elementwise, Concat and Pad with their axes remapped, a LayerNorm of whole samples); an op that
// indexes its input in logical (ONNX, row-major) order gets a transform back to NCHW in front of
// it.
//
// Channels-last blocks written with explicit Transposes (ConvNeXt's LayerNorm and MLP run on
// permute(0, 2, 3, 1) of a conv's output, and permute(0, 3, 1, 2) hands the result back) hold
// the same bytes as the NHWC tensors around them: such a Transpose of an NHWC tensor becomes a
// relabel (a Reshape with a layout, which the arena stores in place), and so does the NHWC
// version of a Transpose back, instead of a transform and a transpose that copy twice.
//
// A regrouping of an NHWC tensor's elements, Reshape (splitting each axis into factors),
// Transpose, Reshape (merging adjacent axes) back to an image, is one transpose of its bytes
// too: ShuffleNet's channel shuffle (Reshape to [N, g, C/g, H, W], Transpose(0, 2, 1, 3, 4),
// Reshape back) permutes the channels within each pixel, its bytes [N*H*W, g, C/g] transposed
// to [N*H*W, C/g, g]; DepthToSpace (and the transposed convolutions imported through it) moves
// channel blocks to pixels, [N*H, W, b, b*C'] to [N*H, b, W, b*C']. The bytes are relabelled
// [N, H, W, C], reshaped to the factors in their NHWC order (neighbours that stay neighbours
// merged), transposed, reshaped to the output's NHWC shape and relabelled NHWC. One copy,
// where the logical form would copy three times (a transform to NCHW, the transpose, a
// transform back for the next convolution), and Slice (a Split's outputs) stays NHWC with its
// axes remapped, as does a nearest-neighbour Resize of the image axes.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "graph/passes/passes.h"
#include "graph/reference.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

// NCHW axis -> NHWC axis: [N, C, H, W] is stored as [N, H, W, C].
int nhwc_axis(int logical) {
  static const int map[4] = {0, 3, 1, 2};
  return map[logical];
}

Shape to_nhwc_shape(const Shape& s) { return {s[0], s[2], s[3], s[1]}; }

// An attribute with one entry per axis of a 4-D NCHW tensor, reordered for its NHWC version.
template <typename T>
void to_nhwc_axes(std::vector<T>& per_axis) {
  const std::vector<T> logical = per_axis;
  for (int a = 0; a < 4; ++a)
    per_axis[static_cast<size_t>(nhwc_axis(a))] = logical[static_cast<size_t>(a)];
}

std::vector<float> oihw_to_hwio(const std::vector<float>& w, const FilterDims& f) {
  std::vector<float> out(w.size());
  for (int64_t o = 0; o < f.co; ++o)
    for (int64_t i = 0; i < f.ci; ++i)
      for (int64_t y = 0; y < f.kh; ++y)
        for (int64_t x = 0; x < f.kw; ++x)
          out[((y * f.kw + x) * f.ci + i) * f.co + o] = w[((o * f.ci + i) * f.kh + y) * f.kw + x];
  return out;
}

bool is_activation_4d(const Value& v) { return !v.is_constant() && v.shape.size() == 4; }

// NCHW and NHWC order the elements of an image tensor alike when it has one channel or one
// pixel (a global pool's [N, C, 1, 1] output, a grayscale input): changing its layout is a
// relabel, not a copy.
bool layouts_share_bytes(const ImageDims& d) { return d.c == 1 || d.h * d.w == 1; }

class LayoutRewriter {
 public:
  explicit LayoutRewriter(Graph& g) : g_(g) {}

  std::vector<Node> run() {
    find_regroupings();
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      const Node& n = g_.nodes()[i];
      if (regrouped_.count(i)) continue;  // replaced by its channels-last form
      const auto regrouping = regroupings_.find(i);
      if (regrouping != regroupings_.end() && is_nhwc(n.inputs[0])) {
        regroup_channels_last(n, regrouping->second);
        continue;
      }
      Node copy = n;
      if (std::holds_alternative<Conv2d>(copy.op) || is_image_pool(copy) || is_upsampling(copy)) {
        to_native(copy);
      } else if (relabels_nhwc(copy)) {
        copy.op = Reshape{g_.value(copy.outputs[0]).shape, Layout::nchw};
        copy.computes = {"relabel (NHWC -> channels-last, no copy)"};
      } else if (can_stay_nhwc(copy) || reduces_nhwc(copy)) {
        to_native(copy);
      } else {
        to_logical(copy);
        note_transpose_back(copy);
      }
      out_.push_back(std::move(copy));
    }
    return std::move(out_);
  }

 private:
  bool is_nhwc(ValueId v) const { return g_.value(v).layout == Layout::nhwc; }

  static bool is_perm(const Node& n, const std::vector<int>& perm) {
    const auto* t = std::get_if<Transpose>(&n.op);
    return t && t->perm == perm;
  }

  // A regrouping (see the top of the file): the indices of its Transpose and its last Reshape,
  // keyed by its first Reshape's, and the transpose of the bytes: the NHWC input's bytes as
  // `from` (row-major), permuted by `perm` (output axis i is axis perm[i] of `from`).
  struct Regrouping {
    size_t transpose, reshape_back;
    Shape from;
    std::vector<int> perm;
  };

  // Groups consecutive dims of `parts` into the axes of `whole` (each axis the product of a run
  // of them, dims of 1 joining the run they follow): the axis of each part, or empty if
  // `parts` does not split `whole` that way.
  static std::vector<int> axis_of_parts(const Shape& parts, const Shape& whole) {
    std::vector<int> axis;
    size_t p = 0;
    for (size_t a = 0; a < whole.size(); ++a) {
      int64_t product = 1;
      while (p < parts.size() && parts[p] > 0 && product * parts[p] <= whole[a] &&
             (product < whole[a] || parts[p] == 1)) {
        product *= parts[p++];
        axis.push_back(static_cast<int>(a));
      }
      if (product != whole[a]) return {};
    }
    return p == parts.size() ? axis : std::vector<int>{};
  }

  // The byte transpose of Reshape(split) -> Transpose(perm) -> Reshape(merge) of an NCHW image
  // `x` stored NHWC, to an image stored NHWC; nullopt where split does not factor x's axes or
  // merge does not merge the transposed factors into an image.
  static std::optional<Regrouping> regrouping_of(const Shape& x, const Shape& split,
                                                 const std::vector<int>& perm, const Shape& merged) {
    if (merged.size() != 4 || perm.size() != split.size()) return std::nullopt;
    const std::vector<int> in_axis = axis_of_parts(split, x);
    Shape transposed;
    for (int p : perm) {
      if (p < 0 || static_cast<size_t>(p) >= split.size()) return std::nullopt;
      transposed.push_back(split[static_cast<size_t>(p)]);
    }
    const std::vector<int> out_axis = axis_of_parts(transposed, merged);
    if (in_axis.empty() || out_axis.empty()) return std::nullopt;
    // The factors (dims of `split`) in the order the NHWC bytes hold them, before and after.
    std::vector<int> before, after;
    for (int a : {0, 2, 3, 1}) {
      for (size_t d = 0; d < split.size(); ++d)
        if (in_axis[d] == a && split[d] > 1) before.push_back(static_cast<int>(d));
      for (size_t j = 0; j < perm.size(); ++j)
        if (out_axis[j] == a && transposed[j] > 1) after.push_back(perm[j]);
    }
    // Factors that are neighbours in both orders move together: one axis of the transpose.
    Regrouping r{0, 0, {}, {}};
    std::vector<std::vector<int>> runs;  // runs of `after`, each consecutive in `before`
    for (size_t i = 0; i < after.size(); ++i) {
      const auto at = std::find(before.begin(), before.end(), after[i]) - before.begin();
      if (!runs.empty()) {
        const int last = runs.back().back();
        const auto last_at = std::find(before.begin(), before.end(), last) - before.begin();
        if (at == last_at + 1) {
          runs.back().push_back(after[i]);
          continue;
        }
      }
      runs.push_back({after[i]});
    }
    // The runs in `before` order are the axes of `from`.
    std::vector<size_t> order(runs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    const auto first_at = [&](size_t run) {
      return std::find(before.begin(), before.end(), runs[run].front()) - before.begin();
    };
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return first_at(a) < first_at(b); });
    std::vector<int> axis_of_run(runs.size());
    for (size_t i = 0; i < order.size(); ++i) {
      int64_t extent = 1;
      for (int d : runs[order[i]]) extent *= split[static_cast<size_t>(d)];
      r.from.push_back(extent);
      axis_of_run[order[i]] = static_cast<int>(i);
    }
    for (size_t i = 0; i < runs.size(); ++i) r.perm.push_back(axis_of_run[i]);
    if (r.from.empty()) r.from = {1}, r.perm = {0};
    return r;
  }

  void find_regroupings() {
    const auto uses = g_.consumers();
    const auto& nodes = g_.nodes();
    // The one node that reads v (and v no graph output), or nullptr.
    const auto sole_reader = [&](ValueId v) -> const NodeId* {
      return uses[v.index].size() == 1 && !g_.is_graph_output(v) ? &uses[v.index][0] : nullptr;
    };
    for (size_t i = 0; i < nodes.size(); ++i) {
      const auto* split = std::get_if<Reshape>(&nodes[i].op);
      if (!split || split->layout != Layout::any || nodes[i].inputs.size() != 1 ||
          !is_activation_4d(g_.value(nodes[i].inputs[0])))
        continue;
      const NodeId* t = sole_reader(nodes[i].outputs[0]);
      const auto* transpose = t ? std::get_if<Transpose>(&nodes[t->index].op) : nullptr;
      if (!transpose) continue;
      const NodeId* back = sole_reader(nodes[t->index].outputs[0]);
      const auto* merge = back ? std::get_if<Reshape>(&nodes[back->index].op) : nullptr;
      if (!merge || merge->layout != Layout::any) continue;
      std::optional<Regrouping> r = regrouping_of(g_.value(nodes[i].inputs[0]).shape, split->shape,
                                                  transpose->perm, merge->shape);
      if (!r) continue;
      r->transpose = t->index;
      r->reshape_back = back->index;
      regroupings_.emplace(i, std::move(*r));
    }
  }

  void regroup_channels_last(const Node& first, const Regrouping& r) {
    const Node& transpose = g_.nodes()[r.transpose];
    const Node& back = g_.nodes()[r.reshape_back];
    const Value x = g_.value(first.inputs[0]);  // NHWC: [N, H, W, C]
    const Shape& st = x.shape;
    const Shape& m = std::get<Reshape>(back.op).shape;  // the output, NCHW
    const Shape out = to_nhwc_shape(m);
    Shape to;
    for (int p : r.perm) to.push_back(r.from[static_cast<size_t>(p)]);
    const auto value = [&](const std::string& suffix, const Shape& shape) {
      return g_.add_value(Value{x.name + suffix, shape, x.dtype, logical_layout(shape.size())});
    };
    const ValueId cl = value("_channels_last", st);
    const ValueId grouped = value("_regrouped_in", r.from);
    const ValueId moved = value("_regrouped", to);
    const ValueId merged = value("_regrouped_channels_last", out);
    Node relabel{x.name + "_as_channels_last", Reshape{st, Layout::nchw}, {first.inputs[0]}, {cl},
                 {}};
    relabel.computes = {"relabel (NHWC -> channels-last, no copy)"};
    out_.push_back(std::move(relabel));
    bool identity = true;  // the bytes stay where they are: relabels alone, no copy
    for (size_t i = 0; i < r.perm.size(); ++i) identity = identity && r.perm[i] == static_cast<int>(i);
    if (identity) {
      out_.push_back(Node{back.name + "_channels_last", Reshape{out}, {cl}, {merged}, back.computes});
    } else {
      out_.push_back(Node{first.name, Reshape{r.from}, {cl}, {grouped}, first.computes});
      out_.push_back(Node{transpose.name, Transpose{r.perm}, {grouped}, {moved}, transpose.computes});
      out_.push_back(Node{back.name + "_channels_last", Reshape{out}, {moved}, {merged},
                          back.computes});
    }
    Value& y = g_.value(back.outputs[0]);
    y.shape = out;
    y.layout = Layout::nhwc;
    Node as_nhwc{back.name, Reshape{out, Layout::nhwc}, {merged}, {back.outputs[0]}, {}};
    as_nhwc.computes = {"relabel (channels-last -> NHWC, no copy)"};
    out_.push_back(std::move(as_nhwc));
    regrouped_.insert(r.transpose);
    regrouped_.insert(r.reshape_back);
  }

  // Transpose(0, 2, 3, 1) of an NHWC tensor: the logical [N, H, W, C] tensor it makes is the
  // NHWC tensor's bytes as they are.
  bool relabels_nhwc(const Node& n) const {
    return is_perm(n, {0, 2, 3, 1}) && n.inputs.size() == 1 && is_activation_4d(g_.value(n.inputs[0])) &&
           is_nhwc(n.inputs[0]);
  }

  // Transpose(0, 3, 1, 2) of a logical 4-D tensor P: its NHWC version is P's bytes as they are.
  void note_transpose_back(const Node& n) {
    if (is_perm(n, {0, 3, 1, 2}) && n.inputs.size() == 1 && is_activation_4d(g_.value(n.inputs[0])))
      transposed_back_.emplace(n.outputs[0].index, n.inputs[0]);
  }
  // An NCHW activation whose NHWC version costs nothing more: the bytes of a Transpose back
  // from channels-last, or a transform already made for an earlier consumer. A residual block
  // whose Add reads the NCHW graph input beside a convolution's output: the Add takes the
  // transform made for the first convolution, instead of a transform of the convolution's
  // output back to NCHW and of the Add's output to NHWC for the next convolution, twice a block.
  bool free_nhwc(ValueId v) const {
    return transposed_back_.count(v.index) > 0 || to_nhwc_.count(v.index) > 0;
  }

  // Windowed pooling and global max pooling are generated for NHWC only (a global average of
  // an NCHW tensor is generated as a mean over H and W, so it stays where its input is).
  bool is_image_pool(const Node& n) const {
    const auto* gp = std::get_if<GlobalPool>(&n.op);
    return (std::holds_alternative<Pool2d>(n.op) || (gp && gp->kind == PoolKind::max)) &&
           is_activation_4d(g_.value(n.inputs[0]));
  }

  // A Resize of the image axes alone stays NHWC with its axes remapped. Nearest neighbours (a
  // detector's or U-Net's upsampling) gather whole pixels. Linear and cubic interpolation (an
  // attention block's or a segmentation decoder's upsampling) runs along H and W with the
  // channels in vectors, where NCHW rows of a small image filled them poorly: EfficientFormerV2's
  // bilinear 7x7 -> 14x14 of 1024 channels took 0.11 ms and two layout transforms. It stays
  // NCHW with fewer channels than a vector, or as a graph output (a segmentation head's
  // logits, which the convolution before it writes resized in NCHW: fuse_conv_resize).
  bool is_spatial_resize(const Node& n) const {
    const auto* r = std::get_if<Resize>(&n.op);
    if (!r || r->coordinates == ResizeCoordinates::tf_crop_and_resize || n.inputs.size() != 1 ||
        !is_activation_4d(g_.value(n.inputs[0])))
      return false;
    const Shape& s = g_.value(n.inputs[0]).shape;  // stored NHWC once its producer is
    const int64_t channels = is_nhwc(n.inputs[0]) ? s[3] : s[1];
    if (r->mode != ResizeMode::nearest &&
        (channels < kMinInterpolatedChannels || g_.is_graph_output(n.outputs[0])))
      return false;
    return resize_axis_is_identity(*r, 0, s[0]) && resize_axis_is_identity(*r, 1, channels);
  }
  static constexpr int64_t kMinInterpolatedChannels = 16;

  // Such a Resize that enlarges the image goes NHWC whatever its input's layout: a transform
  // of its NCHW input moves less than one of its output would (EfficientFormerV2's attention
  // output, NCHW from its matrix products, upsampled for an NHWC convolution).
  bool is_upsampling(const Node& n) const {
    return is_spatial_resize(n) && !g_.is_graph_output(n.outputs[0]) &&
           num_elements(g_.value(n.outputs[0]).shape) > num_elements(g_.value(n.inputs[0]).shape);
  }

  // Layout-agnostic ops stay NHWC when every 4-D activation they read already is.
  bool can_stay_nhwc(const Node& n) const {
    // A one-input ElementwiseChain (an imported unary op, gelu) has no per-channel parameters.
    const bool unary_chain = std::holds_alternative<ElementwiseChain>(n.op) && n.inputs.size() == 1;
    // Where broadcasts its three operands as Binary does its two.
    const bool broadcasting = std::holds_alternative<Binary>(n.op) || std::holds_alternative<Where>(n.op);
    // A LayerNorm of every axis but the batch with one-value scale and bias (GroupNorm(1)).
    const bool sample_norm = is_layout_free_layer_norm(g_, n);
    // Its parameters are per channel ([C]) in either layout, as BatchNorm's.
    const bool per_channel_params =
        std::holds_alternative<BatchNorm>(n.op) || std::holds_alternative<GroupNorm>(n.op);
    const bool agnostic =
        op_is_unary(n.op) || unary_chain || broadcasting || sample_norm || per_channel_params ||
        std::holds_alternative<Pool2d>(n.op) || std::holds_alternative<GlobalPool>(n.op) ||
        std::holds_alternative<Concat>(n.op) || std::holds_alternative<Pad>(n.op) ||
        std::holds_alternative<Slice>(n.op) || is_spatial_resize(n);
    if (!agnostic || g_.value(n.outputs[0]).shape.size() != 4) return false;
    bool any_nhwc = false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value& v = g_.value(n.inputs[i]);
      if ((per_channel_params || sample_norm) && i > 0) continue;  // parameters
      if (v.is_constant()) {
        // Only Binary's and Where's broadcast constants can be re-laid-out; at most rank 4.
        if (!broadcasting || v.shape.size() > 4) return false;
        continue;
      }
      if (v.shape.size() != 4) return false;  // a lower-rank runtime operand broadcasts in NCHW
      // Stored NHWC, even with one pixel (a squeeze-and-excitation convolution's output, whose
      // activation then stays in the convolution's epilogue rather than a kernel of its own).
      if (is_nhwc(n.inputs[i])) {
        any_nhwc = true;
        continue;
      }
      // NHWC at no cost (a transposed-back tensor, or one pixel or one channel, such as a
      // squeeze-and-excitation scale reshaped to [N, C, 1, 1]), but no reason on its own.
      if (!free_nhwc(n.inputs[i]) && !layouts_share_bytes(image_dims(v.shape, Layout::nchw)))
        return false;
    }
    return any_nhwc;
  }

  // A reduction of an NHWC image over some of its axes, keeping them (ConvNeXt-V2's global
  // response norm: the L2 norm over H and W, then the mean over C), reduces the NHWC tensor
  // with its axes remapped: the result is an NHWC image too, and the image is never
  // transformed back to NCHW for it. The arg kinds (an index output) stay logical.
  bool reduces_nhwc(const Node& n) const {
    const auto* r = std::get_if<Reduce>(&n.op);
    return r && r->keepdims && !r->axes.empty() && !is_arg_reduce(r->kind) &&
           n.inputs.size() == 1 && is_nhwc(n.inputs[0]) && g_.value(n.outputs[0]).shape.size() == 4;
  }

  // The NHWC version of a 4-D activation: itself if it already is, else one transform
  // (shared by every consumer).
  ValueId nhwc_version(ValueId v) {
    if (is_nhwc(v)) return v;
    auto it = to_nhwc_.find(v.index);
    if (it != to_nhwc_.end()) return it->second;
    const Value src = g_.value(v);
    const ValueId t = g_.add_value(Value{src.name + "_nhwc", to_nhwc_shape(src.shape), src.dtype, Layout::nhwc});
    const auto back = transposed_back_.find(v.index);
    if (back != transposed_back_.end()) {  // the bytes of the Transpose's input, relabelled
      Node n{src.name + "_as_nhwc", Reshape{to_nhwc_shape(src.shape), Layout::nhwc}, {back->second}, {t}, {}};
      n.computes = {"relabel (channels-last -> NHWC, no copy)"};
      out_.push_back(std::move(n));
      return to_nhwc_.emplace(v.index, t).first->second;
    }
    if (layouts_share_bytes(image_dims(src.shape, Layout::nchw))) {
      Node n{src.name + "_as_nhwc", Reshape{to_nhwc_shape(src.shape), Layout::nhwc}, {v}, {t}, {}};
      n.computes = {"relabel (NCHW -> NHWC: one channel or one pixel, no copy)"};
      out_.push_back(std::move(n));
      return to_nhwc_.emplace(v.index, t).first->second;
    }
    Node n{src.name + "_to_nhwc", LayoutTransform{Layout::nchw, Layout::nhwc}, {v}, {t}, {}};
    n.computes = {"layout_transform (NCHW -> NHWC)"};
    out_.push_back(std::move(n));
    return to_nhwc_.emplace(v.index, t).first->second;
  }

  ValueId logical_version(ValueId v) {
    if (!is_nhwc(v)) return v;
    auto it = to_nchw_.find(v.index);
    if (it != to_nchw_.end()) return it->second;
    const Value src = g_.value(v);
    const ImageDims d = image_dims(src.shape, Layout::nhwc);
    const ValueId t = g_.add_value(Value{src.name + "_nchw", image_shape(d, Layout::nchw), src.dtype, Layout::nchw});
    if (layouts_share_bytes(d)) {
      Node n{src.name + "_as_nchw", Reshape{image_shape(d, Layout::nchw), Layout::nchw}, {v}, {t}, {}};
      n.computes = {"relabel (NHWC -> NCHW: one channel or one pixel, no copy)"};
      out_.push_back(std::move(n));
      return to_nchw_.emplace(v.index, t).first->second;
    }
    Node n{src.name + "_to_nchw", LayoutTransform{Layout::nhwc, Layout::nchw}, {v}, {t}, {}};
    n.computes = {"layout_transform (NHWC -> NCHW)"};
    out_.push_back(std::move(n));
    return to_nchw_.emplace(v.index, t).first->second;
  }

  // A broadcast constant of a Binary op, re-laid-out to broadcast against NHWC, or a constant
  // a conv reads as its data.
  ValueId nhwc_constant(ValueId v) {
    auto it = const_nhwc_.find(v.index);
    if (it != const_nhwc_.end()) return it->second;
    const Value src = g_.value(v);
    Shape s4 = src.shape;
    while (s4.size() < 4) s4.insert(s4.begin(), 1);
    const Tensor t = to_layout(Tensor{s4, Layout::nchw, *src.data}, Layout::nhwc);
    Value c{src.name + "_nhwc", t.shape, src.dtype, Layout::nhwc};
    c.data = std::make_shared<const std::vector<float>>(t.data);
    return const_nhwc_.emplace(v.index, g_.add_value(std::move(c))).first->second;
  }

  ValueId hwio_weights(const Node& n) {
    const ValueId wid = n.inputs[1];
    auto it = weights_.find(wid.index);
    if (it != weights_.end()) return it->second;
    const Value w = g_.value(wid);
    if (!w.is_constant())
      throw Error("Conv2d node '" + n.name + "': weights '" + w.name +
                  "' are not a constant; Kiln compiles weights into the model");
    const FilterDims f = filter_dims(w.shape, Layout::oihw);
    Value hw{w.name + "_hwio", filter_shape(f, Layout::hwio), w.dtype, Layout::hwio};
    hw.data = std::make_shared<const std::vector<float>>(oihw_to_hwio(*w.data, f));
    return weights_.emplace(wid.index, g_.add_value(std::move(hw))).first->second;
  }

  void to_native(Node& n) {
    const bool conv = std::holds_alternative<Conv2d>(n.op);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (conv && (i == 1 || i == 2)) continue;  // weights and bias, handled below
      const Value& v = g_.value(n.inputs[i]);
      // A conv's data input or residual may be a constant too (an initializer): re-laid-out
      // ahead of time.
      const bool image_operand = conv && (i == 0 || (i == 3 && std::get<Conv2d>(n.op).residual));
      const bool relayout_constant = std::holds_alternative<Binary>(n.op) ||
                                     std::holds_alternative<Where>(n.op) || image_operand;
      if (is_activation_4d(v)) n.inputs[i] = nhwc_version(n.inputs[i]);
      else if (v.is_constant() && relayout_constant) n.inputs[i] = nhwc_constant(n.inputs[i]);
    }
    if (conv) {
      if (g_.value(n.inputs[1]).layout != Layout::hwio) n.inputs[1] = hwio_weights(n);
    } else if (auto* cat = std::get_if<Concat>(&n.op)) {
      cat->axis = nhwc_axis(cat->axis);
    } else if (auto* rs = std::get_if<Resize>(&n.op)) {
      to_nhwc_axes(rs->sizes);
      to_nhwc_axes(rs->scales);
    } else if (auto* sl = std::get_if<Slice>(&n.op)) {
      to_nhwc_axes(sl->starts);
      to_nhwc_axes(sl->ends);
      to_nhwc_axes(sl->steps);
    } else if (auto* r = std::get_if<Reduce>(&n.op)) {
      for (int& a : r->axes) a = nhwc_axis(a);
      std::sort(r->axes.begin(), r->axes.end());
    } else if (auto* pad = std::get_if<Pad>(&n.op)) {
      std::vector<int64_t> p(8);
      for (int a = 0; a < 4; ++a) {
        p[nhwc_axis(a)] = pad->pads[a];
        p[nhwc_axis(a) + 4] = pad->pads[a + 4];
      }
      pad->pads = p;
    }
    // A convolution that writes its resize NCHW (Conv2d::nchw_output, a graph the passes ran
    // on before) keeps that output.
    const auto* c = std::get_if<Conv2d>(&n.op);
    if (c && c->nchw_output) return;
    Value& out = g_.value(n.outputs[0]);
    if (out.layout != Layout::nhwc) {
      out.shape = to_nhwc_shape(out.shape);
      out.layout = Layout::nhwc;
    }
  }

  void to_logical(Node& n) {
    for (ValueId& v : n.inputs)
      if (is_nhwc(v)) v = logical_version(v);
  }

  Graph& g_;
  std::vector<Node> out_;
  std::map<uint32_t, ValueId> to_nhwc_, to_nchw_, const_nhwc_, weights_;
  std::map<uint32_t, ValueId> transposed_back_;  // Transpose(0, 3, 1, 2) output -> its input
  std::map<size_t, Regrouping> regroupings_;
  std::set<size_t> regrouped_;  // the Transposes and last Reshapes of regroupings made channels-last
};

// A Gemm that reads a constant B transposed (a Linear layer's [N, K] weights) gets B stored as
// [K, N] instead: the kernel then reads B's rows along N in vectors, contiguous, where the
// transposed read would gather. One copy per distinct B; the original goes if nothing else
// reads it (rebuild drops unused values).
void pretranspose_gemm_weights(Graph& g, std::vector<Node>& nodes) {
  std::map<uint32_t, ValueId> transposed;
  for (Node& n : nodes) {
    auto* gm = std::get_if<Gemm>(&n.op);
    if (!gm || !gm->trans_b || !g.value(n.inputs[1]).is_constant()) continue;
    const ValueId b = n.inputs[1];
    auto it = transposed.find(b.index);
    if (it == transposed.end()) {
      const Value& src = g.value(b);
      const int64_t rows = src.shape[0], cols = src.shape[1];  // [N, K]
      std::vector<float> t(src.data->size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = (*src.data)[r * cols + c];
      Value v{src.name + "_t", {cols, rows}, src.dtype, src.layout};
      v.data = std::make_shared<const std::vector<float>>(std::move(t));
      it = transposed.emplace(b.index, g.add_value(std::move(v))).first;
    }
    n.inputs[1] = it->second;
    gm->trans_b = false;
  }
}

}  // namespace

Graph convert_to_nhwc(const Graph& input) {
  Graph g = input;
  std::vector<Node> nodes = LayoutRewriter(g).run();
  // The nodes nothing reads any more (a Transpose whose every reader now takes the relabel of
  // its input).
  const std::vector<bool> dead = unread_nodes(g, nodes);
  pretranspose_gemm_weights(g, nodes);
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
