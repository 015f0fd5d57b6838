// The build's CPU targets (generated from KILN_CPU_TARGETS into kiln/cpu_targets.inc), the
// run-time feature check, and the weight-layout choices.
#include "kernels.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <sstream>
#include <thread>

#include "HalideRuntime.h"
#include "conv_weights.h"
#include "graph/bf16.h"

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

// CPUID leaf 7, sub-leaf 1, EAX: AVX-VNNI (bit 4) and AVX512_BF16 (bit 5). Read directly:
// clang 14's __builtin_cpu_supports knows neither name.
bool leaf7_subleaf1_eax_bit(unsigned bit) {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  return (eax >> bit) & 1u;
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
  // Halide's run-time check (halide_can_use_target_features) admits avx512_cannonlake and
  // avx512_sapphirerapids on the same CPUs: Cannon Lake's AVX-512 (IFMA, VBMI), then Sapphire
  // Rapids' (Zen 4's level and AVX-VNNI). avx512_zen4 (AVX512_BF16, VNNI, VBMI2, BITALG,
  // VPOPCNTDQ, which Halide may use at that level) Halide 21 recognizes only on one Zen 4 model
  // and otherwise does not check at all; install_cpu_feature_check makes it ask this function.
  if (f == "avx512_cannonlake")
    return feature_supported("avx512_skylake") && __builtin_cpu_supports("avx512ifma") &&
           __builtin_cpu_supports("avx512vbmi");
  if (f == "avx512_zen4")
    return feature_supported("avx512_cannonlake") && leaf7_subleaf1_eax_bit(5) &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi2") &&
           __builtin_cpu_supports("avx512bitalg") && __builtin_cpu_supports("avx512vpopcntdq");
  if (f == "avx512_sapphirerapids")
    return feature_supported("avx512_zen4") && leaf7_subleaf1_eax_bit(4);
  if (f == "tsan") return true;  // instrumentation for ThreadSanitizer (the tsan preset), not a CPU feature
  return false;  // a feature this table does not know: never claim support
}

}  // namespace

const std::vector<std::string>& cpu_targets() { return target_table(); }

bool target_supported(const std::string& target) {
  std::istringstream parts(target);
  std::string part;
  int field = 0;
  while (std::getline(parts, part, '-')) {
    // x86-64-linux-<features...>: the first three fields are arch, bits and OS.
    if (field++ < 3) continue;
    if (!feature_supported(part)) return false;
  }
  return true;
}


const std::string& cuda_target() {
  static const std::string t = KILN_CUDA_TARGET;
  return t;
}

bool cpu_target_supported(int index) {
  KILN_CHECK(index >= 0 && index < static_cast<int>(target_table().size()), "CPU target index");
  return target_supported(target_table()[static_cast<size_t>(index)]);
}

std::string bf16_target(const std::string& target) {
  if (target.find("-avx512_skylake") == std::string::npos ||
      target.find("avx512_zen4") != std::string::npos ||
      target.find("avx512_sapphirerapids") != std::string::npos)
    return "";
  return target + "-avx512_cannonlake-avx512_zen4";
}

std::string amx_target(const std::string& target) {
  const std::string variant = bf16_target(target);
  return variant.empty() ? "" : variant + "-avx512_sapphirerapids";
}

namespace {

halide_can_use_target_features_t g_previous_check = nullptr;

// Halide's check first (or whatever check was installed before this one), then avx512_zen4,
// which Halide 21's own check leaves unknown, and so admits, on any CPU.
int can_use_target_features(int count, const uint64_t* features) {
  if (!g_previous_check(count, features)) return 0;
  constexpr int kZen4 = halide_target_feature_avx512_zen4;
  const bool zen4 = count > kZen4 / 64 && ((features[kZen4 / 64] >> (kZen4 % 64)) & 1u);
  return !zen4 || feature_supported("avx512_zen4") ? 1 : 0;
}

}  // namespace

void install_cpu_feature_check() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    g_previous_check = halide_set_custom_can_use_target_features(can_use_target_features);
  });
}

bool bf16_dot_products_supported(int index) {
  const std::string variant = bf16_target(target_table().at(static_cast<size_t>(index)));
  return !variant.empty() && target_supported(variant);
}

