// ONNX -> IR for data movement: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat,
// Slice, Split, Pad, Gather, GatherND and ScatterND (as slice assignment). On import-time
// constants these fold; on graph tensors they become IR nodes (Squeeze, Unsqueeze and Flatten as
// Reshape; Split as Slices; Gather and GatherND as a Slice or a GatherElements; ScatterND as Slices
// and a Concat).
#include <algorithm>
#include <map>

#include "graph/onnx/importer.h"
#include "graph/shape_inference.h"

namespace kiln::graph::onnx {
namespace {

// Padding beyond this is no real network's; the bound keeps shape arithmetic from overflow.
constexpr int64_t kMaxPad = int64_t{1} << 30;
// ScatterND on a graph tensor becomes a Slice per run of rows; more than this is not a CNN's.
constexpr size_t kMaxGatherSlices = 256;

// Input i as a plain import-time constant (not a folded float op that the graph must still
// compute), or null.
const HostTensor* foldable(const Importer& im, const NodeCtx& c, int i) {
  const Slot& s = *im.input(c, i).slot;
  return s.host && !s.materialize ? s.host.get() : nullptr;
}

void reshape_to(Importer& im, const NodeCtx& c, const Shape& out) {
  if (out == im.input_shape(c, 0)) return im.define_alias(c, 0, 0);  // the tensor as it is
  if (const HostTensor* h = foldable(im, c, 0)) return im.define_host(c, 0, host_reshape(*h, out));
  im.define_value(c, 0, im.emit(c, Reshape{out}, {im.value_input(c, 0)}, im.output_name(c, 0)));
}

// ONNX Reshape's target: 0 copies the input dim, one -1 is inferred.
Shape resolve_reshape(const NodeCtx& c, const Shape& in, const std::vector<int64_t>& spec,
                      bool allowzero) {
  const int64_t total = checked_elements(in, "input");
  Shape out;
  int infer = -1;
  int64_t known = 1;
  for (size_t k = 0; k < spec.size(); ++k) {
    int64_t v = spec[k];
    if (v == 0 && allowzero)
      node_error(c,
                 "shape has a 0 with attribute 'allowzero'=1, which makes an empty tensor; "
                 "Kiln tensors cannot be empty");
    if (v == 0) {
      if (k >= in.size())
        node_error(c, "shape entry " + std::to_string(k) + " is 0 (copy), but the input " +
                          to_string(in) + " has no such axis");
      v = in[k];
    }
    if (v == -1) {
      if (infer >= 0) node_error(c, "shape has more than one -1");
      infer = static_cast<int>(k);
      out.push_back(1);
      continue;
    }
    if (v < 0) node_error(c, "shape entry " + std::to_string(v) + " is invalid");
    if (__builtin_mul_overflow(known, v, &known)) node_error(c, "shape overflows int64");
    out.push_back(v);
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      node_error(c, "cannot infer the -1 in the shape: " + std::to_string(total) +
                        " elements do not divide by " + std::to_string(known));
    out[infer] = total / known;
  } else if (known != total) {
    node_error(c, "cannot reshape " + to_string(in) + " (" + std::to_string(total) +
                      " elements) to " + to_string(out));
  }
  return out;
}

// Opset < 13 Squeeze/Unsqueeze take axes as an attribute, later as an optional input.
std::vector<int64_t> axes_of(Importer& im, const NodeCtx& c) {
  if (c.opset < 13) return attr_ints(c, "axes");
  return im.has_input(c, 1) ? im.int_list_input(c, 1, "axes") : std::vector<int64_t>{};
}

std::vector<int64_t> optional_list(Importer& im, const NodeCtx& c, int i, const char* role) {
  return im.has_input(c, i) ? im.int_list_input(c, i, role) : std::vector<int64_t>{};
}

// Gather along `axis` of a graph tensor (`from`, or node c's input 0) with constant (normalized)
// indices: a Slice when the indices step evenly (a single index, a range: a view or a strided
// copy), else a GatherElements whose indices, one per gathered position of the axis, broadcast
// over the other axes.
void lower_gather(Importer& im, const NodeCtx& c, int axis, const std::vector<int64_t>& idx,
                  const Shape& out, ValueId from = {}) {
  if (idx.empty()) node_error(c, "gathers no indices; Kiln tensors cannot be empty");
  const ValueId x = from.valid() ? from : im.value_input(c, 0);
  const Shape in = im.graph().value(x).shape;
  Shape sliced = in;
  sliced[axis] = static_cast<int64_t>(idx.size());
  const bool reshape = sliced != out;
  const std::string& out_name = im.output_name(c, 0);
  auto slice = [&](int64_t start, int64_t end, int64_t step, const std::string& value,
                   const std::string& node) {
    return im.emit(c, axis_slice(in, axis, start, end, step), {x}, value, node);
  };
  const int64_t n = static_cast<int64_t>(idx.size());
  const int64_t step = n > 1 ? idx[1] - idx[0] : 1;
  bool even = step != 0;
  for (int64_t k = 0; even && k < n; ++k) even = idx[k] == idx[0] + k * step;
  ValueId v;
  if (even && step == 1 && idx[0] == 0 && n == in[axis]) {
    v = x;  // all of the axis in order (PyTorch's dynamo exporter writes a view this way)
    if (!reshape && !from.valid()) return im.define_alias(c, 0, 0);
    if (!reshape) return im.define_value(c, 0, x);
  } else if (even) {
    const int64_t last = idx[0] + (n - 1) * step;
    const std::string name = c.name + "/slice";
    v = slice(idx[0], last + (step > 0 ? 1 : -1), step, reshape ? name : out_name,
              reshape ? name : c.name);
  } else {
    Shape along(in.size(), 1);
    along[static_cast<size_t>(axis)] = n;
    const ValueId indices =
        im.add_constant(c.name + "/indices", along, std::vector<float>(idx.begin(), idx.end()),
                        logical_layout(along.size()));
    const std::string name = c.name + "/gather";
    v = im.emit(c, GatherElements{axis, true}, {x, indices}, reshape ? name : out_name,
                reshape ? name : c.name);
  }
  if (reshape) v = im.emit(c, Reshape{out}, {v}, out_name);
  im.define_value(c, 0, v);
}

// Gather along `axis` with indices computed at run time (a float32 holding the index, as ArgMax's
// and TopK's outputs are): the indices viewed as [1, .., n, .., 1] (n of them along the axis), a
// GatherElements broadcasting them over the other axes, and a Reshape to the output's shape.
void lower_runtime_gather(Importer& im, const NodeCtx& c, int axis) {
  const ValueId x = im.value_input(c, 0);
  const Shape in = im.graph().value(x).shape;
  const Shape idx_shape = im.input_shape(c, 1);
  Shape out(in.begin(), in.begin() + axis);
  out.insert(out.end(), idx_shape.begin(), idx_shape.end());
  out.insert(out.end(), in.begin() + axis + 1, in.end());
  Shape along(in.size(), 1);
  along[static_cast<size_t>(axis)] = num_elements(idx_shape);
  ValueId indices = im.value_input(c, 1);
  if (idx_shape != along)
    indices = im.emit(c, Reshape{along}, {indices}, c.name + "/indices", c.name + "/indices");
  Shape gathered = in;
  gathered[static_cast<size_t>(axis)] = along[static_cast<size_t>(axis)];
  const bool reshape = gathered != out;
  const std::string name = c.name + "/gather";
  ValueId v = im.emit(c, GatherElements{axis, true}, {x, indices},
                      reshape ? name : im.output_name(c, 0), reshape ? name : c.name);
  if (reshape) v = im.emit(c, Reshape{out}, {v}, im.output_name(c, 0));
  im.define_value(c, 0, v);
}

}  // namespace

void convert_reshape(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, c.opset < 5 ? 1 : 2);
  std::vector<int64_t> spec;
  if (c.opset < 5) {
    if (!find_attr(c, "shape")) node_error(c, "attribute 'shape' is missing");
    spec = attr_ints(c, "shape");
  } else {
    spec = im.int_list_input(c, 1, "shape");
  }
  const bool allowzero = attr_int(c, "allowzero", 0) != 0;
  reshape_to(im, c, resolve_reshape(c, im.input_shape(c, 0), spec, allowzero));
}

