// Shape inference for every op: the single place that knows how each op maps input shapes to
// output shapes.
#include "graph/shape_inference.h"

#include <algorithm>
#include <cstdlib>

#include "graph/shape_inference_detail.h"

namespace kiln::graph {

namespace shape_detail {

[[noreturn]] void fail(const Node& n, const std::string& what) {
  throw Error(std::string(op_name(n.op)) + " node '" + n.name + "': " + what);
}

void expect_inputs(const Node& n, size_t count) {
  if (n.inputs.size() != count)
    fail(n, "expected " + std::to_string(count) + " inputs, got " +
                std::to_string(n.inputs.size()));
}

const Value& activation_input(const Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs.at(0));
  if (x.shape.size() != 4 || (x.layout != Layout::nchw && x.layout != Layout::nhwc))
    fail(n, "input '" + x.name + "' must be a 4-D NCHW or NHWC tensor, got " +
                to_string(x.shape) + " " + to_string(x.layout));
  return x;
}

void expect_vector(const Graph& g, const Node& n, size_t i, int64_t length, const char* role) {
  const Value& v = g.value(n.inputs.at(i));
  if (v.shape != Shape{length})
    fail(n, std::string(role) + " '" + v.name + "' must have shape [" + std::to_string(length) +
                "], got " + to_string(v.shape));
}

// Inputs of ops that index tensors in logical (row-major ONNX) order must not be NHWC.
const Value& logical_input(const Graph& g, const Node& n, size_t i) {
  const Value& x = g.value(n.inputs.at(i));
  if (x.layout == Layout::nhwc || x.layout == Layout::hwio)
    fail(n, "input '" + x.name + "' is " + to_string(x.layout) +
                "; this op works on tensors in logical (row-major) order");
  return x;
}

}  // namespace shape_detail

using namespace shape_detail;

