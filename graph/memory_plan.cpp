// plan_arena: greedy by size, each buffer at the lowest offset that does not collide with an
// already placed buffer whose live interval intersects its own.
#include "graph/memory_plan.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "graph/kernel_spec.h"

namespace kiln::graph {

const ArenaBuffer* ArenaPlan::find(ValueId v) const {
  for (const ArenaBuffer& b : buffers)
    if (b.value == v) return &b;
  return nullptr;
}

const ArenaAlias* ArenaPlan::find_alias(ValueId v) const {
  for (const ArenaAlias& a : aliases)
    if (a.value == v) return &a;
  return nullptr;
}

bool ArenaPlan::elides(NodeId n) const {
  for (const ArenaAlias& a : aliases)
    if (a.node == n) return true;
  return false;
}

namespace {

// The index of the node that writes each value; -1 for graph inputs and constants.
std::vector<int> producers(const Graph& g) {
  std::vector<int> producer(g.values().size(), -1);
  for (uint32_t i = 0; i < g.num_nodes(); ++i)
    for (ValueId v : g.node(NodeId{i}).outputs) producer[v.index] = static_cast<int>(i);
  return producer;
}

// Whether node n's kernel reads every input through a Halide buffer at whatever constant
// strides the input's TensorDesc gives, so an input may be a slice of a larger tensor.
bool reads_strided_inputs(const Graph& g, const Node& n) {
  return lowers_to_halide_conv(g, n) || std::holds_alternative<ElementwiseChain>(n.op) ||
         std::holds_alternative<Binary>(n.op) || std::holds_alternative<Pool2d>(n.op) ||
         std::holds_alternative<GlobalPool>(n.op) || std::holds_alternative<Concat>(n.op) ||
         std::holds_alternative<MatMul>(n.op) || std::holds_alternative<Transpose>(n.op);
}

// The parts of a split that a Concat takes in order: Slices with unit steps of one tensor,
// cutting only `axis`, the first from 0 and each where the one before ends, together all of the
// tensor. `inputs` from `first` on are the Concat's; returns how many of them form such a run
// (0: none) and sets `whole` to the split tensor.
size_t split_run(const Graph& g, const std::vector<int>& producer, const std::vector<ValueId>& inputs,
                 size_t first, int axis, ValueId* whole) {
  int64_t next = 0;
  size_t count = 0;
  for (size_t j = first; j < inputs.size(); ++j) {
    const int p = producer[inputs[j].index];
    const Node* s = p >= 0 ? &g.node(NodeId{static_cast<uint32_t>(p)}) : nullptr;
    const auto* slice = s ? std::get_if<Slice>(&s->op) : nullptr;
    if (!slice || s->inputs.size() != 1 || (count > 0 && s->inputs[0] != *whole)) break;
    const Shape &from = g.value(s->inputs[0]).shape, &to = g.value(inputs[j]).shape;
    bool ok = from.size() == to.size() && slice->starts.size() == from.size();
    for (size_t a = 0; ok && a < from.size(); ++a)
      ok = static_cast<int>(a) == axis
               ? slice->starts[a] == next && slice->steps[a] == 1
               : slice->starts[a] == 0 && to[a] == from[a];
    if (!ok) break;
    *whole = s->inputs[0];
    next += to[static_cast<size_t>(axis)];
    ++count;
    if (next == from[static_cast<size_t>(axis)]) return count;
  }
  return 0;
}

// Whether node n's kernel writes its output at the strides its TensorDesc gives (a generated
// convolution's output is bound at run time; an NHWC pooling's is compiled for the strides
// planned_kernels gives it), so the output may be a slice of a Concat's.
bool writes_strided_output(const Graph& g, const Node& n) {
  return lowers_to_halide_conv(g, n) ||
         (std::holds_alternative<Pool2d>(n.op) && n.outputs.size() == 1 &&
          g.value(n.outputs[0]).layout == Layout::nhwc);
}

// The Concats whose inputs can all be written in place (see PlanOptions::in_place_concat),
// in node order. An input qualifies when its producer writes strided outputs
// (writes_strided_output, or an earlier Concat along the same axis that is itself in place:
// nested slices, as in a dense block's chain of Concats) and every other reader reads strided
// inputs. So does a run of inputs that split such a tensor into consecutive parts (a CSP
// block's Concat of the two halves of its first convolution and what the bottlenecks made of
// one): the tensor is written in place and the parts, whose Slices copy nothing, are views of
// their places. Each alias is of the outermost tensor, its offset the sum along the shared axis.
std::vector<ArenaAlias> in_place_concats(const Graph& g, const std::vector<int>& producer,
                                         const std::vector<std::vector<NodeId>>& uses) {
  std::vector<ArenaAlias> aliases;
  std::vector<bool> sliced(g.values().size(), false);
  std::vector<int> in_place_axis(g.num_nodes(), ArenaAlias::kWhole);  // of each in-place Concat
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(NodeId{i});
    const auto* concat = std::get_if<Concat>(&n.op);
    if (!concat || n.outputs.size() != 1) continue;
    std::vector<ArenaAlias> mine;
    int64_t offset = 0;
    bool ok = true;
    for (size_t j = 0; ok && j < n.inputs.size(); ++j) {
      ValueId v = n.inputs[j];
      // A run of the parts of a split: the split tensor takes their place, each part a view.
      const size_t parts = split_run(g, producer, n.inputs, j, concat->axis, &v);
      const int p = producer[v.index];
      const Node* from = p >= 0 ? &g.node(NodeId{static_cast<uint32_t>(p)}) : nullptr;
      ok = from && from->outputs.size() == 1 && !g.is_graph_output(v) && !sliced[v.index] &&
           (writes_strided_output(g, *from) || in_place_axis[static_cast<size_t>(p)] == concat->axis);
      for (size_t k = j; k < j + parts; ++k) {  // the parts: read by this Concat or strided
        const ValueId part = n.inputs[k];
        ok = ok && !g.is_graph_output(part) && !sliced[part.index];
        for (NodeId u : uses[part.index]) ok = ok && (u.index == i || reads_strided_inputs(g, g.node(u)));
      }
      for (NodeId u : uses[v.index]) {  // the split tensor: by its parts' Slices
        const bool slice_of_run =
            parts > 0 && std::any_of(n.inputs.begin() + static_cast<std::ptrdiff_t>(j),
                                     n.inputs.begin() + static_cast<std::ptrdiff_t>(j + parts),
                                     [&](ValueId part) { return producer[part.index] == static_cast<int>(u.index); });
        ok = ok && (u.index == i || slice_of_run || reads_strided_inputs(g, g.node(u)));
      }
      for (const ArenaAlias& a : mine) {  // an input used twice
        ok = ok && a.value != v;
        for (size_t k = j; k < j + parts; ++k) ok = ok && a.value != n.inputs[k];
      }
      if (!ok) break;
      mine.push_back({v, n.outputs[0], concat->axis, offset, NodeId{i}});
      for (size_t k = j; k < j + parts; ++k) {
        const Slice& cut = std::get<Slice>(g.node(NodeId{static_cast<uint32_t>(producer[n.inputs[k].index])}).op);
        mine.push_back({n.inputs[k], n.outputs[0], concat->axis,
                        offset + cut.starts[static_cast<size_t>(concat->axis)],
                        NodeId{static_cast<uint32_t>(producer[n.inputs[k].index])}});
      }
      offset += g.value(v).shape[static_cast<size_t>(concat->axis)];
      if (parts > 0) j += parts - 1;
    }
    if (!ok) continue;
    in_place_axis[i] = concat->axis;
    for (const ArenaAlias& m : mine) {
      sliced[m.value.index] = true;
      for (ArenaAlias& a : aliases)  // slices of an input are slices of this output now
        if (a.base == m.value) a.base = m.base, a.offset += m.offset;
    }
    aliases.insert(aliases.end(), mine.begin(), mine.end());
  }
  return aliases;
}

// The element offset at which a Slice's output starts in its input when the output is one
// contiguous run of the input's row-major bytes: unit steps, whole axes after the first cut
// one, single indices before it (q, k and v taken from the leading axis of attention's
// [3, B, H, N, D], the class token cut from [B, 1 + N, C]); -1 otherwise.
int64_t contiguous_slice_offset(const Slice& s, const Shape& from, const Shape& to) {
  if (from.size() != to.size() || s.starts.size() != from.size() || s.steps.size() != from.size())
    return -1;
  size_t cut = from.size();  // the first axis not taken whole
  for (size_t a = 0; a < from.size() && cut == from.size(); ++a)
    if (to[a] != from[a] || s.starts[a] != 0) cut = a;
  if (cut == from.size()) return -1;  // an identity Slice: not worth a special case
  int64_t offset = 0, stride = 1;
  for (size_t a = from.size(); a-- > 0;) {
    if (a > cut && (to[a] != from[a] || s.starts[a] != 0)) return -1;
    if (a < cut && to[a] != 1) return -1;
    if (a == cut && s.steps[a] != 1 && to[a] != 1) return -1;
    offset += s.starts[a] * stride;
    stride *= from[a];
  }
  return offset;
}

// The Reshapes that can be views (see PlanOptions::reshape_views), and the Slices that cut one
// contiguous run of their input (contiguous_slice_offset): each a view of the buffer at the
// root of a chain of them, at the sum of the Slices' offsets. `sliced`: values stored as slices
// of a Concat's output (a Slice's output among them: a part of a split that a Concat takes in
// place).
std::vector<ArenaAlias> reshape_views(const Graph& g, const std::vector<int>& producer,
                                      const std::vector<bool>& sliced) {
  std::vector<ArenaAlias> views;
  std::vector<ValueId> root(g.values().size());
  std::vector<int64_t> offset(g.values().size(), 0);
  for (uint32_t i = 0; i < g.values().size(); ++i) root[i] = ValueId{i};
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(NodeId{i});
    const auto* slice = std::get_if<Slice>(&n.op);
    if ((!std::holds_alternative<Reshape>(n.op) && !slice) || n.inputs.size() != 1 ||
        n.outputs.size() != 1)
      continue;
    const ValueId in = n.inputs[0], out = n.outputs[0];
    if (producer[in.index] < 0 || sliced[in.index]) continue;  // not a buffer of the arena's own
    int64_t start = 0;
    if (slice) {
      if (sliced[out.index] || g.is_graph_output(out)) continue;
      start = contiguous_slice_offset(*slice, g.value(in).shape, g.value(out).shape);
      if (start < 0) continue;
    }
    const ValueId base = root[in.index];
    root[out.index] = base;
    offset[out.index] = offset[in.index] + start;
    views.push_back({out, base, ArenaAlias::kWhole, offset[out.index], NodeId{i}});
  }
  return views;
}