void convert_flatten(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const Shape in = im.input_shape(c, 0);
  const int64_t r = static_cast<int64_t>(in.size());
  int64_t axis = attr_int(c, "axis", 1);
  if (axis < -r || axis > r)
    node_error(c, "attribute 'axis' " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(r));
  if (axis < 0) axis += r;
  Shape out{1, 1};
  for (int64_t a = 0; a < r; ++a) out[a < axis ? 0 : 1] *= in[a];
  reshape_to(im, c, out);
}

void convert_squeeze(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 2);
  const Shape in = im.input_shape(c, 0);
  std::vector<bool> drop(in.size(), false);
  const std::vector<int64_t> axes = axes_of(im, c);
  for (int64_t a : axes) {
    const int k = normalize_axis(c, a, in.size(), "squeeze axis");
    if (in[k] != 1)
      node_error(c,
                 "cannot squeeze axis " + std::to_string(k) + " of size " + std::to_string(in[k]));
    if (drop[k]) node_error(c, "squeeze axis " + std::to_string(k) + " is listed twice");
    drop[k] = true;
  }
  Shape out;
  for (size_t k = 0; k < in.size(); ++k)
    if (!(axes.empty() ? in[k] == 1 : drop[k])) out.push_back(in[k]);
  reshape_to(im, c, out);
}

