// The kernel table, generated from the CMake target list into kiln/kernel_table.inc.
#include "kernels.h"

#include <cpuid.h>

#include <algorithm>
#include <sstream>

#include "conv_weights.h"
#include "kiln_conv_none_naive.h"
#include "kiln_conv_none_residual_naive.h"
#include "kiln_conv_none_residual_tuned.h"
#include "kiln_conv_none_residual_tuned_1x1.h"
#include "kiln_conv_none_residual_tuned_deep.h"
#include "kiln_conv_none_tuned.h"
#include "kiln_conv_none_tuned_1x1.h"
#include "kiln_conv_none_tuned_deep.h"
#include "kiln_conv_relu6_naive.h"
#include "kiln_conv_relu6_residual_naive.h"
#include "kiln_conv_relu6_residual_tuned.h"
#include "kiln_conv_relu6_residual_tuned_1x1.h"
#include "kiln_conv_relu6_residual_tuned_deep.h"
#include "kiln_conv_relu6_tuned.h"
#include "kiln_conv_relu6_tuned_1x1.h"
#include "kiln_conv_relu6_tuned_deep.h"
#include "kiln_conv_relu_naive.h"
#include "kiln_conv_relu_residual_naive.h"
#include "kiln_conv_relu_residual_tuned.h"
#include "kiln_conv_relu_residual_tuned_1x1.h"
#include "kiln_conv_relu_residual_tuned_deep.h"
#include "kiln_conv_relu_tuned.h"
#include "kiln_conv_relu_tuned_1x1.h"
#include "kiln_conv_relu_tuned_deep.h"
#include "kiln_depthwise_none.h"
#include "kiln_depthwise_relu.h"
#include "kiln_depthwise_relu6.h"
#include "kiln_nchw_to_nhwc.h"
#ifdef KILN_HAVE_CUDA_KERNELS
#include "kiln_depthwise_none_cuda.h"
#include "kiln_depthwise_relu6_cuda.h"
#include "kiln_depthwise_relu_cuda.h"
#include "kiln_conv_none_cuda.h"
#include "kiln_conv_none_residual_cuda.h"
#include "kiln_conv_relu6_cuda.h"
#include "kiln_conv_relu6_residual_cuda.h"
#include "kiln_conv_relu_cuda.h"
#include "kiln_conv_relu_residual_cuda.h"
#include "kiln_nchw_to_nhwc_cuda.h"
#endif

// Per-target entry points carry '-' in their symbol names; bind them with asm labels.
#define KILN_CPU_TARGET(index, name)
#define KILN_CONV_KERNEL(e, r, s, t, sym) \
  extern "C" int kiln_conv_##e##_##r##_##s##_t##t(void**) __asm__("\"" sym "\"");
#define KILN_LAYOUT_KERNEL(t, sym) extern "C" int kiln_nchw_to_nhwc_t##t(void**) __asm__("\"" sym "\"");
#define KILN_DEPTHWISE_KERNEL(e, t, sym) \
  extern "C" int kiln_depthwise_##e##_t##t(void**) __asm__("\"" sym "\"");
#include "kiln/kernel_table.inc"
#undef KILN_CPU_TARGET
#undef KILN_CONV_KERNEL
#undef KILN_LAYOUT_KERNEL
#undef KILN_DEPTHWISE_KERNEL

