// Graph serialization: one attribute list per op, shared by the writer and the reader so the
// two can never disagree (the byte codec: graph/serialize_codec.h).
#include "graph/serialize.h"

#include "graph/bf16.h"
#include "graph/file_io.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include "graph/serialize_codec.h"
#include "graph/verify.h"

namespace kiln::graph {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'G', 'R', 'F', '1'};
// On-disk op tags: an op's position in this list, independent of graph::Op's order. Append a
// new op at the end (and bump the version); never reorder. Version 2 used graph::Op's order.
template <typename... T>
struct OpList {};
using TaggedOps =
    OpList<Conv2d, BatchNorm, Relu, Clip, LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Binary,
           Pool2d, GlobalPool, Gemm, MatMul, Reshape, Transpose, Concat, Slice, Pad, Softmax,
           Reduce, LayoutTransform, ElementwiseChain /* v3 */, LayerNorm, Resize /* v5 */,
           Tile /* v8 */, Where /* v9 */, GroupNorm /* v20 */, GridSample /* v24 */, TopK /* v25 */,
           GatherElements /* v27 */, ScatterElements /* v27 */>;
template <typename T, typename... Ts>
constexpr size_t tag_in(OpList<Ts...>) {
  constexpr bool same[] = {std::is_same_v<T, Ts>...};
  for (size_t i = 0; i < sizeof...(Ts); ++i)
    if (same[i]) return i;
  return sizeof...(Ts);
}
template <typename T>
constexpr size_t kTag = tag_in<T>(TaggedOps{});
constexpr size_t kNumOpTags = std::variant_size_v<Op>;
// Limits no real model comes near; they keep corrupted sizes from overflowing int64 arithmetic
// in shape inference and from asking for absurd allocations.
constexpr int64_t kMaxDim = int64_t{1} << 40;
constexpr int64_t kMaxElements = int64_t{1} << 40;
constexpr int64_t kMaxIndex = int64_t{1} << 40;  // Slice bounds, Pad amounts

using serial::Reader;
using serial::Writer;

// ---- Attributes: one function per op, read and written through the same calls. ----

