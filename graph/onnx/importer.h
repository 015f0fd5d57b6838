// Internals of the ONNX importer shared by its source files: import-time tensors, the table of
// ONNX names, attribute access and node emission. Not part of the public API.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "graph/onnx/functions.h"
#include "graph/onnx/onnx_import.h"
#include "onnx/onnx_pb.h"

namespace kiln::graph::onnx {

// Files and tensors larger than this are refused before anything is allocated for them.
constexpr int64_t kMaxFileBytes = int64_t{2} << 30;
// Import-time folding never builds a tensor larger than this (a malicious ConstantOfShape or
// Range must not exhaust memory); bigger data-movement results become graph nodes instead.
constexpr int64_t kMaxFoldElements = int64_t{1} << 24;
// No real network has a tensor this large; the bound keeps all size arithmetic far from
// int64 overflow.
constexpr int64_t kMaxGraphElements = int64_t{1} << 40;
// Together these bound what a malicious file can make the importer allocate: each folded
// tensor is capped above, all of them together here (a million small ConstantOfShape nodes
// must not add up to terabytes), and so are ranks and the number of graph nodes (Gather
// lowers to several).
constexpr int64_t kMaxFoldTotal = int64_t{1} << 27;
constexpr size_t kMaxRank = 32;
constexpr size_t kMaxGraphNodes = size_t{1} << 20;

std::string dtype_name(int32_t onnx_dtype);
// FLOAT, DOUBLE, FLOAT16 and BFLOAT16: stored as floats here (docs/onnx.md, "Half-precision
// models": float16 and bfloat16 tensors are float32 inside Kiln).
bool is_float_dtype(int32_t onnx_dtype);
// FLOAT, FLOAT16 and BFLOAT16: the dtypes a graph tensor, float32 inside Kiln, may have at the
// model's boundary or in a Cast (half-precision values exchanged as float32).
bool is_graph_float_dtype(int32_t onnx_dtype);
// `v` rounded to the nearest FLOAT16 (to even on ties; +-inf past 65504) or BFLOAT16 value, or
// `v` itself for any other dtype: what a Cast of a constant to that dtype keeps.
float round_to_dtype(float v, int32_t onnx_dtype);

// A tensor known at import time: an initializer, a Constant, a bound graph input or a folded
// result. Integer and bool tensors keep exact int64 values (shapes, indices, axes).
struct HostTensor {
  int32_t dtype = ::onnx::TensorProto::FLOAT;
  Shape dims;
  std::vector<float> f;    // FLOAT, DOUBLE, FLOAT16, BFLOAT16
  std::vector<int64_t> i;  // integer types and BOOL
  bool is_float() const { return is_float_dtype(dtype); }
  int64_t size() const { return static_cast<int64_t>(is_float() ? f.size() : i.size()); }
};

// proto_io.cpp: file access and TensorProto decoding, with every size checked before use.
std::string read_file(const std::string& path, const char* what);
// Element count of `dims`; Error naming `what` for a negative dimension or an overflow.
int64_t checked_elements(const Shape& dims, const std::string& what);
// Whether an external data location stays inside the model's directory: relative, no "..".
bool external_location_is_inside(const std::string& location);
// A tensor stored externally (data_location EXTERNAL) is read from its file under `base_dir`,
// the model's directory; without one, it is an Error.
HostTensor decode_tensor(const ::onnx::TensorProto& t, const std::string& what,
                         const std::string& base_dir = "");

// One ONNX node being converted.
struct NodeCtx {
  const ::onnx::NodeProto* proto = nullptr;
  std::string name;  // the node's name, or "<OpType>_<index>" when it has none
  int opset = 0;     // the default-domain opset of the model, or of the function it came from
  const std::string& op() const { return proto->op_type(); }
};

// Throws Error "node 'X' (OpType): <what>".
[[noreturn]] void node_error(const NodeCtx& c, const std::string& what);
// Error unless the node has between lo and hi inputs (counting empty optional slots).
void expect_inputs(const NodeCtx& c, int lo, int hi);

// Attributes, type-checked: a wrong attribute type is an Error naming the attribute.
const ::onnx::AttributeProto* find_attr(const NodeCtx& c, const char* name);
int64_t attr_int(const NodeCtx& c, const char* name, int64_t def);
float attr_float(const NodeCtx& c, const char* name, float def);
std::string attr_string(const NodeCtx& c, const char* name, const std::string& def);
std::vector<int64_t> attr_ints(const NodeCtx& c, const char* name);  // empty when absent
std::vector<float> attr_floats(const NodeCtx& c, const char* name);  // empty when absent
// v as an int in [lo, hi], else an Error naming `what`.
int to_int(const NodeCtx& c, int64_t v, const std::string& what, int64_t lo, int64_t hi);
// An axis in [-rank, rank) made non-negative, else an Error naming `what`.
int normalize_axis(const NodeCtx& c, int64_t axis, size_t rank, const std::string& what);

// What an ONNX name refers to. Aliases (Identity, Dropout) share one slot, so a host tensor
// is materialized into the graph at most once whichever name asks first.
struct Slot {
  ValueId value;                           // the graph value (for host tensors: once needed)
  std::shared_ptr<const HostTensor> host;  // set when the tensor is known at import time
  // For a float compute op whose inputs were all constants: emits the node on first use as
  // a graph tensor, so the network's arithmetic still runs in the graph.
  std::function<ValueId()> materialize;
  // Set instead of the above for an ONNX sequence (SplitToSequence, SequenceConstruct, ...):
  // its tensors, known in number and order at import time. Only the sequence ops take one.
  std::shared_ptr<const std::vector<std::shared_ptr<Slot>>> sequence;
};
struct Entry {
  std::shared_ptr<Slot> slot;
  std::string origin;  // for duplicate-name errors: "graph input", "node 'A' (Conv)", ...
};

class Importer {
 public:
  Importer(const ::onnx::ModelProto& model, const ImportOptions& options);
  Graph run();