void convert_unsqueeze(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 2);
  const Shape in = im.input_shape(c, 0);
  const std::vector<int64_t> axes = axes_of(im, c);
  if (axes.empty()) node_error(c, "axes are missing");
  const size_t rank = in.size() + axes.size();
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    const int k = normalize_axis(c, a, rank, "unsqueeze axis");
    if (inserted[k]) node_error(c, "unsqueeze axis " + std::to_string(k) + " is listed twice");
    inserted[k] = true;
  }
  Shape out;
  size_t next = 0;
  for (size_t k = 0; k < rank; ++k) out.push_back(inserted[k] ? 1 : in[next++]);
  reshape_to(im, c, out);
}

void convert_transpose(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const int64_t r = static_cast<int64_t>(im.input_shape(c, 0).size());
  Transpose t;
  if (!find_attr(c, "perm")) {
    for (int64_t a = r - 1; a >= 0; --a) t.perm.push_back(static_cast<int>(a));
  } else {
    for (int64_t a : attr_ints(c, "perm"))
      t.perm.push_back(to_int(c, a, "attribute 'perm' entry", 0, std::max<int64_t>(r - 1, 0)));
  }
  bool identity = static_cast<int64_t>(t.perm.size()) == r;
  for (size_t a = 0; identity && a < t.perm.size(); ++a) identity = t.perm[a] == static_cast<int>(a);
  if (identity) return im.define_alias(c, 0, 0);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (int a : t.perm) {
    if (static_cast<int64_t>(t.perm.size()) != r || seen[static_cast<size_t>(a)])
      node_error(c, "attribute 'perm' is not a permutation of the " + std::to_string(r) + " axes");
    seen[static_cast<size_t>(a)] = true;
  }
  const Shape in = im.input_shape(c, 0);
  Shape out;
  for (int a : t.perm) out.push_back(in[static_cast<size_t>(a)]);
  const HostTensor* h = foldable(im, c, 0);
  if (!h || !fits_fold(out))
    return im.define_value(c, 0, im.emit(c, t, {im.value_input(c, 0)}, im.output_name(c, 0)));
  // A constant (exporters transpose integer pad lists: PyTorch's F.pad) is folded here.
  Shape in_strides(static_cast<size_t>(r), 1);
  for (int64_t a = r - 2; a >= 0; --a) in_strides[a] = in_strides[a + 1] * in[a + 1];
  std::vector<int64_t> src(static_cast<size_t>(h->size())), index(static_cast<size_t>(r), 0);
  for (int64_t& from : src) {  // the output in order, its index counted like an odometer
    from = 0;
    for (int64_t a = 0; a < r; ++a) from += index[a] * in_strides[t.perm[a]];
    for (int64_t a = r - 1; a >= 0 && ++index[a] == out[a]; --a) index[a] = 0;
  }
  im.define_host(c, 0, host_gather_flat(*h, out, src));
}