bool amx_usable() {
  static const bool usable = [] {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24;
    if ((edx & (kAmxBf16 | kAmxTile)) != (kAmxBf16 | kAmxTile)) return false;
    constexpr long kReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr long kXtileData = 18;         // XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return usable;
}

namespace {

// `steps` rounds of multiply-adds on 12 independent accumulators of 16 (zmm) or 8 (ymm) floats:
// enough of them to keep two FMA pipes of 4 cycles' latency busy. Returns a sum of them so the
// loop is not optimized away.
__attribute__((target("avx512f"))) float fma_rounds_512(int steps, float seed) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(seed + float(i));
  const __m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(seed);
  for (int k = 0; k < steps; ++k)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, c);
  for (int i = 1; i < 12; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc[0]);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

__attribute__((target("avx2,fma"))) float fma_rounds_256(int steps, float seed) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(seed + float(i));
  const __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(seed);
  for (int k = 0; k < steps; ++k)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  for (int i = 1; i < 12; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

// The fastest of 7 interleaved rounds of each width (after a discarded first pair: a CPU may run
// its first wide operations slowly while it changes its frequency), as a ratio: noise only
// slows a round.
double measure_fma_512_to_256_time() {
  using Clock = std::chrono::steady_clock;
  constexpr int kSteps = 16384;  // about 50 us of 512-bit multiply-adds at one a cycle
  volatile float sink = 0;
  double best512 = 1e30, best256 = 1e30;
  for (int round = 0; round < 8; ++round) {
    const auto t0 = Clock::now();
    sink = sink + fma_rounds_512(kSteps, 1.0f);
    const auto t1 = Clock::now();
    sink = sink + fma_rounds_256(kSteps, 1.0f);
    const auto t2 = Clock::now();
    if (round == 0) continue;
    best512 = std::min(best512, std::chrono::duration<double>(t1 - t0).count());
    best256 = std::min(best256, std::chrono::duration<double>(t2 - t1).count());
  }
  return best256 > 0 ? best512 / best256 : 0.0;
}

}  // namespace

double fma_512_to_256_time() {
  static const double ratio = [] {
    if (!feature_supported("avx512_skylake")) return 0.0;
    // A neighbour on the same physical core (another VM's thread on its SMT sibling) can share
    // the FMA pipes for a while: a Zen 4 VM measured 1.2 once, 2.0 otherwise. A ratio between
    // the two kinds of CPU is measured again, up to 4 times in all, and the largest kept: only
    // contention lowers it.
    double r = measure_fma_512_to_256_time();
    for (int tries = 1; tries < 4 && r > 1.1 && r < 1.5; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      r = std::max(r, measure_fma_512_to_256_time());
    }
    return r;
  }();
  return ratio;
}

bool splits_512bit_fma() { return fma_512_to_256_time() > 1.5; }

int best_cpu_target() {
  for (int i = 0; i < static_cast<int>(target_table().size()); ++i)
    if (cpu_target_supported(i)) return i;
  return -1;
}

bool blocks_conv_weights(const graph::ConvKernelSpec& c) {
  if (conv_weight_interleave(c) > 1) return true;
  return !c.depthwise && c.groups == 1 && c.constant_weights;
}

int conv_weight_interleave(const graph::ConvKernelSpec& c) {
  const int64_t co = c.output.shape[3];
  if (c.depthwise || c.groups <= 1 || !c.constant_weights || c.bf16 || co % c.groups != 0 ||
      co % kConvWeightBlock != 0 || c.weights.shape.size() != 4)
    return 1;
  const int64_t per_group = co / c.groups;
  // The input interleaves alike, in blocks of whole vectors: a group's input channels a
  // multiple of its output channels.
  if (per_group >= kConvWeightBlock || kConvWeightBlock % per_group != 0 || per_group == 1 ||
      c.weights.shape[2] % per_group != 0)
    return 1;
  return static_cast<int>(kConvWeightBlock / per_group);
}

int64_t conv_weight_blocks(int64_t out_channels) {
  return (out_channels + kConvWeightBlock - 1) / kConvWeightBlock;
}

int64_t conv_weight_block_stride(int64_t kh, int64_t kw, int64_t ci) {
  return (kh * kw * ci + 1) * kConvWeightBlock;
}

std::array<halide_dimension_t, 5> blocked_conv_weight_dims(int64_t kh, int64_t kw, int64_t ci,
                                                           int64_t co) {
  const int64_t extents[5] = {kConvWeightBlock, ci, kw, kh, conv_weight_blocks(co)};
  std::array<halide_dimension_t, 5> dims;
  int64_t stride = 1;
  for (int d = 0; d < 5; ++d) {
    if (d == 4) stride = conv_weight_block_stride(kh, kw, ci);
    dims[d] = halide_dimension_t(0, static_cast<int32_t>(extents[d]), static_cast<int32_t>(stride));
    stride *= extents[d];
  }
  return dims;
}

AlignedVector<float> block_conv_weights(const float* hwio, int64_t kh, int64_t kw, int64_t ci,
                                      int64_t co, int interleave) {
  constexpr int64_t kB = kConvWeightBlock;
  const int64_t rows = kh * kw * ci;  // (ky, kx, ci), outermost first, in both layouts
  const int64_t stride = conv_weight_block_stride(kh, kw, ci);
  AlignedVector<float> out(static_cast<size_t>(conv_weight_blocks(co) * stride), 0.0f);
  const int64_t per_group = kB / interleave;  // interleave > 1: whole blocks
  for (int64_t b = 0; b < conv_weight_blocks(co); ++b) {
    const int64_t width = std::min(kB, co - b * kB);  // the last block may be partly zeros
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = hwio + r * co + b * kB;
      float* to = out.data() + b * stride + r * kB;
      if (interleave == 1) {
        std::copy(row, row + width, to);
      } else {  // position p: channel p / interleave of the block's group p % interleave
        for (int64_t p = 0; p < kB; ++p) to[p] = row[p % interleave * per_group + p / interleave];
      }
    }
  }
  return out;
}