namespace {

// GatherElements' and ScatterElements' data and indices: the same rank, the axis in range, the
// indices no longer than the data on every other axis, and every index along the axis exact as
// a float32.
void check_indexed_axis(const Node& n, int axis, const Shape& data, const Shape& indices,
                        const char* role, bool gather, bool broadcast = false) {
  if (data.empty()) fail(n, "the data is a scalar; there is no axis to index");
  if (indices.size() != data.size())
    fail(n, std::string(role) + " " + to_string(indices) + " and the data " + to_string(data) +
                " differ in rank");
  if (axis < 0 || axis >= static_cast<int>(data.size()))
    fail(n, "axis " + std::to_string(axis) + " is out of range for " + to_string(data));
  for (size_t a = 0; a < data.size(); ++a)
    if (static_cast<int>(a) != axis && indices[a] > data[a] && !(broadcast && indices[a] == 1))
      fail(n, std::string(role) + " " + to_string(indices) + " are longer than the data " +
                  to_string(data) + " on axis " + std::to_string(a) +
                  (gather ? " (an output element would read outside it)"
                          : " (an update would write outside it)"));
  if (data[static_cast<size_t>(axis)] > kMaxArgReduceExtent)
    fail(n, "axis " + std::to_string(axis) + " has " +
                std::to_string(data[static_cast<size_t>(axis)]) +
                " elements; Kiln's indices are float32, exact up to " +
                std::to_string(kMaxArgReduceExtent));
}

TypedShape infer_binary(const Graph& g, const Node& n) {
  expect_inputs(n, 2);
  const Value& a = g.value(n.inputs[0]);
  const Value& b = g.value(n.inputs[1]);
  bool ok = false;
  const Shape out = broadcast_shapes(a.shape, b.shape, &ok);
  if (!ok)
    fail(n, "cannot broadcast '" + a.name + "' " + to_string(a.shape) + " with '" + b.name + "' " +
                to_string(b.shape));
  // A 4-D operand decides the layout; two 4-D operands must agree.
  Layout l = logical_layout(out.size());
  const bool a4 = a.shape.size() == 4, b4 = b.shape.size() == 4;
  if (a4 && b4 && a.layout != b.layout && !(a.is_constant() || b.is_constant()))
    fail(n, "operands '" + a.name + "' (" + to_string(a.layout) + ") and '" + b.name + "' (" +
                to_string(b.layout) + ") have different layouts");
  if (out.size() == 4) {
    if (a4 && !a.is_constant()) l = a.layout;
    else if (b4 && !b.is_constant()) l = b.layout;
    else if (a4) l = a.layout;
    else if (b4) l = b.layout;
  }
  if (l == Layout::any && out.size() == 4) l = Layout::nchw;
  // Kernels broadcast on stored shapes: next to an NHWC operand, the other one must be stored
  // NHWC too (the layout pass re-lays constants out), or be a single element.
  if (l == Layout::nhwc)
    for (const Value* v : {&a, &b})
      if (v->layout != Layout::nhwc && num_elements(v->shape) != 1)
        fail(n, "operand '" + v->name + "' " + to_string(v->shape) + " " + to_string(v->layout) +
                    " cannot broadcast against an NHWC operand");
  return {out, l};
}

// Where(cond, x, y): the three shapes broadcast together; the layout as for Binary (the operands
// must agree; next to an NHWC operand the others are NHWC or a single element).
TypedShape infer_where(const Graph& g, const Node& n) {
  expect_inputs(n, 3);
  Shape out;
  for (size_t i = 0; i < 3; ++i) {
    const Value& v = g.value(n.inputs[i]);
    bool ok = true;
    if (i > 0) out = broadcast_shapes(out, v.shape, &ok);
    else out = v.shape;
    if (!ok)
      fail(n, "cannot broadcast '" + v.name + "' " + to_string(v.shape) + " with the shape " +
                  to_string(out) + " of the inputs before it");
  }
  Layout l = out.size() == 4 ? Layout::nchw : logical_layout(out.size());
  const Value* decides = nullptr;
  for (ValueId id : n.inputs) {
    const Value& v = g.value(id);
    if (v.shape.size() != 4 || v.is_constant()) continue;
    if (decides && v.layout != decides->layout)
      fail(n, "operands '" + decides->name + "' (" + to_string(decides->layout) + ") and '" +
                  v.name + "' (" + to_string(v.layout) + ") have different layouts");
    if (!decides) decides = &v;
  }
  if (out.size() == 4 && decides) l = decides->layout;
  if (l == Layout::nhwc)
    for (ValueId id : n.inputs) {
      const Value& v = g.value(id);
      if (v.layout != Layout::nhwc && num_elements(v.shape) != 1)
        fail(n, "operand '" + v.name + "' " + to_string(v.shape) + " " + to_string(v.layout) +
                    " cannot broadcast against an NHWC operand");
    }
  return {out, l};
}

TypedShape infer_gemm(const Graph& g, const Node& n, const Gemm& gm) {
  if (n.inputs.size() != 2 && n.inputs.size() != 3) fail(n, "expected 2 or 3 inputs");
  const Value& a = logical_input(g, n, 0);
  const Value& b = logical_input(g, n, 1);
  if (a.shape.size() != 2 || b.shape.size() != 2) fail(n, "A and B must be 2-D");
  const int64_t m = gm.trans_a ? a.shape[1] : a.shape[0];
  const int64_t ka = gm.trans_a ? a.shape[0] : a.shape[1];
  const int64_t kb = gm.trans_b ? b.shape[1] : b.shape[0];
  const int64_t nn = gm.trans_b ? b.shape[0] : b.shape[1];
  if (ka != kb)
    fail(n, "inner dimensions differ: A " + to_string(a.shape) + " and B " + to_string(b.shape));
  if (n.inputs.size() == 3) {
    const Value& c = g.value(n.inputs[2]);
    bool ok = false;
    const Shape bc = broadcast_shapes(c.shape, {m, nn}, &ok);
    if (!ok || bc != Shape{m, nn} || c.shape.size() > 2)
      fail(n, "C " + to_string(c.shape) + " does not broadcast to [" + std::to_string(m) + ", " +
                  std::to_string(nn) + "]");
  }
  return {{m, nn}, Layout::any};
}

TypedShape infer_matmul(const Graph& g, const Node& n) {
  expect_inputs(n, 2);
  Shape a = logical_input(g, n, 0).shape, b = logical_input(g, n, 1).shape;
  if (a.empty() || b.empty()) fail(n, "operands must have at least 1 dimension");
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  if (a.back() != b[b.size() - 2])
    fail(n, "inner dimensions differ: " + to_string(a) + " x " + to_string(b));
  bool ok = false;
  Shape batch = broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), &ok);
  if (!ok) fail(n, "batch dimensions do not broadcast");
  if (!a1) batch.push_back(a[a.size() - 2]);
  if (!b1) batch.push_back(b.back());
  return {batch, logical_layout(batch.size())};
}