void convert_concat(Importer& im, const NodeCtx& c) {
  if (c.proto->input_size() == 0) node_error(c, "expected at least one input");
  if (c.opset >= 4 && !find_attr(c, "axis")) node_error(c, "attribute 'axis' is missing");
  const Shape first = im.input_shape(c, 0);
  const int axis = normalize_axis(c, attr_int(c, "axis", 1), first.size(), "attribute 'axis'");
  std::vector<const HostTensor*> hosts;
  for (int i = 0; i < c.proto->input_size(); ++i) hosts.push_back(foldable(im, c, i));
  if (hosts.size() == 1) return im.define_alias(c, 0, 0);
  if (std::find(hosts.begin(), hosts.end(), nullptr) == hosts.end()) {
    Shape out = first;
    out[axis] = 0;
    for (size_t i = 0; i < hosts.size(); ++i) {
      const HostTensor& h = *hosts[i];
      bool ok = h.dtype == hosts[0]->dtype && h.dims.size() == first.size();
      for (size_t a = 0; ok && a < first.size(); ++a)
        ok = a == size_t(axis) || h.dims[a] == first[a];
      if (!ok)
        node_error(c, "input '" + im.input_name(c, i) + "' (" + dtype_name(h.dtype) + " " +
                          to_string(h.dims) + ") does not match input '" + im.input_name(c, 0) +
                          "' outside axis " + std::to_string(axis));
      out[axis] += h.dims[axis];
    }
    if (fits_fold(out)) return im.define_host(c, 0, host_concat(hosts, axis));
  }
  std::vector<ValueId> in;
  for (int i = 0; i < c.proto->input_size(); ++i) in.push_back(im.value_input(c, i));
  im.define_value(c, 0, im.emit(c, Concat{axis}, std::move(in), im.output_name(c, 0)));
}

void convert_slice(Importer& im, const NodeCtx& c) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset < 10) {
    expect_inputs(c, 1, 1);
    if (!find_attr(c, "starts") || !find_attr(c, "ends"))
      node_error(c, "attributes 'starts' and 'ends' are required");
    starts = attr_ints(c, "starts"), ends = attr_ints(c, "ends"), axes = attr_ints(c, "axes");
  } else {
    expect_inputs(c, 3, 5);
    starts = im.int_list_input(c, 1, "starts"), ends = im.int_list_input(c, 2, "ends");
    axes = optional_list(im, c, 3, "axes"), steps = optional_list(im, c, 4, "steps");
  }
  const Shape in = im.input_shape(c, 0);
  const Slice s = normalize_slice(c, in, starts, ends, axes, steps);
  // The whole tensor (GhostNet's out[:, :C] after a Concat of C channels): no copy.
  if (s.starts == std::vector<int64_t>(in.size(), 0) && s.ends == in &&
      s.steps == std::vector<int64_t>(in.size(), 1))
    return im.define_alias(c, 0, 0);
  const HostTensor* h = foldable(im, c, 0);
  if (h && fits_fold(slice_dims(in, s))) return im.define_host(c, 0, host_slice(*h, s));
  im.define_value(c, 0, im.emit(c, s, {im.value_input(c, 0)}, im.output_name(c, 0)));
}

void convert_split(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 2);
  const Shape in = im.input_shape(c, 0);
  const int axis = normalize_axis(c, attr_int(c, "axis", 0), in.size(), "attribute 'axis'");
  const int64_t n = im.num_outputs(c), d = in[axis];
  std::vector<int64_t> sizes;
  if (im.has_input(c, 1))
    sizes = im.int_list_input(c, 1, "split");
  else if (c.opset < 13 && find_attr(c, "split"))
    sizes = attr_ints(c, "split");
  else if (find_attr(c, "num_outputs")) {  // opset 18: parts of ceil(d / n), the last smaller
    const int64_t parts = attr_int(c, "num_outputs", 0);
    if (parts != n || n <= 0 || (n - 1) * ((d + n - 1) / n) >= d)
      node_error(c, "attribute 'num_outputs' is " + std::to_string(parts) + " for " +
                        std::to_string(n) + " outputs and an axis of size " + std::to_string(d));
    sizes.assign(n, (d + n - 1) / n);
    sizes.back() = d - (n - 1) * sizes[0];
  } else if (n > 0 && d % n == 0)
    sizes.assign(n, d / n);
  else
    node_error(c, "cannot split axis " + std::to_string(axis) + " of size " + std::to_string(d) +
                      " into " + std::to_string(n) + " equal parts");
  int64_t total = 0;
  for (int64_t v : sizes) {
    if (v < 0 || v > d) node_error(c, "split size " + std::to_string(v) + " is out of range");
    total += v;
  }
  if (static_cast<int64_t>(sizes.size()) != n || total != d)
    node_error(c, "split sizes must be one per output (" + std::to_string(n) + ") and sum to " +
                      std::to_string(d) + ", the size of axis " + std::to_string(axis));
  const HostTensor* h = foldable(im, c, 0);
  int64_t offset = 0;
  for (int k = 0; k < n; ++k) {
    const Slice s = axis_slice(in, axis, offset, offset + sizes[k]);
    offset += sizes[k];
    const std::string& name = im.output_name(c, k);
    if (name.empty()) continue;
    if (sizes[k] == 0)
      node_error(c, "output '" + name + "' would be empty (split size 0); Kiln tensors cannot be");
    if (h && fits_fold(slice_dims(in, s))) {
      im.define_host(c, k, host_slice(*h, s));
    } else {
      const std::string node = n > 1 ? c.name + "/" + std::to_string(k) : c.name;
      im.define_value(c, k, im.emit(c, s, {im.value_input(c, 0)}, name, node));
    }
  }
}