int64_t bf16_conv_channels(int64_t ci) { return (ci + 1) / 2 * 2; }

int64_t bf16_conv_reduction(int64_t kh, int64_t kw, int64_t ci) {
  constexpr int64_t kTileSteps = 32;  // bf16 steps of one AMX tile row (64 bytes)
  return (kh * kw * bf16_conv_channels(ci) + kTileSteps - 1) / kTileSteps * kTileSteps;
}

int64_t bf16_conv_columns(int64_t co) { return conv_weight_blocks(co) * kConvWeightBlock; }

AlignedVector<uint16_t> pack_bf16_conv_weights(const float* hwio, int64_t kh, int64_t kw,
                                             int64_t ci, int64_t co, Bf16Layout layout) {
  const int64_t paired = bf16_conv_channels(ci), columns = bf16_conv_columns(co);
  const int64_t pairs = bf16_conv_reduction(kh, kw, ci) / 2;
  AlignedVector<uint16_t> out(static_cast<size_t>(2 * pairs * columns), 0);
  // Step k, output channel o: [K' / 2][Co'][2] (rows) or [Co' / 16][K' / 2][16][2] (blocked).
  const auto index = [&](int64_t k, int64_t o) {
    constexpr int64_t kB = kConvWeightBlock;
    return layout == Bf16Layout::rows ? ((k / 2) * columns + o) * 2 + k % 2
                                      : ((o / kB * pairs + k / 2) * kB + o % kB) * 2 + k % 2;
  };
  // HWIO is [Kh][Kw][Ci][Co]: its row (tap, c) is step k = c + Ci' * tap of a [K][Co] matrix,
  // whose rows c = Ci of an odd Ci stay zero.
  for (int64_t tap = 0; tap < kh * kw; ++tap)
    for (int64_t c = 0; c < ci; ++c) {
      const int64_t k = c + paired * tap;
      for (int64_t o = 0; o < co; ++o)
        out[static_cast<size_t>(index(k, o))] =
            graph::to_bf16_bits(hwio[(tap * ci + c) * co + o]);
    }
  return out;
}

int grouped_conv_merge(int groups, int64_t out_channels) {
  constexpr int64_t kVector = 16;  // output channels: one AVX-512 vector, two AVX2 ones
  constexpr int kMaxMerge = 8;     // at most 8x the multiply-adds
  if (groups <= 1 || out_channels % groups != 0) return 1;
  const int64_t per_group = out_channels / groups;
  // Groups that tile a vector exactly (1, 2, 4 or 8 channels) take the grouped schedule's
  // permuted inputs instead, with no multiply-add on zeros; groups of whole 8-channel vectors
  // (RegNet's 24, 40 or 56) take the dense schedules with 8 lanes on AVX-512 as on AVX2
  // (codegen::conv_schedule_target).
  if (kVector % per_group == 0 || per_group % (kVector / 2) == 0) return 1;
  for (int merge = 1; merge <= kMaxMerge; ++merge)
    if (merge * per_group % kVector == 0 && groups % merge == 0) return merge;
  return 1;
}

AlignedVector<float> widen_grouped_conv_weights(const float* hwio, int64_t kh, int64_t kw,
                                              int64_t ci_per_group, int64_t co, int groups,
                                              int merge) {
  const int64_t co_per_group = co / groups, wide_ci = merge * ci_per_group;
  AlignedVector<float> out(static_cast<size_t>(kh * kw * wide_ci * co), 0.0f);
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