template <typename IO, typename T>
void attrs(IO&, T&) {
  static_assert(std::is_empty_v<T>, "serialize.cpp: this op has attributes; add its attrs()");
}
template <typename IO>
void chain_steps(IO& io, std::vector<ChainStep>& steps) {
  if constexpr (std::is_same_v<IO, Writer>) {
    io.u32(static_cast<uint32_t>(steps.size()));
  } else {
    steps.resize(io.count(9, "chain steps"));
  }
  for (ChainStep& st : steps) {
    // 8 added mish, 9 floor ... less_equal, 21 sign ... is_inf, 22 sin, cos, tan, 23 sinh
    // ... atanh, 26 prelu
    io.enum8(st.kind, io.version >= 26   ? kNumChainStepKinds
                      : io.version >= 23 ? 49
                      : io.version >= 22 ? 41
                      : io.version >= 21 ? 38
                      : io.version >= 10 ? 34
                      : io.version >= 8  ? 25
                                         : 24);
    io.f32(st.a);
    io.f32(st.b);
  }
}
template <typename IO>
void attrs(IO& io, Pool2d& p);
template <typename IO>
void attrs(IO& io, Resize& r);
template <typename IO>
void attrs(IO& io, Conv2d& c) {
  for (int* v : {&c.stride_h, &c.stride_w, &c.pad_top, &c.pad_left, &c.pad_bottom, &c.pad_right,
                 &c.dilation_h, &c.dilation_w})
    io.i32(*v);
  io.f32(c.activation.lo);
  io.f32(c.activation.hi);
  io.i32(c.groups);
  io.flag(c.residual);
  if (io.version >= 4) chain_steps(io, c.post);  // versions 1 and 3 have no post steps
  if (io.version >= 11) {
    chain_steps(io, c.pre);
    io.flag(c.nchw_input);
  }
  if (io.version >= 12) {
    bool pooled = c.pool.has_value();
    io.flag(pooled);
    if (pooled) {
      if (!c.pool) c.pool.emplace();
      attrs(io, *c.pool);
    }
  }
  if (io.version >= 13) io.flag(c.bf16);
  if (io.version >= 15) {
    bool expanded = c.expand.has_value();
    io.flag(expanded);
    if (expanded) {
      if (!c.expand) c.expand.emplace();
      io.f32(c.expand->lo);
      io.f32(c.expand->hi);
      if (io.version >= 16) chain_steps(io, c.expand_post);
    }
  }
  if (io.version >= 16) io.flag(c.input_scale);
  if (io.version >= 17) {
    bool resized = c.resize.has_value();
    io.flag(resized);
    if (resized) {
      if (!c.resize) c.resize.emplace();
      attrs(io, *c.resize);
      io.flag(c.nchw_output);
    }
    io.flag(c.shortcut);
  }
  if (io.version >= 18) io.i32(c.max_winograd_tile);
  if (io.version >= 19) io.flag(c.pool_first);
}
template <typename IO>
void attrs(IO& io, BatchNorm& b) { io.f32(b.epsilon); }
template <typename IO>
void attrs(IO& io, Clip& c) {
  io.f32(c.min);
  io.f32(c.max);
}
template <typename IO>
void attrs(IO& io, LeakyRelu& l) { io.f32(l.alpha); }
template <typename IO>
void attrs(IO& io, HardSigmoid& h) {
  io.f32(h.alpha);
  io.f32(h.beta);
}
template <typename IO>
void attrs(IO& io, Binary& b) {  // 8 added max and min, 9 pow and the comparisons and logic ops
  io.enum8(b.op, io.version >= 10 ? kNumBinaryOps : io.version >= 8 ? 6 : 4);
}
template <typename IO>
void attrs(IO& io, Pool2d& p) {
  io.enum8(p.kind, 2);
  for (int* v : {&p.kernel_h, &p.kernel_w, &p.stride_h, &p.stride_w, &p.pad_top, &p.pad_left,
                 &p.pad_bottom, &p.pad_right, &p.dilation_h, &p.dilation_w})
    io.i32(*v);
  io.flag(p.ceil_mode);
  io.flag(p.count_include_pad);
}
template <typename IO>
void attrs(IO& io, GlobalPool& p) { io.enum8(p.kind, 2); }
template <typename IO>
void attrs(IO& io, Gemm& g) {
  io.flag(g.trans_a);
  io.flag(g.trans_b);
  io.f32(g.alpha);
  io.f32(g.beta);
}
template <typename IO>
void attrs(IO& io, Reshape& r) {
  io.i64s(r.shape, 1, kMaxDim);
  if (io.version >= 7) io.enum8(r.layout, 5);  // versions before 7: always logical
}
template <typename IO>
void attrs(IO& io, Transpose& t) { io.i32s(t.perm); }
template <typename IO>
void attrs(IO& io, Concat& c) { io.i32(c.axis); }
template <typename IO>
void attrs(IO& io, Slice& s) {
  io.i64s(s.starts, -kMaxIndex, kMaxIndex);
  io.i64s(s.ends, -kMaxIndex, kMaxIndex);
  io.i64s(s.steps, -kMaxIndex, kMaxIndex);
}
template <typename IO>
void attrs(IO& io, Pad& p) {
  io.i64s(p.pads, -kMaxIndex, kMaxIndex);
  io.f32(p.value);
  if (io.version >= 6) io.enum8(p.mode, 3);  // older versions pad with a constant only
}
template <typename IO>
void attrs(IO& io, Softmax& s) {
  io.i32(s.axis);
  io.flag(s.coerce_2d);
  if (io.version >= 8) io.enum8(s.kind, kNumSoftmaxKinds);  // before 8: Softmax only
}
template <typename IO>
void attrs(IO& io, Reduce& r) {
  io.i32s(r.axes);
  io.flag(r.keepdims);
  if (io.version >= 8) io.enum8(r.kind, io.version >= 9 ? kNumReduceKinds : 10);  // before 8: ReduceMean only
}
template <typename IO>
void attrs(IO& io, Tile& t) { io.i64s(t.repeats, 1, kMaxDim); }
template <typename IO>
void attrs(IO& io, LayerNorm& l) {
  io.i32(l.axis);
  io.f32(l.epsilon);
}
template <typename IO>
void attrs(IO& io, GroupNorm& gn) {
  io.i32(gn.groups);
  io.f32(gn.epsilon);
  io.flag(gn.residual);
  chain_steps(io, gn.post);
}
template <typename IO>
void attrs(IO& io, TopK& t) {
  io.i32(t.axis);
  io.i64(t.k);
  io.flag(t.largest);
  io.flag(t.indices);
}
template <typename IO>
void attrs(IO& io, GatherElements& g) {
  io.i32(g.axis);
  io.flag(g.broadcast);
}
template <typename IO>
void attrs(IO& io, ScatterElements& sc) {
  io.i32(sc.axis);
  io.enum8(sc.reduction, 5);
}
template <typename IO>
void attrs(IO& io, GridSample& gs) {
  io.enum8(gs.mode, 3);
  io.enum8(gs.padding, 3);
  io.flag(gs.align_corners);
}
template <typename IO>
void attrs(IO& io, Resize& r) {
  io.enum8(r.mode, io.version >= 9 ? 3 : 2);  // 9 added cubic and tf_crop_and_resize
  io.enum8(r.coordinates, io.version >= 9 ? 6 : 5);
  io.enum8(r.nearest, 4);
  io.i64s(r.sizes, 1, kMaxDim);
  if constexpr (std::is_same_v<IO, Writer>) {
    io.u32(static_cast<uint32_t>(r.scales.size()));
  } else {
    r.scales.resize(io.count(4, "scales"));
  }
  for (float& f : r.scales) io.f32(f);
  if (io.version < 9) return;
  io.f32(r.cubic_a);
  io.flag(r.exclude_outside);
  io.f32(r.extrapolation);
  if constexpr (std::is_same_v<IO, Writer>) {
    io.u32(static_cast<uint32_t>(r.roi.size()));
  } else {
    r.roi.resize(io.count(4, "roi"));
  }
  for (float& f : r.roi) io.f32(f);
}
template <typename IO>
void attrs(IO& io, ElementwiseChain& c) { chain_steps(io, c.steps); }
template <typename IO>
void attrs(IO& io, LayoutTransform& t) {
  io.enum8(t.from, 5);
  io.enum8(t.to, 5);
}