void convert_pad(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, c.opset < 11 ? 1 : c.opset < 18 ? 3 : 4);
  const std::string mode = attr_string(c, "mode", "constant");
  Pad p;
  if (mode == "reflect")
    p.mode = PadMode::reflect;
  else if (mode == "edge")
    p.mode = PadMode::edge;
  else if (mode != "constant")
    node_error(c, "attribute 'mode' is '" + mode + "'; expected constant, reflect or edge");
  if (c.opset < 11) {
    if (!find_attr(c, "pads")) node_error(c, "attribute 'pads' is missing");
    p.pads = attr_ints(c, "pads");
    p.value = attr_float(c, "value", 0.0f);
  } else {
    p.pads = im.int_list_input(c, 1, "pads");
    if (im.has_input(c, 2)) {
      const HostTensor& v = im.constant_input(c, 2, "constant_value");
      if (v.size() != 1)
        node_error(c, "constant_value must hold one value, got " + to_string(v.dims));
      p.value = v.is_float() ? v.f[0] : static_cast<float>(v.i[0]);
    }
  }
  const size_t rank = im.input_shape(c, 0).size();
  if (im.has_input(c, 3)) {  // opset 18: the pads are for these axes only
    const std::vector<int64_t> axes = im.int_list_input(c, 3, "axes");
    if (p.pads.size() != 2 * axes.size())
      node_error(c, "pads has " + std::to_string(p.pads.size()) + " entries for " +
                        std::to_string(axes.size()) + " axes");
    std::vector<int64_t> all(2 * rank, 0);
    std::vector<bool> seen(rank, false);
    for (size_t k = 0; k < axes.size(); ++k) {
      const int a = normalize_axis(c, axes[k], rank, "an axes entry");
      if (seen[a]) node_error(c, "axes lists axis " + std::to_string(a) + " twice");
      seen[a] = true;
      all[a] = p.pads[k], all[a + rank] = p.pads[k + axes.size()];
    }
    p.pads = all;
  }
  if (p.pads.size() != 2 * rank)
    node_error(c, "pads has " + std::to_string(p.pads.size()) + " entries, expected " +
                      std::to_string(2 * rank) + " (2 per input axis)");
  for (int64_t v : p.pads) to_int(c, v, "a pad", -kMaxPad, kMaxPad);
  if (std::all_of(p.pads.begin(), p.pads.end(), [](int64_t v) { return v == 0; }))
    return im.define_alias(c, 0, 0);
  im.define_value(c, 0, im.emit(c, p, {im.value_input(c, 0)}, im.output_name(c, 0)));
}

void convert_gather(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  const Shape in = im.input_shape(c, 0);
  const int axis = normalize_axis(c, attr_int(c, "axis", 0), in.size(), "attribute 'axis'");
  if (!im.known_input(c, 1)) return lower_runtime_gather(im, c, axis);
  const HostTensor& ind = im.constant_input(c, 1, "indices");
  if (ind.is_float()) node_error(c, "indices must be integers, got " + dtype_name(ind.dtype));
  const int64_t d = in[axis];
  std::vector<int64_t> idx;
  for (int64_t v : ind.i) {
    if (v < -d || v >= d)
      node_error(c, "index " + std::to_string(v) + " is out of range for axis " +
                        std::to_string(axis) + " of size " + std::to_string(d));
    idx.push_back(v < 0 ? v + d : v);
  }
  Shape out(in.begin(), in.begin() + axis);
  out.insert(out.end(), ind.dims.begin(), ind.dims.end());
  out.insert(out.end(), in.begin() + axis + 1, in.end());
  const HostTensor* h = foldable(im, c, 0);
  if (!h || !fits_fold(out)) return lower_gather(im, c, axis, idx, out);
  int64_t outer = 1, inner = 1;
  for (int a = 0; a < axis; ++a) outer *= in[a];
  for (size_t a = axis + 1; a < in.size(); ++a) inner *= in[a];
  std::vector<int64_t> src;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : idx)
      for (int64_t k = 0; k < inner; ++k) src.push_back((o * d + i) * inner + k);
  im.define_host(c, 0, host_gather_flat(*h, out, src));
}