  // --- node inputs ---
  bool has_input(const NodeCtx& c, int i) const;
  const Entry& input(const NodeCtx& c, int i) const;
  const std::string& input_name(const NodeCtx& c, int i) const;
  // The host tensor behind input i, or null when it is only known at run time.
  const HostTensor* host_input(const NodeCtx& c, int i) const;
  // The host tensor behind input i, or else its value computed now when it is a graph value
  // of constants only (float arithmetic on constants, e.g. TensorFlow-style "same" padding
  // computed from the image size); null when it depends on a graph input.
  const HostTensor* known_input(const NodeCtx& c, int i) const;
  // Input i, which must be known at import time (`role` names it in the error).
  const HostTensor& constant_input(const NodeCtx& c, int i, const std::string& role) const;
  // Integer constant input as a vector (1-D or scalar).
  std::vector<int64_t> int_list_input(const NodeCtx& c, int i, const std::string& role) const;
  // Input i as a graph value; a host tensor becomes a graph constant in the logical layout
  // for its rank (or the node computing it, for a folded float op).
  ValueId value_input(const NodeCtx& c, int i);
  // Input i, which must be a sequence: its tensors' slots (input() refuses a sequence).
  const std::vector<std::shared_ptr<Slot>>& sequence_input(const NodeCtx& c, int i) const;
  // Input i's slot, a tensor's (for a sequence op to hold it).
  std::shared_ptr<Slot> tensor_slot(const NodeCtx& c, int i) const { return input(c, i).slot; }
  // A tensor slot as a graph value (a host tensor becomes a constant, as for value_input);
  // `name` is for errors and the constant's name.
  ValueId slot_value(const NodeCtx& c, const std::string& name, Slot& s);
  // Input i, which must be known at import time, as a graph constant in `layout`.
  ValueId constant_value(const NodeCtx& c, int i, Layout layout);
  Shape input_shape(const NodeCtx& c, int i) const;  // static, for graph and host tensors
  const Graph& graph() const { return g_; }

