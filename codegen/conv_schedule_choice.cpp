// What a generated convolution's schedule is chosen for (its shape, as schedules::ConvShape)
// and the parameters it gets: the default for the layer, or a schedule's text read over it.
#include <algorithm>
#include <string>

#include "codegen/pipeline_parts.h"
#include "runtime/conv_weights.h"
#include "runtime/kernels.h"
#include "schedules/conv_params.h"

namespace kiln::codegen {

// What the convolution schedules are chosen for, of a dense or grouped ConvKernelSpec
// (`merge` groups per block, runtime/conv_weights.h) or of a MatMul run as a 1x1 convolution.
schedules::ConvShape conv_shape(const graph::ConvKernelSpec& k, const Halide::Target& target) {
  const graph::Shape& w = k.weights.shape;  // HWIO ([Kh, Kw, 1, C] if depthwise)
  const graph::Shape out = graph::conv_output_nhwc(k);  // NHWC, before any pooling
  const int merge = k.depthwise ? 1 : runtime::grouped_conv_merge(k.groups, out[3]);
  const int out_per_group = static_cast<int>(out[3]) / k.groups * merge;
  schedules::ConvShape s;
  s.out_channels = static_cast<int>(out[3]);
  s.out_width = static_cast<int>(out[2]);
  s.out_height = static_cast<int>(out[1]);
  s.batch = static_cast<int>(out[0]);
  // bf16: channel pairs, an odd count rounded up (runtime::bf16_conv_channels).
  s.reduction_channels =
      static_cast<int>(k.bf16 ? runtime::bf16_conv_channels(w[2]) : w[2]) * merge;
  s.kernel_w = static_cast<int>(w[1]);
  s.kernel_h = static_cast<int>(w[0]);
  s.padded = k.pad_top || k.pad_left || k.pad_bottom || k.pad_right;
  // Groups of whole vectors keep each vector of output channels in one group, so the dense
  // schedules apply (their input loads are broadcasts); narrower groups permute their inputs.
  // Channels interleaved by group (runtime::conv_weight_interleave, decided for 16-channel
  // blocks on every CPU target alike) take the grouped schedule on every CPU target: a vector
  // of positions spans groups even where a group fills a vector.
  const bool interleaved = !target.has_gpu_feature() && runtime::conv_weight_interleave(k) > 1;
  s.narrow_groups = !k.depthwise && k.groups > 1 &&
                    (interleaved || out_per_group % target.natural_vector_size<float>() != 0);
  s.grouped = k.groups > 1 || k.depthwise;
  s.depthwise = k.depthwise;
  s.computed_input = !k.pre.empty() || k.nchw_input || graph::pools_before_conv(k);
  s.expanded = k.expand.has_value();
  s.constant_weights = k.constant_weights;
  s.whole_channel_blocks =
      conv_weights_blocked(k, target) && out[3] % runtime::kConvWeightBlock != 0;
  s.bf16 = k.bf16;
  s.costly_epilogue = std::any_of(k.post.begin(), k.post.end(), graph::costly_step);
  s.stride_w = k.stride_w, s.stride_h = k.stride_h;
  s.dilation_w = k.dilation_w, s.dilation_h = k.dilation_h;
  s.max_winograd_tile = k.max_winograd_tile;
  s.cold_weights = k.cold_weights;
  return s;
}

Halide::Target conv_schedule_target(const graph::ConvKernelSpec& k, const Halide::Target& target) {
  constexpr int kLanes = 16;  // AVX-512's floats
  if (k.depthwise || k.groups <= 1 || k.bf16 || target.has_gpu_feature() ||
      target.natural_vector_size<float>() != kLanes)
    return target;
  const int64_t out_channels = graph::conv_output_nhwc(k)[3];
  const int64_t per_group = out_channels / k.groups;  // such groups are never merged
  // Groups of 8 channels or fewer tile a 16-lane vector: the grouped schedule's (interleaved).
  if (out_channels % k.groups != 0 || per_group <= kLanes / 2 || per_group % kLanes == 0 ||
      per_group % (kLanes / 2) != 0)
    return target;
  // RegNetX-1.6GF's 24-channel 3x3 groups (torchvision, 2 threads, Zen 4): 0.30-0.50 ms with
  // 8 lanes against 2.7-6.3 ms with 16 (the lanes' inputs gathered), 1.7 ms where blocks of two
  // groups took 16 lanes with half their multiply-adds on zeros.
  Halide::Target narrow = target;
  for (const auto f :
       {Halide::Target::AVX512, Halide::Target::AVX512_KNL, Halide::Target::AVX512_Skylake,
        Halide::Target::AVX512_Cannonlake, Halide::Target::AVX512_Zen4, Halide::Target::AVX512_Zen5,
        Halide::Target::AVX512_SapphireRapids})
    narrow = narrow.without_feature(f);
  return narrow;
}

bool conv_weights_blocked(const graph::ConvKernelSpec& k, const Halide::Target& target) {
  return !target.has_gpu_feature() && runtime::blocks_conv_weights(k);
}

schedules::ConvShape matmul_shape(const graph::OpKernelSpec& k) {
  const graph::Shape& out = k.output.shape;  // [N, H, W, M]
  schedules::ConvShape s;
  s.out_channels = static_cast<int>(out[3]);
  s.out_width = static_cast<int>(out[2]);
  s.out_height = static_cast<int>(out[1]);
  s.batch = static_cast<int>(out[0]);
  s.reduction_channels = static_cast<int>(k.inputs[0].shape[3]);
  return s;
}

// A MatMul of a 4-D tensor by a matrix: run as a 1x1 convolution (matmul_pipeline).
bool is_conv_matmul(const graph::OpKernelSpec& k) {
  return std::holds_alternative<graph::MatMul>(k.op) && k.inputs[0].shape.size() == 4 &&
         k.inputs[1].shape.size() == 2;
}

namespace {

// Where the last family name of a schedule text (a word without '=') starts; 0 if it has none.
size_t last_family_word(const std::string& text) {
  size_t at = 0;
  for (size_t begin = text.find_first_not_of(' '); begin != std::string::npos;) {
    const size_t end = std::min(text.find(' ', begin), text.size());
    if (text.find('=', begin) >= end) at = begin;
    begin = text.find_first_not_of(' ', end);
  }
  return at;
}

}  // namespace

// The parameters a convolution is generated with: `text` (resolved by codegen: a tuned
// record, or the spec's own ConvKernelSpec::schedule) read over the default, or the default.
schedules::ConvParams conv_params(const std::string& kernel, const schedules::ConvShape& shape,
                                  const std::string& text, const Halide::Target& target) {
  using schedules::ConvFamily;
  const schedules::ConvParams base = schedules::default_conv_params(shape, target);
  schedules::ConvParams p = base;
  if (text.empty()) return p;
  std::string error = schedules::parse_conv_params(text, &p);
  // Winograd's register block counts tiles, not pixels, and its rows are tile rows: a text that
  // gives a Winograd schedule reads its knobs over Winograd's default for the layer and the tile
  // it names (after its last "winograd", when it switches from another family, as `kiln tune
  // --set` writes "wide block=2x6 ... winograd tile=2"); a text that switches from Winograd to
  // a direct family reads the knobs after its last family name over the direct default
  // ("winograd tile=2 block=1x9 rows=1 split=0 wide" is the direct default, not Winograd's
  // block and rows in the wide family).
  const bool to_winograd = p.family == ConvFamily::winograd;
  if (error.empty() && (to_winograd || base.family == ConvFamily::winograd)) {
    const std::string knobs = text.substr(last_family_word(text));
    p = to_winograd ? schedules::default_winograd_params(shape, target)
                    : schedules::default_direct_conv_params(shape, target);
    error = schedules::parse_conv_params(knobs, &p);
    if (error.empty() && to_winograd) {  // the default block depends on the tile
      p = schedules::default_winograd_params(shape, target, p.tile);
      error = schedules::parse_conv_params(knobs, &p);
    }
  }
  // An AMX schedule reads its knobs over the AMX default for the layer (the kernels' AMX entry
  // points are compiled with the text "amx").
  if (error.empty() && p.family == ConvFamily::amx) {
    const size_t switch_at = (" " + text).rfind(" amx");
    p = schedules::default_amx_params(shape);
    error = schedules::parse_conv_params(text.substr(switch_at == std::string::npos ? 0 : switch_at), &p);
  }
  if (error.empty()) error = schedules::conv_params_error(p, shape, target);
  if (!error.empty())
    throw graph::Error("kernel '" + kernel + "': schedule '" + text + "': " + error);
  return p;
}

}  // namespace kiln::codegen