// GatherND (opsets 11-28, batch_dims from 12) with indices known at import: each index tuple
// (negative entries counted from the end) picks a slab of the data, which is viewed as [B * D,
// rest...] (B the product of the batch_dims leading axes, D that of the k axes the tuples index),
// so the whole op is a Gather along that first axis at each tuple's flat position (lower_gather:
// a Slice or one GatherElements kernel), then a Reshape to batch + indices.shape[batch_dims:-1] +
// rest. Folded where the data is a constant too.
void convert_gather_nd(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  const Shape data = im.input_shape(c, 0);
  const HostTensor& ind = im.constant_input(c, 1, "indices");
  if (ind.is_float()) node_error(c, "indices must be integers, got " + dtype_name(ind.dtype));
  const Shape& is = ind.dims;
  const int64_t bd = c.opset >= 12 ? attr_int(c, "batch_dims", 0) : 0;
  if (is.empty())
    node_error(c, "the indices are a scalar; GatherND takes tuples along their last axis");
  if (bd < 0 || bd >= static_cast<int64_t>(std::min(data.size(), is.size())))
    node_error(c, "batch_dims " + std::to_string(bd) + " is not below the ranks of the data " +
                      to_string(data) + " and the indices " + to_string(is));
  const int64_t k = is.back();
  if (k < 1 || bd + k > static_cast<int64_t>(data.size()))
    node_error(c, "index tuples of " + std::to_string(k) + " entries do not fit the data " +
                      to_string(data) + " after " + std::to_string(bd) + " batch axes");
  int64_t batch = 1, cells = 1, tuples = 1;
  for (int64_t a = 0; a < bd; ++a) {
    if (is[static_cast<size_t>(a)] != data[static_cast<size_t>(a)])
      node_error(c, "batch axis " + std::to_string(a) + " differs: data " + to_string(data) +
                        ", indices " + to_string(is));
    batch *= data[static_cast<size_t>(a)];
  }
  for (int64_t a = bd; a < bd + k; ++a) cells *= data[static_cast<size_t>(a)];
  for (size_t a = static_cast<size_t>(bd); a + 1 < is.size(); ++a) tuples *= is[a];
  std::vector<int64_t> flat;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t pos = 0;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t s = data[static_cast<size_t>(bd + j)];
        const int64_t v = ind.i[static_cast<size_t>((b * tuples + t) * k + j)];
        if (v < -s || v >= s)
          node_error(c, "index " + std::to_string(v) + " is outside axis " +
                            std::to_string(bd + j) + " of the data " + to_string(data));
        pos = pos * s + (v < 0 ? v + s : v);
      }
      flat.push_back(b * cells + pos);
    }
  Shape rows = {batch * cells}, out(data.begin(), data.begin() + bd);
  rows.insert(rows.end(), data.begin() + bd + k, data.end());
  out.insert(out.end(), is.begin() + bd, is.end() - 1);
  out.insert(out.end(), data.begin() + bd + k, data.end());
  if (const HostTensor* h = foldable(im, c, 0); h && fits_fold(out)) {
    const int64_t inner = num_elements(rows) / rows[0];
    std::vector<int64_t> src;
    for (int64_t f : flat)
      for (int64_t e = 0; e < inner; ++e) src.push_back(f * inner + e);
    return im.define_host(c, 0, host_gather_flat(*h, out, src));
  }
  ValueId x = im.value_input(c, 0);
  if (data != rows) x = im.emit(c, Reshape{rows}, {x}, c.name + "/rows", c.name + "/rows");
  lower_gather(im, c, 0, flat, out, x);
}

