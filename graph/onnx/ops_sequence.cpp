// ONNX -> IR for sequences of tensors. Kiln has no sequence type at run time: a sequence is known
// at import time as a list of tensors (Slot::sequence), each a graph value or a host tensor, and
// the sequence ops pick, add or join those tensors. torch's dynamo exporter (torch 2.5) writes
// torch.split / torch.chunk as SplitToSequence and each item taken from the result as
// SequenceAt; ShuffleNet's channel split, MixNet's and EfficientViT's are that.
#include "graph/onnx/importer.h"

namespace kiln::graph::onnx {
namespace {

using Elements = std::vector<std::shared_ptr<Slot>>;

// A split into more parts than this is no network's (each part is a node): refused before the
// list of sizes is made, so a malicious axis length cannot exhaust memory.
constexpr int64_t kMaxParts = 4096;

std::shared_ptr<Slot> value_slot(ValueId v) {
  auto s = std::make_shared<Slot>();
  s->value = v;
  return s;
}

std::shared_ptr<Slot> host_slot(HostTensor t) {
  auto s = std::make_shared<Slot>();
  s->host = std::make_shared<const HostTensor>(std::move(t));
  return s;
}

// A position in a sequence of `size` tensors (negative from the end), from constant input i;
// `insert` allows size itself (SequenceInsert appends there).
size_t position_input(Importer& im, const NodeCtx& c, int i, size_t size, bool insert) {
  const std::vector<int64_t> p = im.int_list_input(c, i, "position");
  if (p.size() != 1) node_error(c, "position must be a scalar");
  const int64_t n = static_cast<int64_t>(size);
  const int64_t k = p[0] < 0 ? p[0] + n : p[0];
  if (k < 0 || k > n || (k == n && !insert))
    node_error(c, "position " + std::to_string(p[0]) + " is outside the sequence of " +
                      std::to_string(n) + " tensors");
  return static_cast<size_t>(k);
}

[[noreturn]] void too_many_parts(const NodeCtx& c, int64_t parts) {
  node_error(c, "a split into " + std::to_string(parts) + " parts; Kiln takes at most " +
                    std::to_string(kMaxParts));
}

Shape slot_shape(const Importer& im, const Slot& s) {
  return s.value.valid() ? im.graph().value(s.value).shape : s.host->dims;
}

}  // namespace

const Elements& Importer::sequence_input(const NodeCtx& c, int i) const {
  const Entry& e = table_.at(input_name(c, i));
  if (!e.slot->sequence)
    node_error(c, "input '" + input_name(c, i) + "' must be a sequence, but it is a tensor");
  return *e.slot->sequence;
}

void Importer::define_sequence(const NodeCtx& c, int k, Elements elements) {
  auto s = std::make_shared<Slot>();
  s->sequence = std::make_shared<const Elements>(std::move(elements));
  define(c, k, std::move(s));
}

// SplitToSequence(input, split?): split a scalar chunk size (the last chunk smaller) or a list
// of sizes; without it, chunks of 1, the axis dropped unless keepdims.
void convert_split_to_sequence(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 2);
  const Shape in = im.input_shape(c, 0);
  const int axis = normalize_axis(c, attr_int(c, "axis", 0), in.size(), "attribute 'axis'");
  const int64_t d = in[axis];
  std::vector<int64_t> sizes;
  bool drop_axis = false;
  if (im.has_input(c, 1)) {
    const HostTensor& split = im.constant_input(c, 1, "split");
    if (split.is_float() || split.dims.size() > 1)
      node_error(c, "split must be an integer scalar or 1-D tensor");
    if (split.dims.empty()) {
      const int64_t chunk = split.i.at(0);
      if (chunk <= 0) node_error(c, "split " + std::to_string(chunk) + " must be positive");
      if ((d + chunk - 1) / chunk > kMaxParts) too_many_parts(c, (d + chunk - 1) / chunk);
      for (int64_t at = 0; at < d; at += chunk) sizes.push_back(std::min(chunk, d - at));
    } else {
      if (split.size() > kMaxParts) too_many_parts(c, split.size());
      sizes = split.i;
    }
  } else {
    if (d > kMaxParts) too_many_parts(c, d);
    sizes.assign(static_cast<size_t>(d), 1);
    drop_axis = attr_int(c, "keepdims", 1) == 0;
  }
  int64_t total = 0;
  for (int64_t v : sizes) {
    if (v <= 0 || v > d)
      node_error(c, "split size " + std::to_string(v) + " is out of range for an axis of " +
                        std::to_string(d) + " (Kiln tensors cannot be empty)");
    total += v;
  }
  if (total != d)
    node_error(c, "split sizes sum to " + std::to_string(total) + ", not to " + std::to_string(d) +
                      ", the size of axis " + std::to_string(axis));
  const Slot& source = *im.input(c, 0).slot;
  const HostTensor* h = source.host && !source.materialize ? source.host.get() : nullptr;
  Elements parts;
  int64_t offset = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const Slice s = axis_slice(in, axis, offset, offset + sizes[k]);
    offset += sizes[k];
    Shape dims = slice_dims(in, s);
    if (drop_axis) dims.erase(dims.begin() + axis);
    if (h && fits_fold(dims)) {
      parts.push_back(host_slot(host_reshape(host_slice(*h, s), dims)));
      continue;
    }
    const std::string name = im.output_name(c, 0) + "[" + std::to_string(k) + "]";
    const std::string node = c.name + "/" + std::to_string(k);
    ValueId v = im.emit(c, s, {im.value_input(c, 0)}, drop_axis ? name + "/slice" : name, node);
    if (drop_axis) v = im.emit(c, Reshape{dims}, {v}, name, node + "/squeeze");
    parts.push_back(value_slot(v));
  }
  im.define_sequence(c, 0, std::move(parts));
}