TypedShape infer_concat(const Graph& g, const Node& n, const Concat& c) {
  if (n.inputs.empty()) fail(n, "expected at least one input");
  const Value& first = g.value(n.inputs[0]);
  const int r = static_cast<int>(first.shape.size());
  if (c.axis < 0 || c.axis >= r) fail(n, "axis " + std::to_string(c.axis) + " out of range");
  Shape out = first.shape;
  out[c.axis] = 0;
  for (ValueId v : n.inputs) {
    const Value& x = g.value(v);
    if (static_cast<int>(x.shape.size()) != r || x.layout != first.layout)
      fail(n, "input '" + x.name + "' differs in rank or layout from '" + first.name + "'");
    for (int a = 0; a < r; ++a)
      if (a != c.axis && x.shape[a] != first.shape[a])
        fail(n, "input '" + x.name + "' " + to_string(x.shape) + " does not match '" + first.name +
                    "' " + to_string(first.shape) + " outside axis " + std::to_string(c.axis));
    out[c.axis] += x.shape[c.axis];
  }
  return {out, first.layout};
}

}  // namespace

ImageDims image_dims(const Shape& s, Layout l) {
  KILN_CHECK(s.size() == 4, "image tensor must be 4-D");
  if (l == Layout::nchw) return {s[0], s[1], s[2], s[3]};
  KILN_CHECK(l == Layout::nhwc, "image layout must be NCHW or NHWC");
  return {s[0], s[3], s[1], s[2]};
}

Shape image_shape(const ImageDims& d, Layout l) {
  if (l == Layout::nchw) return {d.n, d.c, d.h, d.w};
  KILN_CHECK(l == Layout::nhwc, "image layout must be NCHW or NHWC");
  return {d.n, d.h, d.w, d.c};
}

int channel_axis(Layout l) {
  KILN_CHECK(l == Layout::nchw || l == Layout::nhwc, "image layout must be NCHW or NHWC");
  return l == Layout::nchw ? 1 : 3;
}

FilterDims filter_dims(const Shape& s, Layout l) {
  KILN_CHECK(s.size() == 4, "filter tensor must be 4-D");
  if (l == Layout::oihw) return {s[0], s[1], s[2], s[3]};
  KILN_CHECK(l == Layout::hwio, "filter layout must be OIHW or HWIO");
  return {s[3], s[2], s[0], s[1]};
}

Shape filter_shape(const FilterDims& d, Layout l) {
  if (l == Layout::oihw) return {d.co, d.ci, d.kh, d.kw};
  KILN_CHECK(l == Layout::hwio, "filter layout must be OIHW or HWIO");
  return {d.kh, d.kw, d.ci, d.co};
}

Layout filter_layout_for(Layout activation) {
  return activation == Layout::nhwc ? Layout::hwio : Layout::oihw;
}