// Whether a Reshape only inserts or removes axes of extent 1 (a Squeeze, an Unsqueeze): the
// other axes keep their order and extents, so any strided layout of the input serves the output.
bool squeezes_only(const Shape& from, const Shape& to) {
  std::vector<int64_t> a, b;
  for (int64_t e : from)
    if (e != 1) a.push_back(e);
  for (int64_t e : to)
    if (e != 1) b.push_back(e);
  return a == b;
}

// The strides of `to` (a Reshape of a tensor at `strides`, squeezes_only): the non-unit axes'
// in order; an axis of extent 1 is never stepped, and takes the stride of the axis inside it.
std::vector<int64_t> squeezed_strides(const Shape& from, const std::vector<int64_t>& strides,
                                      const Shape& to) {
  std::vector<int64_t> kept;
  for (size_t a = 0; a < from.size(); ++a)
    if (from[a] != 1) kept.push_back(strides[a]);
  std::vector<int64_t> out(to.size(), 1);
  size_t next = kept.size();
  for (size_t a = to.size(); a-- > 0;) {
    if (to[a] != 1) {
      out[a] = kept[--next];
    } else if (a + 1 < to.size()) {
      out[a] = out[a + 1];
    }
  }
  return out;
}

// Transposes read in place (see PlanOptions::strided_views): a Transpose that keeps the last
// axis last, of a tensor with a buffer of the arena's own or a chain of Reshapes of one, whose
// output is no graph output and is read only by kernels that read strided inputs or by Slices
// with unit steps and squeezing Reshapes whose outputs are read the same way (attention's heads:
// [B, N, 3, H, D] -> [3, B, H, N, D], then q, k and v sliced and squeezed). Each of those
// values is a strided view of the buffer: its alias carries its strides and element offset, and
// the Transpose, Slices and Reshapes copy nothing. `aliased`: values stored inside another so
// far (a Concat's in-place slices).
std::vector<ArenaAlias> strided_views(const Graph& g, const std::vector<int>& producer,
                                      const std::vector<std::vector<NodeId>>& uses,
                                      const std::vector<bool>& aliased) {
  const auto node_of = [&](ValueId v) -> const Node* {
    const int p = producer[v.index];
    return p < 0 ? nullptr : &g.node(NodeId{static_cast<uint32_t>(p)});
  };
  // A Slice or Reshape that a strided view passes through.
  const auto passes_view = [&](const Node& n) {
    if (n.inputs.size() != 1 || n.outputs.size() != 1) return false;
    const Shape &from = g.value(n.inputs[0]).shape, &to = g.value(n.outputs[0]).shape;
    if (const auto* s = std::get_if<Slice>(&n.op)) {
      if (s->starts.size() != from.size() || s->steps.size() != from.size() ||
          to.size() != from.size())
        return false;
      for (size_t a = 0; a < from.size(); ++a)
        if (s->steps[a] != 1 && to[a] != 1) return false;
      return true;
    }
    return std::holds_alternative<Reshape>(n.op) && squeezes_only(from, to);
  };
  // readable[v]: every reader of v reads it at any strides (reads_strided_inputs), or is a
  // Slice or Reshape that passes a view on to readers of the same kind. Nodes in reverse order:
  // readers come after their inputs.
  std::vector<bool> readable(g.values().size(), false);
  for (uint32_t i = g.num_nodes(); i-- > 0;) {
    const Node& n = g.node(NodeId{i});
    for (ValueId v : n.outputs) {
      bool ok = !g.is_graph_output(v) && !aliased[v.index] && !uses[v.index].empty();
      for (NodeId u : uses[v.index]) {
        const Node& r = g.node(u);
        ok = ok && (reads_strided_inputs(g, r) || (passes_view(r) && readable[r.outputs[0].index]));
      }
      readable[v.index] = ok;
    }
  }
  std::vector<ArenaAlias> views;
  std::vector<int> alias_of(g.values().size(), -1);  // into views
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(NodeId{i});
    if (n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    const ValueId in = n.inputs[0], out = n.outputs[0];
    const Shape &from = g.value(in).shape, &to = g.value(out).shape;
    if (alias_of[in.index] >= 0) {  // a Slice or Reshape of a strided view, or a kernel reading it
      if (!passes_view(n)) continue;
      ArenaAlias a = views[static_cast<size_t>(alias_of[in.index])];
      a.value = out;
      a.node = NodeId{i};
      if (const auto* s = std::get_if<Slice>(&n.op)) {
        for (size_t d = 0; d < from.size(); ++d) a.offset += s->starts[d] * a.strides[d];
      } else {
        a.strides = squeezed_strides(from, a.strides, to);
      }
      alias_of[out.index] = static_cast<int>(views.size());
      views.push_back(std::move(a));
      continue;
    }
    const auto* t = std::get_if<Transpose>(&n.op);
    if (!t || t->perm.size() != from.size() || from.empty() ||
        t->perm.back() != static_cast<int>(from.size()) - 1 || !readable[out.index])
      continue;
    ValueId root = in;  // through Reshapes, to the buffer whose bytes they view
    for (const Node* p = node_of(root); p && std::holds_alternative<Reshape>(p->op) &&
                                        p->inputs.size() == 1 && node_of(p->inputs[0]);
         p = node_of(root))
      root = p->inputs[0];
    // A buffer of its own: not a graph input, not a Concat's slice, not a Slice's output (which
    // reshape_views or slice_views may make a view).
    const Node* made = node_of(root);
    if (!made || std::holds_alternative<Slice>(made->op) || aliased[root.index] ||
        aliased[in.index])
      continue;
    std::vector<int64_t> dense(from.size(), 1);
    for (size_t d = from.size() - 1; d > 0; --d) dense[d - 1] = dense[d] * from[d];
    ArenaAlias a{out, root, ArenaAlias::kStrided, 0, NodeId{i}, {}};
    for (int p : t->perm) a.strides.push_back(dense[static_cast<size_t>(p)]);
    alias_of[out.index] = static_cast<int>(views.size());
    views.push_back(std::move(a));
  }
  return views;
}