template <size_t I>
Op make_alternative() {
  return Op(std::in_place_index<I>);
}
// The op with this tag, default-constructed; nullopt for a tag no op has.
template <size_t... I>
std::optional<Op> make_op(uint8_t tag, std::index_sequence<I...>) {
  static_assert(((kTag<std::variant_alternative_t<I, Op>> < kNumOpTags) && ...),
                "an op of graph::Op is missing from TaggedOps");
  static const auto makers = [] {
    std::array<Op (*)(), kNumOpTags> m{};
    ((m[kTag<std::variant_alternative_t<I, Op>>] = &make_alternative<I>), ...);
    return m;
  }();
  if (tag >= kNumOpTags || !makers[tag]) return std::nullopt;
  return makers[tag]();
}

// ---- Graph structure ----

void write_ids(Writer& w, const std::vector<ValueId>& ids) {
  w.u32(static_cast<uint32_t>(ids.size()));
  for (ValueId v : ids) w.u32(v.index);
}

std::vector<ValueId> read_ids(Reader& r, size_t num_values, const char* what) {
  std::vector<ValueId> ids(r.count(4, what));
  for (ValueId& v : ids) {
    v.index = r.u32();
    if (v.index >= num_values)
      r.fail(std::string(what) + " refer to value %" + std::to_string(v.index) + " of " + std::to_string(num_values));
  }
  return ids;
}

// How a constant's data is stored (the byte after a value's shape; version 13 and before: a
// flag, none or f32).
enum class Storage : uint8_t { none = 0, f32 = 1, bf16 = 2 };

void write_value(Writer& w, const Value& v, bool bf16) {
  w.str(v.name);
  DType dtype = v.dtype;
  Layout layout = v.layout;
  w.enum8(dtype, 1);
  w.enum8(layout, 5);
  Shape shape = v.shape;
  w.i64s(shape, 1, kMaxDim);
  const Storage storage = !v.is_constant() ? Storage::none : bf16 ? Storage::bf16 : Storage::f32;
  w.u8(static_cast<uint8_t>(storage));
  if (storage == Storage::f32) w.floats(*v.data);
  if (storage == Storage::bf16) w.bf16s(*v.data);
}

Value read_value(Reader& r) {
  Value v;
  r.str(v.name);
  r.enum8(v.dtype, 1);
  r.enum8(v.layout, 5);
  r.i64s(v.shape, 1, kMaxDim);
  int64_t elements = 1;
  for (int64_t d : v.shape) {
    if (d > kMaxElements / elements) r.fail("value '" + v.name + "' has too many elements");
    elements *= d;
  }
  const uint8_t storage = r.u8();
  if (storage > (r.version >= 14 ? 2 : 1))
    r.fail("value '" + v.name + "' has an unknown storage kind " + std::to_string(storage));
  if (storage != static_cast<uint8_t>(Storage::none)) {
    auto data = std::make_shared<std::vector<float>>();
    if (storage == static_cast<uint8_t>(Storage::bf16))
      r.bf16s(*data, static_cast<uint64_t>(elements));
    else
      r.floats(*data, static_cast<uint64_t>(elements));
    v.data = std::move(data);
  }
  return v;
}