void convert_sequence_at(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  const Elements& seq = im.sequence_input(c, 0);
  im.define_slot(c, 0, seq[position_input(im, c, 1, seq.size(), false)]);
}

void convert_sequence_construct(Importer& im, const NodeCtx& c) {
  if (c.proto->input_size() == 0) node_error(c, "expected at least one input");
  Elements seq;
  for (int i = 0; i < c.proto->input_size(); ++i) seq.push_back(im.tensor_slot(c, i));
  im.define_sequence(c, 0, std::move(seq));
}

void convert_sequence_empty(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 0, 0);
  const int64_t dtype = attr_int(c, "dtype", ::onnx::TensorProto::FLOAT);
  if (dtype != ::onnx::TensorProto::FLOAT)
    node_error(c, "a sequence of " + dtype_name(static_cast<int32_t>(dtype)) +
                      " tensors; Kiln's sequences hold FLOAT tensors");
  im.define_sequence(c, 0, {});
}

void convert_sequence_insert(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 3);
  Elements seq = im.sequence_input(c, 0);
  const size_t at = im.has_input(c, 2) ? position_input(im, c, 2, seq.size(), true) : seq.size();
  seq.insert(seq.begin() + static_cast<std::ptrdiff_t>(at), im.tensor_slot(c, 1));
  im.define_sequence(c, 0, std::move(seq));
}

void convert_sequence_erase(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 2);
  Elements seq = im.sequence_input(c, 0);
  if (seq.empty()) node_error(c, "the sequence is empty");
  const size_t at =
      im.has_input(c, 1) ? position_input(im, c, 1, seq.size(), false) : seq.size() - 1;
  seq.erase(seq.begin() + static_cast<std::ptrdiff_t>(at));
  im.define_sequence(c, 0, std::move(seq));
}

void convert_sequence_length(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  HostTensor n;
  n.dtype = ::onnx::TensorProto::INT64;
  n.i = {static_cast<int64_t>(im.sequence_input(c, 0).size())};
  im.define_host(c, 0, std::move(n));
}

// ConcatFromSequence: Concat of the tensors along `axis`, or with new_axis = 1 their stack
// along a new axis (each reshaped to size 1 there first).
void convert_concat_from_sequence(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const Elements& seq = im.sequence_input(c, 0);
  if (seq.empty()) node_error(c, "the sequence is empty; Kiln tensors cannot be");
  const bool new_axis = attr_int(c, "new_axis", 0) != 0;
  const Shape first = slot_shape(im, *seq[0]);
  const int axis = normalize_axis(c, attr_int(c, "axis", 0), first.size() + (new_axis ? 1 : 0),
                                  "attribute 'axis'");
  const std::string out = im.output_name(c, 0);
  std::vector<ValueId> parts;
  for (size_t k = 0; k < seq.size(); ++k) {
    const Shape dims = slot_shape(im, *seq[k]);
    if (dims.size() != first.size())
      node_error(c, "the sequence's tensors " + to_string(first) + " and " + to_string(dims) +
                        " differ in rank");
    ValueId v = im.slot_value(c, out + "[" + std::to_string(k) + "]", *seq[k]);
    if (new_axis) {
      Shape stacked = dims;
      stacked.insert(stacked.begin() + axis, 1);
      v = im.emit(c, Reshape{stacked}, {v}, out + "[" + std::to_string(k) + "]/unsqueeze",
                  c.name + "/" + std::to_string(k));
    }
    parts.push_back(v);
  }
  if (parts.size() == 1) return im.define_slot(c, 0, value_slot(parts[0]));
  im.define_value(c, 0, im.emit(c, Concat{axis}, std::move(parts), out));
}

}  // namespace kiln::graph::onnx