// The Slices that can be views (see PlanOptions::slice_views): unit steps and at most one
// axis cut, of a tensor with a buffer of the arena's own or a Reshape's view of one (the layout
// pass's relabels), the output no graph output and read only by kernels that read strided
// inputs. Each alias is of the Slice's input, its offset the start along the cut axis.
// `aliases`: the plan's so far; `aliased`: the values they store inside another.
std::vector<ArenaAlias> slice_views(const Graph& g, const std::vector<int>& producer,
                                    const std::vector<std::vector<NodeId>>& uses,
                                    const std::vector<ArenaAlias>& aliases,
                                    const std::vector<bool>& aliased) {
  std::vector<ArenaAlias> views;
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(NodeId{i});
    const auto* s = std::get_if<Slice>(&n.op);
    if (!s || n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    const ValueId in = n.inputs[0], out = n.outputs[0];
    if (aliased[out.index]) continue;  // a part of a split that a Concat takes in place
    if (aliased[in.index]) {  // only a Reshape's view, not a slice of a Concat
      const auto a = std::find_if(aliases.begin(), aliases.end(),
                                  [&](const ArenaAlias& x) { return x.value == in; });
      if (a == aliases.end() || !a->is_view()) continue;
    }
    if (producer[in.index] < 0 || g.is_graph_output(out)) continue;
    const Shape &from = g.value(in).shape, &to = g.value(out).shape;
    int axis = ArenaAlias::kWhole;
    bool ok = from.size() == to.size() && s->starts.size() == from.size() &&
              s->steps.size() == from.size();
    for (size_t a = 0; ok && a < from.size(); ++a) {
      if (to[a] == from[a] && s->starts[a] == 0) continue;  // the whole axis
      ok = axis == ArenaAlias::kWhole && (s->steps[a] == 1 || to[a] == 1);
      axis = static_cast<int>(a);
    }
    if (!ok || axis == ArenaAlias::kWhole) continue;  // an identity Slice still copies
    for (NodeId u : uses[out.index]) ok = ok && reads_strided_inputs(g, g.node(u));
    if (!ok) continue;
    views.push_back({out, in, axis, s->starts[static_cast<size_t>(axis)], NodeId{i}});
  }
  return views;
}

}  // namespace