// ScatterND with constant indices of whole rows of the first axis (the last dimension of the
// indices 1), as torch writes slice assignment (slice_scatter: x[a:b] = y, the tensors
// transposed so that the axis comes first) and index_put: the output is a Concat of runs of
// rows, each a Slice of the data or of the updates (reduction none: the last update of a row
// wins), or, with a reduction (add, mul, max, min), a row of the data combined with its updates
// in order. At most kMaxGatherSlices pieces.
void convert_scatter_nd(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 3, 3);
  const std::string reduction = attr_string(c, "reduction", "none");
  const std::map<std::string, BinaryOp> reductions = {{"add", BinaryOp::add},
                                                      {"mul", BinaryOp::mul},
                                                      {"max", BinaryOp::max},
                                                      {"min", BinaryOp::min}};
  const auto how = reductions.find(reduction);
  if (reduction != "none" && how == reductions.end())
    node_error(c, "reduction '" + reduction + "' is not one of none, add, mul, max, min");
  const Shape data = im.input_shape(c, 0), updates = im.input_shape(c, 2);
  if (data.empty()) node_error(c, "the data is a scalar; ScatterND writes rows of a tensor");
  const HostTensor& idx = im.constant_input(c, 1, "indices");
  if (idx.is_float() || idx.dims.empty() || idx.dims.back() != 1)
    node_error(c, "indices " + dtype_name(idx.dtype) + " " + to_string(idx.dims) +
                      ": Kiln takes ScatterND of whole rows of the first axis only (indices whose "
                      "last dimension is 1)");
  const int64_t d = data.at(0), n = idx.size();
  Shape want(idx.dims.begin(), idx.dims.end() - 1);
  want.insert(want.end(), data.begin() + 1, data.end());
  if (updates != want)
    node_error(c, "updates " + to_string(updates) + " do not match the indices and data (" +
                      to_string(want) + ")");
  std::map<int64_t, std::vector<int64_t>> sources;  // row -> its update rows, in order
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = idx.i[static_cast<size_t>(k)], r = i < 0 ? i + d : i;
    if (r < 0 || r >= d)
      node_error(c, "index " + std::to_string(i) + " is outside the first axis (" +
                        std::to_string(d) + ")");
    sources[r].push_back(k);
  }
  // The updates as [n] + data.shape[1:] rows (a view), and a Slice of rows [from, to) of one.
  Shape rows_shape = data;
  rows_shape[0] = n;
  ValueId rows_of_updates;
  const auto update_rows = [&] {
    if (!rows_of_updates.valid()) {
      rows_of_updates = im.value_input(c, 2);
      if (updates != rows_shape)
        rows_of_updates = im.emit(c, Reshape{rows_shape}, {rows_of_updates}, c.name + "/rows");
    }
    return rows_of_updates;
  };
  std::vector<ValueId> pieces;
  const auto slice = [&](ValueId v, const Shape& shape, int64_t from, int64_t to,
                         const std::string& of) {
    if (pieces.size() >= kMaxGatherSlices)
      node_error(c, "more than " + std::to_string(kMaxGatherSlices) +
                        " runs of rows; Kiln takes ScatterND as a few slice assignments");
    if (from == 0 && to == shape[0]) return v;
    const Slice s = axis_slice(shape, 0, from, to);
    const std::string name = c.name + "/" + of + std::to_string(from) + "_" + std::to_string(to);
    return im.emit(c, s, {v}, name, name);
  };
  auto next = sources.begin();  // the first updated row at or after r
  for (int64_t r = 0; r < d;) {
    if (next == sources.end() || next->first > r) {  // a run of untouched rows
      const int64_t end = next == sources.end() ? d : next->first;
      pieces.push_back(slice(im.value_input(c, 0), data, r, end, "data"));
      r = end;
    } else if (reduction == "none") {  // a run of rows whose last updates are consecutive
      const int64_t first = next->second.back();
      int64_t end = r;
      for (;
           next != sources.end() && next->first == end && next->second.back() == first + (end - r);
           ++next)
        ++end;
      pieces.push_back(slice(update_rows(), rows_shape, first, first + (end - r), "updates"));
      r = end;
    } else {  // one row, its updates applied in order
      ValueId v = slice(im.value_input(c, 0), data, r, r + 1, "data");
      for (int64_t k : next->second)
        v = im.emit(c, Binary{how->second},
                    {v, slice(update_rows(), rows_shape, k, k + 1, "updates")},
                    c.name + "/row" + std::to_string(r) + "_" + std::to_string(k));
      pieces.push_back(v);
      ++next, ++r;
    }
  }
  if (pieces.size() == 1) return im.define_value(c, 0, pieces[0]);
  im.define_value(c, 0, im.emit(c, Concat{0}, std::move(pieces), im.output_name(c, 0)));
}

}  // namespace kiln::graph::onnx