void write_node(Writer& w, const Node& n) {
  w.str(n.name);
  w.u8(static_cast<uint8_t>(std::visit([](const auto& a) { return kTag<std::decay_t<decltype(a)>>; }, n.op)));
  Op op = n.op;  // the attribute functions take references for the reader's sake
  std::visit([&](auto& a) { attrs(w, a); }, op);
  write_ids(w, n.inputs);
  write_ids(w, n.outputs);
  w.u32(static_cast<uint32_t>(n.computes.size()));
  for (const std::string& c : n.computes) w.str(c);
}

Node read_node(Reader& r, size_t num_values) {
  Node n;
  r.str(n.name);
  const uint8_t tag = r.u8();
  std::optional<Op> op = make_op(tag, std::make_index_sequence<std::variant_size_v<Op>>{});
  if (!op) r.fail("unknown op tag " + std::to_string(tag));
  n.op = std::move(*op);
  std::visit([&](auto& a) { attrs(r, a); }, n.op);
  n.inputs = read_ids(r, num_values, "node inputs");
  n.outputs = read_ids(r, num_values, "node outputs");
  n.computes.resize(r.count(4, "computes entries"));
  for (std::string& c : n.computes) r.str(c);
  return n;
}

// The checksum in a file's last 8 bytes (size >= 8).
uint64_t stored_checksum(const char* bytes, size_t size) {
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h |= uint64_t{static_cast<uint8_t>(bytes[size - 8 + i])} << (8 * i);
  return h;
}

Graph read_graph(const char* bytes, size_t size,
                 const std::function<void(size_t, size_t)>& consumed = nullptr) {
  const size_t header = sizeof(kMagic) + 4;
  if (size < sizeof(kMagic) || std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0)
    throw Error("not a Kiln graph file (no KILNGRF1 magic)");
  if (size < header + 8) throw Error("corrupt graph file: truncated header");
  Reader r(bytes, size - 8, consumed);
  for (size_t i = 0; i < sizeof(kMagic); ++i) r.u8();
  const uint32_t version = r.u32();
  // Version 1 is 3 without ElementwiseChain, 3 is 4 without Conv2d's post steps, 4 is 5
  // without LayerNorm and the gelu steps, 5 is 6 without Pad's mode, 6 is 7 without Reshape's
  // layout, 7 is 8 without the reduction and softmax kinds, Max/Min, mish and Tile, 8 is 9
  // without cubic and tf_crop_and_resize Resize attributes and the arg reductions, 9 is 10
  // without Where, the Binary ops from pow on and the chain steps from floor on, 10 is 11
  // without Conv2d's pre steps, 11 is 12 without Conv2d's pooling, 12 is 13 without Conv2d's
  // bf16 flag, 13 is 14 without constants stored as bfloat16, 14 is 15 without Conv2d's
  // expansion, 15 is 16 without the expansion's post steps and Conv2d's input scale, 16 is 17
  // without Conv2d's resize and shortcut, 17 is 18 without Conv2d's Winograd tile cap, 18 is
  // 19 without Conv2d's pool_first, 19 is 20 without GroupNorm, 20 is 21 without the chain
  // steps from sign on, 21 is 22 without sin, cos and tan, 22 is 23 without sinh ... atanh,
  // 23 is 24 without GridSample, 24 is 25 without TopK, 25 is 26 without the prelu step,
  // 26 is 27 without GatherElements and ScatterElements;
  // version 2 numbered ops by their order in graph::Op.
  if (version != 1 && version != 3 && version != 4 && version != 5 && version != 6 &&
      version != 7 && version != 8 && version != 9 && version != 10 && version != 11 &&
      version != 12 && version != 13 && version != 14 && version != 15 && version != 16 &&
      version != 17 && version != 18 && version != 19 && version != 20 && version != 21 &&
      version != 22 && version != 23 && version != 24 && version != 25 && version != 26 &&
      version != kGraphFormatVersion)
    throw Error("graph file format version " + std::to_string(version) +
                " is not supported (this Kiln reads versions 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, "
                "13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26 and " +
                std::to_string(kGraphFormatVersion) + "; recompile the model)");
  r.version = version;
  if (stored_checksum(bytes, size) != format_checksum(bytes, size - 8))
    throw Error("corrupt graph file: checksum mismatch (the file is damaged or truncated)");
  if (consumed) consumed(0, size);  // read again from here on, a piece at a time

  Graph g;
  const uint32_t num_values = r.count(11, "values");  // the smallest value takes 11 bytes
  for (uint32_t i = 0; i < num_values; ++i) g.add_value(read_value(r));
  const uint32_t num_nodes = r.count(17, "nodes");  // the smallest node takes 17 bytes
  for (uint32_t i = 0; i < num_nodes; ++i) g.add_node(read_node(r, num_values));
  g.inputs = read_ids(r, num_values, "graph inputs");
  g.outputs = read_ids(r, num_values, "graph outputs");
  if (r.left() != 0) r.fail(std::to_string(r.left()) + " unexpected bytes after the graph");
  return g;
}

}  // namespace