ArenaPlan plan_arena(const Graph& g, const PlanOptions& options) {
  const int64_t alignment = options.alignment;
  ArenaPlan plan;
  plan.flat_pointwise = options.flat_pointwise;
  const auto uses = g.consumers();
  const std::vector<int> producer = producers(g);
  if (options.in_place_concat) plan.aliases = in_place_concats(g, producer, uses);
  std::vector<bool> aliased(g.values().size(), false);
  for (const ArenaAlias& a : plan.aliases) aliased[a.value.index] = true;
  if (options.strided_views) {
    const std::vector<ArenaAlias> views = strided_views(g, producer, uses, aliased);
    for (const ArenaAlias& a : views) aliased[a.value.index] = true;
    plan.aliases.insert(plan.aliases.end(), views.begin(), views.end());
  }
  if (options.reshape_views) {
    const std::vector<ArenaAlias> views = reshape_views(g, producer, aliased);
    for (const ArenaAlias& a : views) aliased[a.value.index] = true;
    plan.aliases.insert(plan.aliases.end(), views.begin(), views.end());
  }
  if (options.slice_views) {
    const std::vector<ArenaAlias> views = slice_views(g, producer, uses, plan.aliases, aliased);
    for (const ArenaAlias& a : views) aliased[a.value.index] = true;
    plan.aliases.insert(plan.aliases.end(), views.begin(), views.end());
  }
  const int end = static_cast<int>(g.num_nodes());
  std::vector<size_t> buffer_of(g.values().size(), 0);
  for (int i = 0; i < end; ++i) {
    for (ValueId v : g.node(NodeId{static_cast<uint32_t>(i)}).outputs) {
      if (aliased[v.index]) continue;  // stored in its Concat's output, or a Reshape's or Slice's input
      ArenaBuffer b{v, 0, g.value(v).size_bytes(), i, i};
      for (NodeId u : uses[v.index]) b.last = std::max(b.last, static_cast<int>(u.index));
      if (g.is_graph_output(v)) b.last = end;
      buffer_of[v.index] = plan.buffers.size();
      plan.buffers.push_back(b);
    }
  }
  // A Concat output written in place is alive from its first slice's producer on, and until
  // the last reader of any slice; a buffer viewed by Reshapes or Slices until the last reader of
  // any view.
  for (const ArenaAlias& a : plan.aliases) {
    ValueId root = a.base;  // a Slice's view of a Reshape's view: of the buffer under both
    if (const ArenaAlias* view = plan.find_alias(root)) root = view->base;
    ArenaBuffer& base = plan.buffers[buffer_of[root.index]];
    if (!a.is_view()) base.first = std::min(base.first, producer[a.value.index]);
    for (NodeId u : uses[a.value.index]) base.last = std::max(base.last, static_cast<int>(u.index));
    if (g.is_graph_output(a.value)) base.last = end;
  }
  for (const ArenaBuffer& b : plan.buffers)
    plan.unshared_bytes += (b.bytes + alignment - 1) / alignment * alignment;

  std::vector<size_t> order(plan.buffers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plan.buffers[a].bytes > plan.buffers[b].bytes;
  });
  std::vector<size_t> placed;
  for (size_t idx : order) {
    ArenaBuffer& b = plan.buffers[idx];
    std::vector<const ArenaBuffer*> live;
    for (size_t p : placed) {
      const ArenaBuffer& o = plan.buffers[p];
      if (o.first <= b.last && b.first <= o.last) live.push_back(&o);
    }
    std::sort(live.begin(), live.end(),
              [](const ArenaBuffer* x, const ArenaBuffer* y) { return x->offset < y->offset; });
    int64_t offset = 0;
    for (const ArenaBuffer* o : live) {
      if (offset + b.bytes <= o->offset) break;
      offset = std::max(offset, (o->offset + o->bytes + alignment - 1) / alignment * alignment);
    }
    b.offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + b.bytes);
    placed.push_back(idx);
  }
  plan.arena_bytes = (plan.arena_bytes + alignment - 1) / alignment * alignment;
  return plan;
}

