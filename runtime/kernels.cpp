// The build's CPU targets (generated from KILN_CPU_TARGETS into kiln/cpu_targets.inc), the
// run-time feature check, and the weight-layout choices.
#include "kernels.h"

#include <cpuid.h>

#include <algorithm>
#include <sstream>

#include "conv_weights.h"

namespace kiln::runtime {
namespace {

const std::vector<std::string>& target_table() {
  static const std::vector<std::string> t = {
#define KILN_CPU_TARGET(name) name,
#include "kiln/cpu_targets.inc"
#undef KILN_CPU_TARGET
  };
  return t;
}

bool feature_supported(const std::string& f) {
  __builtin_cpu_init();
  if (f == "sse41") return __builtin_cpu_supports("sse4.1");
  if (f == "avx") return __builtin_cpu_supports("avx");
  if (f == "f16c") {
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  }
  if (f == "fma") return __builtin_cpu_supports("fma");
  if (f == "avx2") return __builtin_cpu_supports("avx2");
  if (f == "avx512") return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd");
  if (f == "avx512_skylake")
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
  if (f == "tsan") return true;  // instrumentation for ThreadSanitizer (the tsan preset), not a CPU feature
  return false;  // a feature this table does not know: never claim support
}

}  // namespace

const std::vector<std::string>& cpu_targets() { return target_table(); }

const std::string& cuda_target() {
  static const std::string t = KILN_CUDA_TARGET;
  return t;
}

bool cpu_target_supported(int index) {
  KILN_CHECK(index >= 0 && index < static_cast<int>(target_table().size()), "CPU target index");
  std::istringstream parts(target_table()[static_cast<size_t>(index)]);
  std::string part;
  int field = 0;
  while (std::getline(parts, part, '-')) {
    // x86-64-linux-<features...>: the first three fields are arch, bits and OS.
    if (field++ < 3) continue;
    if (!feature_supported(part)) return false;
  }
  return true;
}

int best_cpu_target() {
  for (int i = 0; i < static_cast<int>(target_table().size()); ++i)
    if (cpu_target_supported(i)) return i;
  return -1;
}

bool blocks_conv_weights(const graph::ConvKernelSpec& c) {
  const int64_t co = c.output.shape[3];
  return !c.depthwise && c.groups == 1 && c.constant_weights &&
         (co % kConvWeightBlock == 0 || co >= 8 * kConvWeightBlock);
}

int64_t conv_weight_blocks(int64_t out_channels) {
  return (out_channels + kConvWeightBlock - 1) / kConvWeightBlock;
}

std::vector<float> block_conv_weights(const float* hwio, int64_t kh, int64_t kw, int64_t ci,
                                      int64_t co) {
  constexpr int64_t kB = kConvWeightBlock;
  const int64_t rows = kh * kw * ci;  // (ky, kx, ci), outermost first, in both layouts
  std::vector<float> out(static_cast<size_t>(conv_weight_blocks(co) * rows * kB), 0.0f);
  for (int64_t b = 0; b < conv_weight_blocks(co); ++b) {
    const int64_t width = std::min(kB, co - b * kB);  // the last block may be partly zeros
    for (int64_t r = 0; r < rows; ++r)
      std::copy(hwio + r * co + b * kB, hwio + r * co + b * kB + width,
                out.begin() + (b * rows + r) * kB);
  }
  return out;
}

int grouped_conv_merge(int groups, int64_t out_channels) {
  constexpr int64_t kVector = 16;  // output channels: one AVX-512 vector, two AVX2 ones
  constexpr int kMaxMerge = 8;     // at most 8x the multiply-adds
  if (groups <= 1 || out_channels % groups != 0) return 1;
  const int64_t per_group = out_channels / groups;
  // Groups that tile a vector exactly (1, 2, 4 or 8 channels) take the grouped schedule's
  // permuted inputs instead, with no multiply-add on zeros.
  if (kVector % per_group == 0) return 1;
  for (int merge = 1; merge <= kMaxMerge; ++merge)
    if (merge * per_group % kVector == 0 && groups % merge == 0) return merge;
  return 1;
}

std::vector<float> widen_grouped_conv_weights(const float* hwio, int64_t kh, int64_t kw,
                                              int64_t ci_per_group, int64_t co, int groups,
                                              int merge) {
  const int64_t co_per_group = co / groups, wide_ci = merge * ci_per_group;
  std::vector<float> out(static_cast<size_t>(kh * kw * wide_ci * co), 0.0f);
  for (int64_t tap = 0; tap < kh * kw; ++tap)
    for (int64_t o = 0; o < co; ++o) {
      const int64_t sub = (o / co_per_group) % merge;  // the group's place in its block
      for (int64_t i = 0; i < ci_per_group; ++i)
        out[static_cast<size_t>((tap * wide_ci + sub * ci_per_group + i) * co + o)] =
            hwio[(tap * ci_per_group + i) * co + o];
    }
  return out;
}

}  // namespace kiln::runtime