TypedShape infer_output(const Graph& g, const Node& n) {
  for (ValueId v : n.inputs)
    if (v.index >= g.values().size()) fail(n, "input id %" + std::to_string(v.index) + " is undefined");
  if (const auto* c = std::get_if<Conv2d>(&n.op)) return infer_conv(g, n, *c);
  if (std::holds_alternative<BatchNorm>(n.op)) {
    expect_inputs(n, 5);
    const Value& x = g.value(n.inputs[0]);
    if (x.shape.size() < 2) fail(n, "input '" + x.name + "' must have at least 2 dimensions");
    if (x.layout == Layout::nhwc && x.shape.size() != 4)
      fail(n, "an NHWC input '" + x.name + "' must be 4-D");
    const int64_t channels = x.shape[x.layout == Layout::nhwc ? 3 : 1];
    const char* roles[] = {"scale", "bias", "mean", "variance"};
    for (size_t i = 1; i < 5; ++i) expect_vector(g, n, i, channels, roles[i - 1]);
    return {x.shape, x.layout};
  }
  if (const auto* gn = std::get_if<GroupNorm>(&n.op)) {
    expect_inputs(n, gn->first_post_input() + 2 * affine_steps(gn->post));
    const Value& x = activation_input(g, n);
    const int64_t channels = x.shape[x.layout == Layout::nhwc ? 3 : 1];
    if (gn->groups < 1 || channels % gn->groups != 0)
      fail(n, std::to_string(gn->groups) + " groups do not divide the " + std::to_string(channels) +
                  " channels of '" + x.name + "'");
    expect_vector(g, n, 1, channels, "scale");
    expect_vector(g, n, 2, channels, "bias");
    if (gn->residual) {
      const Value& r = g.value(n.inputs[3]);
      if (r.shape != x.shape || r.layout != x.layout)
        fail(n, "residual '" + r.name + "' is " + to_string(r.shape) + " " + to_string(r.layout) +
                    ", expected " + to_string(x.shape) + " " + to_string(x.layout));
    }
    for (size_t i = gn->first_post_input(); i < n.inputs.size(); ++i)
      expect_vector(g, n, i, channels, "post step parameter");
    return {x.shape, x.layout};
  }
  if (const auto* ch = std::get_if<ElementwiseChain>(&n.op)) {
    size_t affine = 0;
    for (const ChainStep& st : ch->steps) affine += per_channel_step(st.kind);
    expect_inputs(n, 1 + 2 * affine);
    const Value& x = g.value(n.inputs[0]);
    if (ch->steps.empty()) fail(n, "a chain needs at least one step");
    if (affine > 0) {
      if (x.shape.size() < 2 || (x.layout == Layout::nhwc && x.shape.size() != 4))
        fail(n, "per-channel steps need a channel axis; input '" + x.name + "' is " + to_string(x.shape));
      const int64_t channels = x.shape[x.layout == Layout::nhwc ? 3 : 1];
      for (size_t i = 1; i < n.inputs.size(); ++i) expect_vector(g, n, i, channels, "scale/shift");
    }
    return {x.shape, x.layout};
  }
  if (op_is_unary(n.op)) {
    expect_inputs(n, 1);
    const Value& x = g.value(n.inputs[0]);
    return {x.shape, x.layout};
  }
  if (std::holds_alternative<Binary>(n.op)) return infer_binary(g, n);
  if (std::holds_alternative<Where>(n.op)) return infer_where(g, n);
  if (const auto* p = std::get_if<Pool2d>(&n.op)) return infer_pool(g, n, *p);
  if (std::holds_alternative<GlobalPool>(n.op)) {
    expect_inputs(n, 1);
    const Value& x = activation_input(g, n);
    ImageDims d = image_dims(x.shape, x.layout);
    d.h = d.w = 1;
    return {image_shape(d, x.layout), x.layout};
  }
  if (const auto* gm = std::get_if<Gemm>(&n.op)) return infer_gemm(g, n, *gm);
  if (std::holds_alternative<MatMul>(n.op)) return infer_matmul(g, n);
  if (const auto* r = std::get_if<Reshape>(&n.op)) {
    expect_inputs(n, 1);
    // A relabel reads the bytes in whatever layout they are stored.
    const Value& x = r->layout == Layout::any ? logical_input(g, n, 0) : g.value(n.inputs[0]);
    if (num_elements(r->shape) != num_elements(x.shape))
      fail(n, "cannot reshape " + to_string(x.shape) + " (" + std::to_string(num_elements(x.shape)) +
                  " elements) to " + to_string(r->shape));
    for (int64_t d : r->shape)
      if (d <= 0) fail(n, "target shape " + to_string(r->shape) + " has a non-positive dimension");
    if (r->layout == Layout::nhwc && r->shape.size() != 4)
      fail(n, "an NHWC relabel needs a 4-D target shape, not " + to_string(r->shape));
    return {r->shape, r->layout == Layout::any ? logical_layout(r->shape.size()) : r->layout};
  }
  if (const auto* t = std::get_if<Transpose>(&n.op)) {
    expect_inputs(n, 1);
    const Value& x = logical_input(g, n, 0);
    std::vector<bool> seen(x.shape.size(), false);
    if (t->perm.size() != x.shape.size())
      fail(n, "perm has " + std::to_string(t->perm.size()) + " entries for a rank-" +
                  std::to_string(x.shape.size()) + " input");
    Shape out;
    for (int a : t->perm) {
      if (a < 0 || a >= static_cast<int>(x.shape.size()) || seen[a]) fail(n, "perm is not a permutation");
      seen[a] = true;
      out.push_back(x.shape[a]);
    }
    return {out, logical_layout(out.size())};
  }
  if (const auto* c = std::get_if<Concat>(&n.op)) return infer_concat(g, n, *c);
  if (const auto* sl = std::get_if<Slice>(&n.op)) {
    expect_inputs(n, 1);
    const Value& x = g.value(n.inputs[0]);
    const size_t r = x.shape.size();
    if (sl->starts.size() != r || sl->ends.size() != r || sl->steps.size() != r)
      fail(n, "starts, ends and steps need one entry per input axis");
    Shape out(r);
    for (size_t a = 0; a < r; ++a) {
      const int64_t st = sl->steps[a];
      if (st == 0) fail(n, "slice step 0 on axis " + std::to_string(a));
      const int64_t span = st > 0 ? sl->ends[a] - sl->starts[a] : sl->starts[a] - sl->ends[a];
      out[a] = span <= 0 ? 0 : (span + std::abs(st) - 1) / std::abs(st);
      if (out[a] == 0) fail(n, "slice is empty on axis " + std::to_string(a));
    }
    return {out, x.layout};
  }
  if (const auto* pd = std::get_if<Pad>(&n.op)) {
    expect_inputs(n, 1);
    const Value& x = g.value(n.inputs[0]);
    const size_t r = x.shape.size();
    if (pd->pads.size() != 2 * r) fail(n, "pads needs 2 entries per input axis");
    Shape out(r);
    for (size_t a = 0; a < r; ++a) {
      if (pd->mode == PadMode::reflect && (pd->pads[a] >= x.shape[a] || pd->pads[a + r] >= x.shape[a]))
        fail(n, "reflect padding of axis " + std::to_string(a) + " (size " +
                    std::to_string(x.shape[a]) + ") by " + std::to_string(pd->pads[a]) + " and " +
                    std::to_string(pd->pads[a + r]) + "; each pad must be smaller than the axis");
      out[a] = x.shape[a] + pd->pads[a] + pd->pads[a + r];
      if (out[a] <= 0) fail(n, "padding removes every element of axis " + std::to_string(a));
    }
    return {out, x.layout};
  }
  if (const auto* sm = std::get_if<Softmax>(&n.op)) {
    expect_inputs(n, 1);
    const Value& x = logical_input(g, n, 0);
    if (sm->axis < 0 || sm->axis >= static_cast<int>(x.shape.size())) fail(n, "axis out of range");
    return {x.shape, x.layout};
  }
  if (const auto* rm = std::get_if<Reduce>(&n.op)) {
    expect_inputs(n, 1);
    // An NHWC image reduced with its axes kept, the axes in NHWC order (convert_to_nhwc), is
    // an NHWC image; any other Reduce reads logical order.
    const Value& x0 = g.value(n.inputs[0]);
    const bool nhwc = x0.layout == Layout::nhwc && x0.shape.size() == 4 && rm->keepdims &&
                      !is_arg_reduce(rm->kind);
    const Value& x = nhwc ? x0 : logical_input(g, n, 0);
    std::vector<bool> reduce(x.shape.size(), rm->axes.empty());
    for (size_t i = 0; i < rm->axes.size(); ++i) {
      const int a = rm->axes[i];
      if (a < 0 || a >= static_cast<int>(x.shape.size())) fail(n, "axis " + std::to_string(a) + " out of range");
      if (i > 0 && a <= rm->axes[i - 1]) fail(n, "axes must be sorted and distinct");
      reduce[a] = true;
    }
    if (x.shape.empty()) fail(n, "input '" + x.name + "' is a scalar; there is nothing to reduce");
    if (is_arg_reduce(rm->kind)) {
      if (rm->axes.size() != 1) fail(n, std::string(to_string(rm->kind)) + " reduces exactly one axis");
      if (x.shape[rm->axes[0]] >= kMaxArgReduceExtent)
        fail(n, "the reduced axis has " + std::to_string(x.shape[rm->axes[0]]) +
                    " elements; float32 indices are exact below 2^24");
    }
    Shape out;
    for (size_t a = 0; a < x.shape.size(); ++a) {
      if (!reduce[a]) out.push_back(x.shape[a]);
      else if (rm->keepdims) out.push_back(1);
    }
    return {out, nhwc ? Layout::nhwc : logical_layout(out.size())};
  }
  if (const auto* tk = std::get_if<TopK>(&n.op)) {
    expect_inputs(n, 1);
    const Value& x = logical_input(g, n, 0);
    if (tk->axis < 0 || tk->axis >= static_cast<int>(x.shape.size()))
      fail(n, "axis " + std::to_string(tk->axis) + " is out of range for " + to_string(x.shape));
    const int64_t d = x.shape[static_cast<size_t>(tk->axis)];
    if (tk->k < 1 || tk->k > d)
      fail(n, "k = " + std::to_string(tk->k) + " is not in [1, " + std::to_string(d) + "] (axis " +
                  std::to_string(tk->axis) + " of " + to_string(x.shape) + ")");
    if (d > kMaxTopKRow)
      fail(n, "axis " + std::to_string(tk->axis) + " has " + std::to_string(d) +
                  " elements; Kiln's TopK takes rows of at most " + std::to_string(kMaxTopKRow) +
                  " (it compares every pair of a row's elements)");
    Shape out = x.shape;
    out[static_cast<size_t>(tk->axis)] = tk->k;
    return {out, x.layout};
  }
  if (const auto* ge = std::get_if<GatherElements>(&n.op)) {
    expect_inputs(n, 2);
    const Value& data = logical_input(g, n, 0);
    const Value& indices = logical_input(g, n, 1);
    check_indexed_axis(n, ge->axis, data.shape, indices.shape, "indices", true, ge->broadcast);
    Shape out = indices.shape;
    for (size_t a = 0; a < out.size(); ++a)
      if (ge->broadcast && static_cast<int>(a) != ge->axis && out[a] == 1) out[a] = data.shape[a];
    return {out, logical_layout(out.size())};
  }
  if (const auto* se = std::get_if<ScatterElements>(&n.op)) {
    expect_inputs(n, 3);
    const Value& data = logical_input(g, n, 0);
    const Value& indices = logical_input(g, n, 1);
    const Value& updates = logical_input(g, n, 2);
    if (updates.shape != indices.shape)
      fail(n, "updates " + to_string(updates.shape) + " do not have the indices' shape " +
                  to_string(indices.shape));
    check_indexed_axis(n, se->axis, data.shape, indices.shape, "indices", false);
    return {data.shape, logical_layout(data.shape.size())};
  }
  if (std::holds_alternative<GridSample>(n.op)) {
    expect_inputs(n, 2);
    const Value& x = logical_input(g, n, 0);
    const Value& grid = logical_input(g, n, 1);
    if (x.shape.size() != 4)
      fail(n, "x is " + to_string(x.shape) + "; GridSample takes images [N, C, H, W]");
    if (grid.shape.size() != 4 || grid.shape[0] != x.shape[0] || grid.shape[3] != 2)
      fail(n, "the grid is " + to_string(grid.shape) + "; expected [" + std::to_string(x.shape[0]) +
                  ", Ho, Wo, 2] for x " + to_string(x.shape));
    return {{x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]}, logical_layout(4)};
  }
  if (const auto* tl = std::get_if<Tile>(&n.op)) {
    expect_inputs(n, 1);
    const Value& x = logical_input(g, n, 0);
    if (tl->repeats.size() != x.shape.size())
      fail(n, "repeats has " + std::to_string(tl->repeats.size()) + " entries for a rank-" +
                  std::to_string(x.shape.size()) + " input");
    Shape out = x.shape;
    for (size_t a = 0; a < out.size(); ++a) {
      if (tl->repeats[a] < 1 || tl->repeats[a] > (int64_t{1} << 31))
        fail(n, "repeat " + std::to_string(tl->repeats[a]) + " on axis " + std::to_string(a) +
                    " is not in [1, 2^31]");
      if (__builtin_mul_overflow(out[a], tl->repeats[a], &out[a]))
        fail(n, "the output of axis " + std::to_string(a) + " overflows a 64-bit count");
    }
    num_elements(out);  // throws when the element count overflows
    return {out, x.layout};
  }
  if (const auto* ln = std::get_if<LayerNorm>(&n.op)) {
    if (n.inputs.size() != 2 && n.inputs.size() != 3)
      fail(n, "expected 2 or 3 inputs (x, scale[, bias]), got " + std::to_string(n.inputs.size()));
    // NHWC only where every axis but the batch is normalized with one-value parameters: the
    // layout does not matter then (convert_to_nhwc).
    const Value& x0 = g.value(n.inputs[0]);
    const Value& x =
        x0.layout == Layout::nhwc && is_layout_free_layer_norm(g, n) ? x0 : logical_input(g, n, 0);
    if (ln->axis < 0 || ln->axis >= static_cast<int>(x.shape.size()))
      fail(n, "axis " + std::to_string(ln->axis) + " out of range for a rank-" +
                  std::to_string(x.shape.size()) + " input");
    const Shape normalized(x.shape.begin() + ln->axis, x.shape.end());
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      const Value& p = g.value(n.inputs[i]);
      if (!holds_normalized_shape(p.shape, x.shape, ln->axis))
        fail(n, std::string(i == 1 ? "scale" : "bias") + " '" + p.name + "' is " +
                    to_string(p.shape) + ", expected the normalized shape " + to_string(normalized));
    }
    return {x.shape, x.layout};
  }
  if (const auto* rs = std::get_if<Resize>(&n.op)) {
    expect_inputs(n, 1);
    // Resizing reads an NHWC image in its stored order too (convert_to_nhwc remaps its axes):
    // nearest neighbours gather along any axis, interpolation then runs along H and W (axes 1
    // and 2) instead of the last two.
    const Value& x =
        g.value(n.inputs[0]).layout == Layout::nhwc ? g.value(n.inputs[0]) : logical_input(g, n, 0);
    check_resize(n, *rs, x.shape, x.layout);
    return {rs->sizes, x.layout};
  }
  const auto& t = std::get<LayoutTransform>(n.op);
  expect_inputs(n, 1);
  auto is_image = [](Layout l) { return l == Layout::nchw || l == Layout::nhwc; };
  if (!is_image(t.from) || !is_image(t.to))
    fail(n, std::string("transforms only between NCHW and NHWC, not ") + to_string(t.from) +
                " -> " + to_string(t.to));
  const Value& x = activation_input(g, n);
  if (x.layout != t.from)
    fail(n, "input '" + x.name + "' is " + to_string(x.layout) + ", expected " +
                to_string(t.from));
  return {image_shape(image_dims(x.shape, t.from), t.to), t.to};
}

bool is_layout_free_layer_norm(const Graph& g, const Node& n) {
  const auto* ln = std::get_if<LayerNorm>(&n.op);
  if (!ln || ln->axis != 1) return false;
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (num_elements(g.value(n.inputs[i]).shape) != 1) return false;
  return true;
}

bool holds_normalized_shape(const Shape& param, const Shape& x, int axis) {
  if (num_elements(param) == 1) return true;
  auto without_leading_ones = [](Shape::const_iterator b, Shape::const_iterator e) {
    while (b != e && *b == 1) ++b;
    return Shape(b, e);
  };
  return without_leading_ones(param.begin(), param.end()) ==
         without_leading_ones(x.begin() + axis, x.end());
}

Layout logical_layout(size_t rank) { return rank == 4 ? Layout::nchw : Layout::any; }

bool op_is_unary(const Op& op) {
  return std::holds_alternative<Relu>(op) || std::holds_alternative<Clip>(op) ||
         std::holds_alternative<LeakyRelu>(op) || std::holds_alternative<Sigmoid>(op) ||
         std::holds_alternative<HardSigmoid>(op) || std::holds_alternative<HardSwish>(op);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, bool* ok) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  *ok = true;
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) *ok = false;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace kiln::graph