int64_t flat_pointwise_rows(int64_t height, int64_t width, int64_t channels) {
  int64_t best = 1;
  for (int64_t k = 1; k <= height && k * width <= kMaxFlatRow; ++k)
    if (height % k == 0) best = k;
  const int64_t rows = height / best;
  const int64_t tasks = rows * ((channels + 63) / 64);
  if (best == 1 || tasks % 2 == 0 || rows < 3 || tasks >= 16) return rows;
  // A few long rows by few blocks of 64 output channels (the AVX-512 schedules' widest register
  // tile), an odd count of such tasks: of 7, one of 2 threads runs 4. Rows that need not end
  // where the image's do, down to 3/4 of the length, that make an even count: a 28x28 image 8
  // rows of 98 pixels, not 7 of 112. In MobileNetV2 (2 threads, alternating runs, kernel
  // medians) its 28x28 144 -> 32 projection 0.0295 -> 0.0234 ms and 192 -> 32 with the residual
  // 0.040-0.042 -> 0.029-0.031; ResNet-50's 28x28 layers of 128 or 512 channels (tasks even
  // already) measured 1.00-1.035x slower on 98-pixel rows (4x5 tiles for 4x6 and 4x4), so they
  // keep 112.
  const int64_t pixels = height * width, length = best * width;
  for (int64_t l = length - 1; 4 * l >= 3 * length; --l)
    if (pixels % l == 0 && (pixels / l) % 2 == 0) return pixels / l;
  return rows;
}