  // --- node outputs ---
  int num_outputs(const NodeCtx& c) const { return c.proto->output_size(); }
  const std::string& output_name(const NodeCtx& c, int k) const;
  // Declared, and read by a later node or the graph outputs.
  bool output_used(const NodeCtx& c, int k) const;
  // Appends a node computing `op` (shape inferred; Errors name the ONNX node).
  ValueId emit(const NodeCtx& c, Op op, std::vector<ValueId> inputs, const std::string& out_name,
               const std::string& node_name = "");
  ValueId add_constant(const std::string& name, Shape shape, std::vector<float> data,
                       Layout layout);
  void define_value(const NodeCtx& c, int k, ValueId v);
  void define_host(const NodeCtx& c, int k, HostTensor t,
                   std::function<ValueId()> materialize = {});
  void define_alias(const NodeCtx& c, int k, int input_index);
  // The runtime value defined for output k, or an invalid id (undefined, a host tensor or a
  // sequence).
  ValueId output_value(const NodeCtx& c, int k) const;
  // Output k is the tensor of `slot` (SequenceAt) or the sequence of `elements`.
  void define_slot(const NodeCtx& c, int k, std::shared_ptr<Slot> slot) {
    define(c, k, std::move(slot));
  }
  void define_sequence(const NodeCtx& c, int k, std::vector<std::shared_ptr<Slot>> elements);
  // Booleans (float 0/1 in the graph): values an ONNX BOOL tensor becomes (a graph input, a
  // constant, a comparison's or logic op's result). A graph output declared BOOL must be one.
  void mark_boolean(ValueId v) { boolean_values_.insert(v.index); }
  bool is_boolean(ValueId v) const { return boolean_values_.count(v.index) != 0; }
  // Indices (float32 holding an integer an ONNX model types INT64): ArgMax's and ArgMin's
  // outputs, TopK's indices, and data movement of them (emit marks them), which a graph output
  // may be declared INT64 for.
  bool is_index(ValueId v) const { return index_values_.count(v.index) != 0; }
  // Quantized tensors (float32 holding the integers of an ONNX UINT8, INT8, ... tensor): the
  // outputs of QuantizeLinear and of data movement on them. 0 for any other value.
  void mark_quantized(ValueId v, int32_t onnx_dtype) { quantized_[v.index] = onnx_dtype; }
  int32_t quantized_dtype(ValueId v) const {
    const auto it = quantized_.find(v.index);
    return it == quantized_.end() ? 0 : it->second;
  }

 private:
  void check_opsets();
  void add_initializers();
  void add_graph_inputs();
  void convert_nodes();
  // The quantized type of node c's runtime inputs (0 if none); an Error where c may not read one.
  int32_t quantized_inputs(const NodeCtx& c) const;
  void add_graph_outputs();
  void drop_unused_nodes();
  std::shared_ptr<const HostTensor> evaluate_constant(ValueId v) const;
  ValueId named_output(ValueId v, const std::string& name);
  void define(const NodeCtx& c, int k, std::shared_ptr<Slot> slot);
  void add_entry(const std::string& name, Entry e, const std::string& what);
  // The graph value for a slot. With as_constant (weights and other compiled-in inputs) a
  // host tensor becomes a graph constant even when it was computed by folded float ops.
  ValueId slot_value(const std::string& name, Slot& s, Layout layout, const NodeCtx* c,
                     bool as_constant = false);