uint64_t format_checksum(const char* data, size_t size) {
  // FNV-1a over 64-bit little-endian words: each step is a bijection of the running state for
  // a fixed word and of the word for a fixed state, so any one changed word changes the result.
  uint64_t h = 0xcbf29ce484222325ull;
  constexpr uint64_t kPrime = 0x100000001b3ull;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w = 0;
    for (int b = 0; b < 8; ++b) w |= uint64_t{static_cast<uint8_t>(data[i + b])} << (8 * b);
    h = (h ^ w) * kPrime;
  }
  for (; i < size; ++i) h = (h ^ static_cast<uint8_t>(data[i])) * kPrime;
  h ^= size;
  h = (h ^ (h >> 33)) * 0xff51afd7ed558ccdull;  // final mix so every bit affects every bit
  return h ^ (h >> 33);
}

namespace {

// The constants read only as the weights of bf16 convolutions (Conv2d::bf16), which round
// them to bfloat16 before any use: stored as bfloat16, half the bytes, nothing lost.
std::vector<bool> bf16_only_weights(const Graph& g) {
  std::vector<int> readers(g.values().size(), 0), bf16_readers(g.values().size(), 0);
  for (const Node& n : g.nodes()) {
    const auto* c = std::get_if<Conv2d>(&n.op);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      ++readers[n.inputs[i].index];
      bf16_readers[n.inputs[i].index] += c && c->bf16 && i == 1;
    }
  }
  for (ValueId out : g.outputs) readers[out.index] = -1;
  std::vector<bool> out(g.values().size(), false);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = g.values()[i].is_constant() && readers[i] > 0 && readers[i] == bf16_readers[i];
  return out;
}

}  // namespace

std::string serialize(const Graph& g) {
  Writer w;
  for (char c : kMagic) w.u8(static_cast<uint8_t>(c));
  w.u32(kGraphFormatVersion);
  w.u32(static_cast<uint32_t>(g.values().size()));
  const std::vector<bool> bf16 = bf16_only_weights(g);
  for (size_t i = 0; i < g.values().size(); ++i) write_value(w, g.values()[i], bf16[i]);
  w.u32(static_cast<uint32_t>(g.nodes().size()));
  for (const Node& n : g.nodes()) write_node(w, n);
  write_ids(w, g.inputs);
  write_ids(w, g.outputs);
  w.u64(format_checksum(w.bytes().data(), w.bytes().size()));
  return std::move(w.bytes());
}

namespace {

Graph verified(Graph g) {
  try {
    verify(g, "in the graph file");
  } catch (const std::logic_error& e) {
    // A corrupted graph must not surface as an internal error from a deeper check.
    throw Error(std::string("corrupt graph file: ") + e.what());
  }
  return g;
}

}  // namespace

Graph deserialize(const std::string& bytes) {
  return verified(read_graph(bytes.data(), bytes.size()));
}

uint64_t write_graph_file(const Graph& g, const std::string& path) {
  const std::string bytes = serialize(g);
  write_file_atomically(path, bytes);
  return stored_checksum(bytes.data(), bytes.size());
}

Graph read_graph_file(const std::string& path, uint64_t* checksum) {
  // Mapped, and each constant's pages given back once it is copied out: the weights are
  // resident once, not twice (the file and the graph), while a model loads.
  const MappedFile file(path, "Kiln graph file", 0, std::string(kMagic, sizeof(kMagic)));
  try {
    Graph g = verified(read_graph(file.data(), file.size(), [&](size_t from, size_t to) {
      file.release(from, to);
    }));
    if (checksum) *checksum = stored_checksum(file.data(), file.size());
    return g;
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace kiln::graph