namespace {

// Whether c is a pointwise convolution whose tensors may be read as longer rows
// (PlanOptions::flat_pointwise): dense, 1x1, stride 1, no padding, NHWC in and out, nothing
// computed in the kernel that depends on where a pixel is (pooling, resize, expansion), every
// image tensor dense (a Concat's slice has its base's strides) and not a constant, and rows to
// merge. Images of at most kMinFlatPixels pixels (7x7) keep their rows: their schedules (deep,
// 4x7 tiles) were measured on those.
bool flattens(const Graph& g, const ArenaPlan& plan, const ConvKernelSpec& c) {
  const Shape& w = c.weights.shape;  // HWIO
  if (c.depthwise || c.groups != 1 || w.size() != 4 || w[0] != 1 || w[1] != 1) return false;
  if (c.stride_h != 1 || c.stride_w != 1 || c.pad_top || c.pad_left || c.pad_bottom || c.pad_right)
    return false;
  if (c.nchw_input || c.nchw_output || c.pool || c.resize || c.expand || c.bf16) return false;
  const auto dense = [&](const TensorDesc& t) {
    if (t.shape.size() != 4 || !t.strides.empty() || g.value(t.value).is_constant()) return false;
    const ArenaAlias* a = plan.find_alias(t.value);
    return !a || a->is_view();
  };
  if (!dense(c.input) || !dense(c.output) || (c.residual && !dense(*c.residual)) ||
      (c.shortcut && !dense(*c.shortcut)))
    return false;
  const Shape& o = c.output.shape;  // NHWC
  return c.input.shape[1] == o[1] && c.input.shape[2] == o[2] && o[1] * o[2] > kMinFlatPixels &&
         flat_pointwise_rows(o[1], o[2], o[3]) != o[1];
}

void flatten(ConvKernelSpec& c) {
  const Shape o = c.output.shape;
  c.unmerged_output = o;
  const int64_t rows = flat_pointwise_rows(o[1], o[2], o[3]);
  for (TensorDesc* t : {&c.input, &c.output, c.residual ? &*c.residual : nullptr,
                        c.shortcut ? &*c.shortcut : nullptr})
    if (t) t->shape = {t->shape[0], rows, o[1] * o[2] / rows, t->shape[3]};
}

}  // namespace

