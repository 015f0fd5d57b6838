// What the runtime and codegen share about the CPU kernels: the build's CPU targets and the
// run-time check of which this CPU supports, and the weight layouts the convolution schedules
// read best.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::runtime {

// CPU targets kernels are compiled for, best first (KILN_CPU_TARGETS).
const std::vector<std::string>& cpu_targets();
// Whether this CPU has every feature a target needs.
bool cpu_target_supported(int index);
// The same for a Halide target string of this form (x86-64-linux-<features>).
bool target_supported(const std::string& target);
// The best target this CPU supports: the one the multi-target wrappers pick.
int best_cpu_target();
// bf16 convolutions (ConvKernelSpec::bf16) are compiled, before each AVX-512 target of the
// list, for this variant of it with AVX512_BF16 (Halide's avx512_zen4 level, whose vdpbf16ps
// the bf16 schedules use: Zen 4, Zen 5, Sapphire Rapids and later); the dispatch wrapper runs
// the variant where the CPU has it, and the target itself elsewhere (the same bf16 arithmetic,
// products converted to float32 multiply-adds). "" for a target that gets no variant.
std::string bf16_target(const std::string& target);
// The target of a bf16 convolution's AMX kernel: bf16_target's with avx512_sapphirerapids
// (AMX-BF16 in Halide's feature levels). "" for a target that gets no variant.
std::string amx_target(const std::string& target);
// Makes the dispatch wrappers' feature check (halide_can_use_target_features) test
// avx512_zen4 against this CPU, on top of the check installed before (Halide's own, unless a
// caller replaced it): Halide 21 treats the feature as unknown, and so as available, on every
// CPU but one Zen 4 model, which would run the bf16 variant where AVX512_BF16 is missing.
// Called (once) by begin_halide_call.
void install_cpu_feature_check();
// Whether bf16 kernels run the dot-product instruction (the bf16 variant) on this CPU when
// CPU target `index` is the one chosen.
bool bf16_dot_products_supported(int index);
// Whether this CPU has AMX with bfloat16 (AMX-TILE, AMX-BF16) and the OS lets this process use
// the tile state (Linux: arch_prctl ARCH_REQ_XCOMP_PERM, asked once here). Where it does, the
// runtime calls bf16 convolutions' AMX kernels (GeneratedKernel::amx_fn).
bool amx_usable();
// The time of a 512-bit float multiply-add over a 256-bit one's at full throughput on this
// CPU, measured once on the calling thread (under a millisecond; up to four times where the
// result lies between the two kinds, 1.1-1.5, keeping the largest): about 2 where the CPU
// splits one into two 256-bit halves (Zen 4 measured 2.00) or has a single 512-bit unit, and
// by the same arithmetic about 1 where it has two 512-bit units (Intel's server cores, Zen 5;
// not yet measured); 0 without AVX-512.
double fma_512_to_256_time();
// Whether fma_512_to_256_time() is over 1.5: 16-lane vectors then do no more multiply-adds a
// cycle than 8-lane ones, and convolutions whose output channels are an odd multiple of 8 run
// faster with 8 lanes (GeneratedKernel::half_fn).
bool splits_512bit_fma();
// The Halide target of the CUDA kernels (KILN_CUDA_TARGET).
const std::string& cuda_target();

}  // namespace kiln::runtime