namespace kiln::runtime {
namespace {

struct CpuEntry {
  std::string target;
  KernelFn conv[3][2][4] = {};  // [epilogue][residual][schedule]
  KernelFn layout = nullptr;
  KernelFn depthwise[3] = {};  // [epilogue]
};

std::vector<CpuEntry> make_table() {
  std::vector<CpuEntry> table;
#define KILN_CPU_TARGET(index, name) \
  table.resize(index + 1);           \
  table[index].target = name;
#define KILN_CONV_KERNEL(e, r, s, t, sym)                                       \
  table[t].conv[static_cast<int>(ConvEpilogue::e)][std::string(#r) == "residual"] \
               [static_cast<int>(ConvSchedule::s)] = kiln_conv_##e##_##r##_##s##_t##t;
#define KILN_LAYOUT_KERNEL(t, sym) table[t].layout = kiln_nchw_to_nhwc_t##t;
#define KILN_DEPTHWISE_KERNEL(e, t, sym) \
  table[t].depthwise[static_cast<int>(ConvEpilogue::e)] = kiln_depthwise_##e##_t##t;
#include "kiln/kernel_table.inc"
#undef KILN_CPU_TARGET
#undef KILN_CONV_KERNEL
#undef KILN_LAYOUT_KERNEL
#undef KILN_DEPTHWISE_KERNEL
  return table;
}

const std::vector<CpuEntry>& table() {
  static const std::vector<CpuEntry> t = make_table();
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
  return false;  // a feature this table does not know: never claim support
}

KernelFn conv_wrapper(ConvEpilogue e, ConvSchedule s, bool residual) {
#define KILN_CONV_WRAPPERS(prefix) \
  { prefix##_naive_argv, prefix##_tuned_argv, prefix##_tuned_deep_argv, prefix##_tuned_1x1_argv }
  static const KernelFn fns[3][2][4] = {
      {KILN_CONV_WRAPPERS(kiln_conv_none), KILN_CONV_WRAPPERS(kiln_conv_none_residual)},
      {KILN_CONV_WRAPPERS(kiln_conv_relu), KILN_CONV_WRAPPERS(kiln_conv_relu_residual)},
      {KILN_CONV_WRAPPERS(kiln_conv_relu6), KILN_CONV_WRAPPERS(kiln_conv_relu6_residual)},
  };
#undef KILN_CONV_WRAPPERS
  return fns[static_cast<int>(e)][residual][static_cast<int>(s)];
}

}  // namespace

ConvEpilogue conv_epilogue(const graph::Activation& a) {
  if (a.is_identity()) return ConvEpilogue::none;
  if (a.is_relu()) return ConvEpilogue::relu;
  KILN_CHECK(a.is_relu6(), "no conv kernel for epilogue " + graph::to_string(a));
  return ConvEpilogue::relu6;
}

const std::vector<std::string>& cpu_targets() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const CpuEntry& e : table()) n.push_back(e.target);
    return n;
  }();
  return names;
}

bool cpu_target_supported(int index) {
  KILN_CHECK(index >= 0 && index < static_cast<int>(table().size()), "CPU target index");
  std::istringstream parts(table()[index].target);
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
  for (int i = 0; i < static_cast<int>(table().size()); ++i)
    if (cpu_target_supported(i)) return i;
  return -1;
}

ConvSchedule tuned_conv_schedule(int64_t out_h, int64_t out_w, int64_t in_channels,
                                 int64_t kernel_h, int64_t kernel_w, bool padded) {
  const int64_t pixels = out_h * out_w, taps = kernel_h * kernel_w;
  const bool deep = pixels <= 64 || (pixels <= 196 && taps > 1 && in_channels * taps >= 1024);
  if (deep) return ConvSchedule::tuned_deep;
  return taps == 1 && !padded ? ConvSchedule::tuned_1x1 : ConvSchedule::tuned;
}

int64_t conv_weight_ci_stride(int64_t out_channels) {
  return out_channels % 128 == 0 ? out_channels + 16 : out_channels;
}

int grouped_conv_merge(int groups, int64_t out_channels) {
  constexpr int64_t kVector = 16;  // output channels: one AVX-512 vector, two AVX2 ones
  constexpr int kMaxMerge = 8;     // at most 8x the multiply-adds
  if (groups <= 1 || out_channels % groups != 0) return 1;
  const int64_t per_group = out_channels / groups;
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

StridedConvWeights restride_conv_weights(const float* hwio, int64_t kh, int64_t kw, int64_t ci,
                                         int64_t co) {
  StridedConvWeights w;
  const int64_t stride = conv_weight_ci_stride(co);
  if (stride == co) return w;
  const int64_t rows = kh * kw * ci;
  w.data.assign(static_cast<size_t>(rows * stride), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    std::copy(hwio + r * co, hwio + (r + 1) * co, w.data.begin() + r * stride);
  const auto i32 = [](int64_t v) { return static_cast<int32_t>(v); };
  w.dims[0] = {0, i32(co), 1, 0};
  w.dims[1] = {0, i32(ci), i32(stride), 0};
  w.dims[2] = {0, i32(kw), i32(ci * stride), 0};
  w.dims[3] = {0, i32(kh), i32(kw * ci * stride), 0};
  return w;
}

KernelFn cpu_conv_kernel(ConvEpilogue e, ConvSchedule s, int target, bool residual) {
  if (target < 0) return conv_wrapper(e, s, residual);
  KILN_CHECK(target < static_cast<int>(table().size()), "CPU target index");
  return table()[target].conv[static_cast<int>(e)][residual][static_cast<int>(s)];
}

KernelFn cpu_depthwise_kernel(ConvEpilogue e, int target) {
  static const KernelFn wrappers[3] = {kiln_depthwise_none_argv, kiln_depthwise_relu_argv,
                                       kiln_depthwise_relu6_argv};
  if (target < 0) return wrappers[static_cast<int>(e)];
  KILN_CHECK(target < static_cast<int>(table().size()), "CPU target index");
  return table()[target].depthwise[static_cast<int>(e)];
}

KernelFn cpu_layout_kernel(int target) {
  if (target < 0) return kiln_nchw_to_nhwc_argv;
  KILN_CHECK(target < static_cast<int>(table().size()), "CPU target index");
  return table()[target].layout;
}

KernelFn cuda_conv_kernel(ConvEpilogue e, bool residual) {
#ifdef KILN_HAVE_CUDA_KERNELS
  static const KernelFn fns[3][2] = {
      {kiln_conv_none_cuda_argv, kiln_conv_none_residual_cuda_argv},
      {kiln_conv_relu_cuda_argv, kiln_conv_relu_residual_cuda_argv},
      {kiln_conv_relu6_cuda_argv, kiln_conv_relu6_residual_cuda_argv},
  };
  return fns[static_cast<int>(e)][residual];
#else
  (void)e;
  (void)residual;
  return nullptr;
#endif
}

KernelFn cuda_depthwise_kernel(ConvEpilogue e) {
#ifdef KILN_HAVE_CUDA_KERNELS
  static const KernelFn fns[3] = {kiln_depthwise_none_cuda_argv, kiln_depthwise_relu_cuda_argv,
                                  kiln_depthwise_relu6_cuda_argv};
  return fns[static_cast<int>(e)];
#else
  (void)e;
  return nullptr;
#endif
}

KernelFn cuda_layout_kernel() {
#ifdef KILN_HAVE_CUDA_KERNELS
  return kiln_nchw_to_nhwc_cuda_argv;
#else
  return nullptr;
#endif
}

}  // namespace kiln::runtime