std::vector<KernelSpec> planned_kernels(const Graph& g, const ArenaPlan& plan) {
  std::vector<KernelSpec> lowered = lower_to_kernels(g);
  std::vector<KernelSpec> kernels;
  const auto strided = [&](TensorDesc& t) {
    const ArenaAlias* a = plan.find_alias(t.value);
    if (!a || a->is_view()) return;
    if (a->is_strided()) {
      t.strides = a->strides;
      return;
    }
    const Shape& base = g.value(a->base).shape;
    t.strides.assign(base.size(), 1);
    for (size_t d = base.size() - 1; d > 0; --d) t.strides[d - 1] = t.strides[d] * base[d];
  };
  for (size_t i = 0; i < lowered.size(); ++i) {
    if (plan.elides(NodeId{static_cast<uint32_t>(i)})) continue;
    KernelSpec& k = lowered[i];
    if (auto* c = std::get_if<ConvKernelSpec>(&k)) {
      strided(c->input);
      if (c->residual) strided(*c->residual);
      if (c->shortcut) strided(*c->shortcut);
      for (TensorDesc& t : c->post_params) strided(t);
      if (plan.flat_pointwise && flattens(g, plan, *c)) flatten(*c);
    } else if (auto* o = std::get_if<OpKernelSpec>(&k)) {
      for (TensorDesc& t : o->inputs) strided(t);
      if (std::holds_alternative<Pool2d>(o->op)) strided(o->output);  // writes_strided_output
    }
    kernels.push_back(std::move(k));
  }
  return kernels;
}