  const ::onnx::ModelProto& model_;
  const ImportOptions& options_;
  int opset_ = 0;
  std::vector<FlatNode> nodes_;  // the graph's nodes, model-local functions inlined
  Graph g_;
  std::unordered_map<std::string, Entry> table_;
  std::map<std::pair<const Slot*, Layout>, ValueId> constants_;  // materialized host tensors
  std::set<std::string> used_names_;                             // node inputs, graph outputs
  // All host tensors the nodes produced, against kMaxFoldTotal (mutable: constant_input may
  // evaluate a tensor computed from constants).
  mutable int64_t folded_elements_ = 0;
  std::set<uint32_t> boolean_values_;
  std::set<uint32_t> index_values_;
  std::map<uint32_t, int32_t> quantized_;
};

// Converters, one per ONNX op (or family); each defines the node's outputs in the table.
using Converter = void (*)(Importer&, const NodeCtx&);
// A convolution's bias (Conv, ConvTranspose): its constant input 2, or zeros for
// `out_channels` outputs when the node has none (ops_nn.cpp).
ValueId conv_bias(Importer& im, const NodeCtx& c, int64_t out_channels);
// ops_nn.cpp
void convert_conv(Importer& im, const NodeCtx& c);
void convert_batch_norm(Importer& im, const NodeCtx& c);
void convert_unary(Importer& im, const NodeCtx& c);
void convert_clip(Importer& im, const NodeCtx& c);
void convert_chain_step(Importer& im, const NodeCtx& c);
// The chain step of a unary ONNX op convert_chain_step takes (Tanh, Sin, Atanh, ...).
ChainStepKind unary_step_kind(const NodeCtx& c);
void convert_gelu(Importer& im, const NodeCtx& c);
void convert_swish(Importer& im, const NodeCtx& c);
void convert_prelu(Importer& im, const NodeCtx& c);
void convert_pow(Importer& im, const NodeCtx& c);  // ops_logic.cpp
void convert_binary(Importer& im, const NodeCtx& c);
void convert_pool(Importer& im, const NodeCtx& c);
void convert_global_pool(Importer& im, const NodeCtx& c);
void convert_gemm(Importer& im, const NodeCtx& c);
void convert_matmul(Importer& im, const NodeCtx& c);
// ops_einsum.cpp
void convert_einsum(Importer& im, const NodeCtx& c);
void convert_softmax(Importer& im, const NodeCtx& c);
void convert_layer_norm(Importer& im, const NodeCtx& c);
void convert_resize(Importer& im, const NodeCtx& c);
void convert_upsample(Importer& im, const NodeCtx& c);
// ops_conv_transpose.cpp
void convert_conv_transpose(Importer& im, const NodeCtx& c);
// ops_sequence.cpp: sequences of tensors known at import time (torch's dynamo exporter writes
// torch.split as SplitToSequence and its items as SequenceAt).
void convert_split_to_sequence(Importer& im, const NodeCtx& c);
void convert_sequence_at(Importer& im, const NodeCtx& c);
void convert_sequence_construct(Importer& im, const NodeCtx& c);
void convert_sequence_empty(Importer& im, const NodeCtx& c);
void convert_sequence_insert(Importer& im, const NodeCtx& c);
void convert_sequence_erase(Importer& im, const NodeCtx& c);
void convert_sequence_length(Importer& im, const NodeCtx& c);
void convert_concat_from_sequence(Importer& im, const NodeCtx& c);
// ops_conv3d.cpp: 3-D convolution as 2-D convolutions over the depth-gathered input.
struct Conv3dParams {
  int64_t groups = 1;
  std::array<int64_t, 3> stride{1, 1, 1}, dilation{1, 1, 1};  // (D, H, W)
  std::array<int64_t, 3> pad_begin{0, 0, 0}, pad_end{0, 0, 0};  // non-negative
};
// Emits the convolution of 5-D `x` by `weights` ([M, C / groups, KD, KH, KW] as `wdims`) plus
// `bias` ([M]); returns the [N, M, Do, Ho, Wo] result named `out_name`.
ValueId emit_conv3d(Importer& im, const NodeCtx& c, ValueId x, const Shape& wdims,
                    std::vector<float> weights, ValueId bias, const Conv3dParams& p,
                    const std::string& out_name);
void convert_conv_3d(Importer& im, const NodeCtx& c);
// ops_pool.cpp
void convert_pool_3d(Importer& im, const NodeCtx& c);
void convert_global_pool_3d(Importer& im, const NodeCtx& c);
void convert_lp_pool(Importer& im, const NodeCtx& c);
void convert_global_lp_pool(Importer& im, const NodeCtx& c);
// ops_reduce.cpp
void convert_reduce(Importer& im, const NodeCtx& c);
void convert_arg_reduce(Importer& im, const NodeCtx& c);
void convert_variadic(Importer& im, const NodeCtx& c);
void convert_depth_to_space(Importer& im, const NodeCtx& c);
void convert_space_to_depth(Importer& im, const NodeCtx& c);
void convert_tile(Importer& im, const NodeCtx& c);
// ops_logic.cpp
void convert_compare(Importer& im, const NodeCtx& c);
void convert_not(Importer& im, const NodeCtx& c);
void convert_is_nan_inf(Importer& im, const NodeCtx& c);
void convert_where(Importer& im, const NodeCtx& c);
void convert_expand(Importer& im, const NodeCtx& c);
// ops_norm.cpp
void convert_instance_norm(Importer& im, const NodeCtx& c);
void convert_batch_norm_training(Importer& im, const NodeCtx& c);  // from convert_batch_norm
void convert_group_norm(Importer& im, const NodeCtx& c);
void convert_lrn(Importer& im, const NodeCtx& c);
void convert_mean_variance_norm(Importer& im, const NodeCtx& c);
// ops_shape.cpp
void convert_reshape(Importer& im, const NodeCtx& c);
void convert_flatten(Importer& im, const NodeCtx& c);
void convert_squeeze(Importer& im, const NodeCtx& c);
void convert_unsqueeze(Importer& im, const NodeCtx& c);
void convert_transpose(Importer& im, const NodeCtx& c);
void convert_concat(Importer& im, const NodeCtx& c);
void convert_scatter_nd(Importer& im, const NodeCtx& c);
void convert_slice(Importer& im, const NodeCtx& c);
void convert_split(Importer& im, const NodeCtx& c);
void convert_pad(Importer& im, const NodeCtx& c);
void convert_gather(Importer& im, const NodeCtx& c);
void convert_gather_nd(Importer& im, const NodeCtx& c);
// ops_index.cpp
void convert_gather_elements(Importer& im, const NodeCtx& c);
void convert_scatter_elements(Importer& im, const NodeCtx& c);
// ops_const.cpp
void convert_identity(Importer& im, const NodeCtx& c);
void convert_dropout(Importer& im, const NodeCtx& c);
void convert_cast(Importer& im, const NodeCtx& c);
void convert_cast_like(Importer& im, const NodeCtx& c);
void convert_constant(Importer& im, const NodeCtx& c);
void convert_shape(Importer& im, const NodeCtx& c);
void convert_size(Importer& im, const NodeCtx& c);
void convert_constant_of_shape(Importer& im, const NodeCtx& c);
void convert_range(Importer& im, const NodeCtx& c);
void convert_cumsum(Importer& im, const NodeCtx& c);
void convert_trig(Importer& im, const NodeCtx& c);
void convert_trilu(Importer& im, const NodeCtx& c);
void convert_one_hot(Importer& im, const NodeCtx& c);
void convert_grid_sample(Importer& im, const NodeCtx& c);
void convert_topk(Importer& im, const NodeCtx& c);
void convert_mod(Importer& im, const NodeCtx& c);
// ops_quantize.cpp: quantized tensors as float32 integers (docs/onnx.md, "Quantized models").
void convert_quantize_linear(Importer& im, const NodeCtx& c);
void convert_dequantize_linear(Importer& im, const NodeCtx& c);
// QLinearConv, QLinearMatMul and onnxruntime's com.microsoft QOperator ops replaced by
// DequantizeLinear of their operands, the float op and QuantizeLinear of its result (an INT32
// bias dequantized at x_scale * w_scale); DynamicQuantizeLinear, ConvInteger and MatMulInteger
// by the ONNX ops that compute them.
std::vector<FlatNode> expand_qlinear_ops(std::vector<FlatNode> nodes);
void convert_expanded(Importer& im, const NodeCtx& c);  // never reached: expanded above
// Whether ONNX op `op` only moves a tensor's elements (Reshape, Transpose, MaxPool, ...), so
// that it may read a quantized tensor and gives one of the same type.
bool moves_quantized(const std::string& op);
// After a Resize or Upsample that read a quantized tensor: a linear or cubic one's output rounded
// and clamped back to `dtype`'s integers.
void requantize_resized(Importer& im, const NodeCtx& c, int32_t dtype);

// ops_nn.cpp: opset < 7 binary ops broadcast by attribute: an Error unless it is numpy's.
void check_legacy_broadcast(Importer& im, const NodeCtx& c);

// op_table.cpp: what the importer supports, one row per ONNX op.
struct OpInfo {
  const char* type;
  int min_opset;  // the oldest opset whose semantics the converter implements
  Converter fn;
  std::vector<int> constant_slots;  // constant_input_slots (onnx_import.h)
  // The op's attributes in opsets 1-28, space-separated. The converter reads each one or it
  // does not change inference (momentum, seed, consumed_inputs); any other is an error.
  const char* attributes;
};

const std::vector<OpInfo>& op_table();  // sorted by type
const OpInfo* find_op(const std::string& type);  // null for an unsupported op
// Whether `name` is an attribute of `op` in opsets 1-28 (or Kiln's own export annotation).
bool has_attribute(const OpInfo& op, const std::string& name);

// host_ops.cpp: folding on host tensors. Sizes are checked against kMaxFoldElements by the
// callers that can fall back to a graph node (fits_fold) and by the rest (Error).
bool fits_fold(const Shape& dims);
// The integer dtypes host tensors hold (INT8-INT64, UINT8, UINT16).
bool is_int_dtype(int32_t onnx_dtype);
HostTensor host_reshape(const HostTensor& t, Shape dims);
// Copies element src[k] of t into element k of a tensor shaped `dims`.
HostTensor host_gather_flat(const HostTensor& t, Shape dims, const std::vector<int64_t>& src);
HostTensor host_slice(const HostTensor& t, const Slice& s);
HostTensor host_concat(const std::vector<const HostTensor*>& parts, int axis);
// numpy-broadcast Add/Sub/Mul/Div/Max/Min/Pow: exact (overflow-checked) on integers, float
// otherwise; the comparisons and logic ops give a BOOL tensor (the logic ops also take BOOL).
HostTensor host_binary(const NodeCtx& c, BinaryOp op, const HostTensor& a, const HostTensor& b);
// Where(cond, x, y) with numpy broadcasting; x and y of one dtype.
HostTensor host_where(const NodeCtx& c, const HostTensor& cond, const HostTensor& x,
                      const HostTensor& y);
// t broadcast to `out` (numpy; out is broadcast(t.dims, something)).
HostTensor host_broadcast(const HostTensor& t, const Shape& out);
HostTensor host_cast(const NodeCtx& c, const HostTensor& t, int32_t to);
// The Slice of `dims` that keeps every axis whole but `axis`, of which it takes [from, to) by
// `step`.
Slice axis_slice(const Shape& dims, int axis, int64_t from, int64_t to, int64_t step = 1);
// Output dims of a normalized slice (0 on an axis where it is empty).
Shape slice_dims(const Shape& in, const Slice& s);
// ONNX Slice parameters (any axes, negative indices, out-of-range values) normalized to one
// entry per axis as the IR's Slice expects.
Slice normalize_slice(const NodeCtx& c, const Shape& dims, const std::vector<int64_t>& starts,
                      const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                      const std::vector<int64_t>& steps);

}  // namespace kiln::graph::onnx
