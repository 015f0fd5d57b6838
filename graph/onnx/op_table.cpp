// The ONNX importer's op table: each supported op with its oldest supported opset, converter,
// inputs compiled in as constants, and every attribute it has in opsets 1-28; and the public
// queries on it (onnx_import.h).
#include <algorithm>
#include <string>
#include <vector>

#include "graph/onnx/importer.h"

namespace kiln::graph::onnx {
namespace {

// Kiln's own annotation on the nodes it exports (onnx_export.h); it changes nothing.
constexpr const char* kExportAnnotation = "kiln_computes";

}  // namespace

bool has_attribute(const OpInfo& op, const std::string& name) {
  const std::string list = std::string(" ") + op.attributes + " ";
  return name == kExportAnnotation ||
         (!name.empty() && list.find(" " + name + " ") != std::string::npos);
}

const std::vector<OpInfo>& op_table() {
  // One op per line, long attribute lists wrapped by hand.
  // clang-format off
  static const std::vector<OpInfo> table = {
      {"Abs", 6, convert_chain_step, {}, "consumed_inputs"},
      {"Acos", 7, convert_trig, {}, ""},
      {"Acosh", 9, convert_trig, {}, ""},
      {"Add", 1, convert_binary, {}, "axis broadcast consumed_inputs"},
      {"And", 1, convert_compare, {}, "axis broadcast"},
      {"ArgMax", 1, convert_arg_reduce, {}, "axis keepdims select_last_index"},
      {"ArgMin", 1, convert_arg_reduce, {}, "axis keepdims select_last_index"},
      {"Asin", 7, convert_trig, {}, ""},
      {"Asinh", 9, convert_trig, {}, ""},
      {"Atan", 7, convert_trig, {}, ""},
      {"Atanh", 9, convert_trig, {}, ""},
      {"AveragePool", 1, convert_pool, {},
       "auto_pad ceil_mode count_include_pad dilations kernel_shape pads strides"},
      {"BatchNormalization", 6, convert_batch_norm, {1, 2, 3, 4},
       "consumed_inputs epsilon is_test momentum spatial training_mode"},
      {"Cast", 6, convert_cast, {}, "round_mode saturate to"},  // all but `to`: float8 only
      {"CastLike", 15, convert_cast_like, {}, "round_mode saturate"},  // float8 only
      {"Ceil", 6, convert_chain_step, {}, "consumed_inputs"},
      {"Celu", 12, convert_chain_step, {}, "alpha"},
      {"Clip", 1, convert_clip, {1, 2}, "consumed_inputs max min"},
      {"Concat", 1, convert_concat, {}, "axis"},
      {"ConcatFromSequence", 11, convert_concat_from_sequence, {}, "axis new_axis"},
      {"Constant", 1, convert_constant, {},
       "sparse_value value value_float value_floats value_int value_ints value_string "
       "value_strings"},
      {"ConstantOfShape", 9, convert_constant_of_shape, {0}, "value"},
      {"Conv", 1, convert_conv, {1, 2}, "auto_pad dilations group kernel_shape pads strides"},
      {"ConvInteger", 10, convert_expanded, {}, "auto_pad dilations group kernel_shape pads strides"},
      {"ConvTranspose", 1, convert_conv_transpose, {1, 2},
       "auto_pad dilations group kernel_shape output_padding output_shape pads strides"},
      {"Cos", 7, convert_trig, {}, ""},
      {"Cosh", 9, convert_trig, {}, ""},
      {"CumSum", 11, convert_cumsum, {0, 1}, "exclusive reverse"},
      {"Div", 1, convert_binary, {}, "axis broadcast consumed_inputs"},
      {"DepthToSpace", 1, convert_depth_to_space, {}, "blocksize mode"},
      {"DequantizeLinear", 10, convert_dequantize_linear, {1, 2}, "axis block_size output_dtype"},
      {"Dropout", 1, convert_dropout, {1, 2}, "consumed_inputs is_test ratio seed"},
      {"DynamicQuantizeLinear", 11, convert_expanded, {}, ""},
      {"Einsum", 12, convert_einsum, {}, "equation"},
      {"Elu", 6, convert_chain_step, {}, "alpha consumed_inputs"},
      {"Equal", 1, convert_compare, {}, "axis broadcast"},
      {"Erf", 9, convert_chain_step, {}, ""},
      {"Exp", 6, convert_chain_step, {}, "consumed_inputs"},
      {"Expand", 8, convert_expand, {1}, ""},
      {"Flatten", 1, convert_flatten, {}, "axis"},
      {"Floor", 6, convert_chain_step, {}, "consumed_inputs"},
      {"Gather", 1, convert_gather, {1}, "axis"},
      {"GatherElements", 11, convert_gather_elements, {1}, "axis"},
      {"GatherND", 11, convert_gather_nd, {1}, "batch_dims"},
      {"Gelu", 20, convert_gelu, {}, "approximate"},
      {"Gemm", 1, convert_gemm, {}, "alpha beta broadcast transA transB"},
      {"GlobalAveragePool", 1, convert_global_pool, {}, ""},
      {"GlobalLpPool", 2, convert_global_lp_pool, {}, "p"},
      {"GlobalMaxPool", 1, convert_global_pool, {}, ""},
      {"Greater", 1, convert_compare, {}, "axis broadcast"},
      {"GridSample", 16, convert_grid_sample, {}, "align_corners mode padding_mode"},
      {"GreaterOrEqual", 12, convert_compare, {}, ""},
      {"GroupNormalization", 18, convert_group_norm, {1, 2}, "epsilon num_groups stash_type"},
      {"Hardmax", 1, convert_softmax, {}, "axis"},
      {"HardSigmoid", 1, convert_unary, {}, "alpha beta consumed_inputs"},
      {"HardSwish", 14, convert_unary, {}, ""},
      {"Identity", 1, convert_identity, {}, ""},
      {"InstanceNormalization", 1, convert_instance_norm, {1, 2}, "consumed_inputs epsilon"},
      {"IsInf", 10, convert_is_nan_inf, {}, "detect_negative detect_positive"},
      {"IsNaN", 9, convert_is_nan_inf, {}, ""},
      {"LayerNormalization", 17, convert_layer_norm, {}, "axis epsilon stash_type"},
      {"Less", 1, convert_compare, {}, "axis broadcast"},
      {"LessOrEqual", 12, convert_compare, {}, ""},
      {"LeakyRelu", 1, convert_unary, {}, "alpha consumed_inputs"},
      {"LRN", 1, convert_lrn, {}, "alpha beta bias size"},
      {"Log", 6, convert_chain_step, {}, "consumed_inputs"},
      {"LogSoftmax", 1, convert_softmax, {}, "axis"},
      {"LpPool", 2, convert_lp_pool, {},
       "auto_pad ceil_mode dilations kernel_shape p pads strides"},
      {"MatMul", 1, convert_matmul, {}, ""},
      {"MatMulInteger", 10, convert_expanded, {}, ""},
      {"Max", 6, convert_variadic, {}, "consumed_inputs"},
      {"MaxPool", 1, convert_pool, {},
       "auto_pad ceil_mode dilations kernel_shape pads storage_order strides"},
      {"Mean", 6, convert_variadic, {}, "consumed_inputs"},
      {"MeanVarianceNormalization", 9, convert_mean_variance_norm, {}, "axes"},
      {"Min", 6, convert_variadic, {}, "consumed_inputs"},
      {"Mish", 18, convert_chain_step, {}, ""},
      {"Mod", 10, convert_mod, {0, 1}, "fmod"},
      {"Mul", 1, convert_binary, {}, "axis broadcast consumed_inputs"},
      {"Neg", 6, convert_chain_step, {}, "consumed_inputs"},
      {"Not", 1, convert_not, {}, ""},
      {"OneHot", 9, convert_one_hot, {1}, "axis"},
      {"Or", 1, convert_compare, {}, "axis broadcast"},
      {"Pad", 2, convert_pad, {1, 2, 3}, "mode pads value"},
      {"PRelu", 1, convert_prelu, {}, "consumed_inputs"},
      {"Pow", 1, convert_pow, {}, "axis broadcast"},
      {"QLinearConv", 10, convert_expanded, {}, "auto_pad dilations group kernel_shape pads strides"},
      {"QLinearMatMul", 10, convert_expanded, {}, ""},
      {"QuantizeLinear", 10, convert_quantize_linear, {1, 2},
       "axis block_size output_dtype precision saturate"},
      {"Range", 11, convert_range, {0, 1, 2}, "stash_type"},  // 27: float16/bfloat16 only
      {"Reciprocal", 6, convert_chain_step, {}, "consumed_inputs"},
      {"ReduceL1", 1, convert_reduce, {1}, "axes keepdims noop_with_empty_axes"},
      {"ReduceL2", 1, convert_reduce, {1}, "axes keepdims noop_with_empty_axes"},
      {"ReduceLogSum", 1, convert_reduce, {1}, "axes keepdims noop_with_empty_axes"},
      {"ReduceLogSumExp", 1, convert_reduce, {1}, "axes keepdims noop_with_empty_axes"},
      {"ReduceMax", 1, convert_reduce, {1}, "axes keepdims noop_with_empty_axes"},
      {"ReduceMean", 1, convert_reduce, {1}, "axes keepdims noop_with_empty_axes"},
      {"ReduceMin", 1, convert_reduce, {1}, "axes keepdims noop_with_empty_axes"},
      {"ReduceProd", 1, convert_reduce, {1}, "axes keepdims noop_with_empty_axes"},
      {"ReduceSum", 1, convert_reduce, {1}, "axes keepdims noop_with_empty_axes"},
      {"ReduceSumSquare", 1, convert_reduce, {1}, "axes keepdims noop_with_empty_axes"},
      {"Relu", 1, convert_unary, {}, "consumed_inputs"},
      {"Reshape", 1, convert_reshape, {1}, "allowzero consumed_inputs shape"},
      {"Resize", 10, convert_resize, {1, 2, 3},
       "antialias axes coordinate_transformation_mode cubic_coeff_a exclude_outside "
       "extrapolation_value keep_aspect_ratio_policy mode nearest_mode"},
      {"Round", 11, convert_chain_step, {}, ""},
      {"Scatter", 9, convert_scatter_elements, {1}, "axis"},
      {"ScatterElements", 11, convert_scatter_elements, {1}, "axis reduction"},
      {"ScatterND", 11, convert_scatter_nd, {1}, "reduction"},
      {"Selu", 6, convert_chain_step, {}, "alpha consumed_inputs gamma"},
      {"SequenceAt", 11, convert_sequence_at, {1}, ""},
      {"SequenceConstruct", 11, convert_sequence_construct, {}, ""},
      {"SequenceEmpty", 11, convert_sequence_empty, {}, "dtype"},
      {"SequenceErase", 11, convert_sequence_erase, {1}, ""},
      {"SequenceInsert", 11, convert_sequence_insert, {2}, ""},
      {"SequenceLength", 11, convert_sequence_length, {}, ""},
      {"Shape", 1, convert_shape, {}, "end start"},
      {"Shrink", 9, convert_chain_step, {}, "bias lambd"},
      {"Sigmoid", 1, convert_unary, {}, "consumed_inputs"},
      {"Sign", 9, convert_chain_step, {}, ""},
      {"Sin", 7, convert_trig, {}, ""},
      {"Sinh", 9, convert_trig, {}, ""},
      {"Size", 1, convert_size, {}, ""},
      {"Slice", 1, convert_slice, {1, 2, 3, 4}, "axes ends starts"},
      {"Softmax", 1, convert_softmax, {}, "axis"},
      {"Softplus", 1, convert_chain_step, {}, ""},
      {"Softsign", 1, convert_chain_step, {}, ""},
      {"SpaceToDepth", 1, convert_space_to_depth, {}, "blocksize mode"},  // mode: 28
      {"Split", 1, convert_split, {1}, "axis num_outputs split"},
      {"SplitToSequence", 11, convert_split_to_sequence, {1}, "axis keepdims"},
      {"Sqrt", 6, convert_chain_step, {}, "consumed_inputs"},
      {"Squeeze", 1, convert_squeeze, {1}, "axes"},
      {"Sub", 1, convert_binary, {}, "axis broadcast consumed_inputs"},
      {"Sum", 6, convert_variadic, {}, "consumed_inputs"},
      {"Swish", 24, convert_swish, {}, "alpha"},
      {"Tan", 7, convert_trig, {}, ""},
      {"Tanh", 6, convert_chain_step, {}, "consumed_inputs"},
      {"ThresholdedRelu", 10, convert_chain_step, {}, "alpha"},
      {"Tile", 6, convert_tile, {1}, ""},
      {"TopK", 1, convert_topk, {1}, "axis k largest sorted"},
      {"Transpose", 1, convert_transpose, {}, "perm"},
      {"Trilu", 14, convert_trilu, {1}, "upper"},
      {"Upsample", 7, convert_upsample, {1}, "mode scales"},
      {"Unsqueeze", 1, convert_unsqueeze, {1}, "axes"},
      {"Where", 9, convert_where, {}, ""},
      {"Xor", 1, convert_compare, {}, "axis broadcast"},
  };
  // clang-format on
  return table;
}

const OpInfo* find_op(const std::string& type) {
  for (const OpInfo& op : op_table())
    if (type == op.type) return &op;
  return nullptr;
}

const std::vector<std::string>& supported_op_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> v;
    for (const OpInfo& op : op_table()) v.push_back(op.type);
    std::sort(v.begin(), v.end());
    return v;
  }();
  return types;
}

bool is_supported_op(const std::string& op_type) { return find_op(op_type) != nullptr; }

std::vector<int> constant_input_slots(const std::string& op_type) {
  const OpInfo* op = find_op(op_type);
  return op ? op->constant_slots : std::vector<int>{};
}

}  // namespace kiln::graph::onnx