int64_t naive_activation_bytes(const Graph& g) {
  int64_t total = 0;
  for (const Node& n : g.nodes())
    for (ValueId v : n.outputs) total += g.value(v).size_bytes();
  return total;
}

std::string describe(const ArenaPlan& plan, const Graph& g) {
  size_t name_width = 6;
  for (const ArenaBuffer& b : plan.buffers) name_width = std::max(name_width, g.value(b.value).name.size());
  const int w = static_cast<int>(name_width) + 2;
  std::ostringstream s;
  s << "  " << std::left << std::setw(w) << "tensor" << std::right << std::setw(12) << "bytes"
    << std::setw(12) << "offset" << "  live (nodes)\n";
  for (const ArenaBuffer& b : plan.buffers) {
    s << "  " << std::left << std::setw(w) << g.value(b.value).name << std::right
      << std::setw(12) << b.bytes << std::setw(12) << b.offset << "  [" << b.first << ", "
      << (b.last == static_cast<int>(g.num_nodes()) ? std::string("end")
                                                     : std::to_string(b.last))
      << "]\n";
  }
  for (const ArenaAlias& a : plan.aliases) {
    s << "  " << std::left << std::setw(w) << g.value(a.value).name << std::right << std::setw(12)
      << g.value(a.value).size_bytes() << "  in place: '" << g.value(a.base).name << "'";
    if (a.is_strided()) {
      s << " strided view from element " << a.offset << ", strides [";
      for (size_t d = 0; d < a.strides.size(); ++d) s << (d ? ", " : "") << a.strides[d];
      s << "] (its " << op_name(g.node(a.node).op) << " copies nothing)\n";
    } else if (a.is_view() && std::holds_alternative<Slice>(g.node(a.node).op))
      s << " viewed from element " << a.offset << " (its Slice copies nothing)\n";
    else if (a.is_view())
      s << " viewed whole" << (a.offset ? " from element " + std::to_string(a.offset) : "")
        << " (its Reshape copies nothing)\n";
    else
      s << " axis " << a.axis << " from " << a.offset << " (its "
        << (std::holds_alternative<Slice>(g.node(a.node).op) ? "Slice" : "Concat")
        << " copies nothing)\n";
  }
  s << "  arena: " << plan.arena_bytes << " bytes (" << plan.unshared_bytes
    << " without reuse)\n";
  return s.str();
}

}  // namespace kiln::graph
