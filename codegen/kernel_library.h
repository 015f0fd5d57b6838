// Compiling a model's generated kernels: one static library per kernel (an object per target
// plus a dispatch wrapper), the table that names their entry points, and, for the `kiln` tool
// and the tests, the same kernels linked into a cached shared object and loaded.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "graph/kernel_spec.h"
#include "kiln/generated_kernels.h"

namespace kiln::codegen {

// Called before kernel `index` of `count` is compiled, or when it was taken from the archive
// cache instead (`cached`).
using Progress =
    std::function<void(size_t index, size_t count, const std::string& kernel, bool cached)>;

// A tuned schedule for a kernel on a Halide target (as in the target lists: without
// no_runtime), in the text form of schedules/conv_params.h, or "" for the default. A lookup
// checks what it returns (schedule_db.h's does) so the compile does not fail on it.
using ScheduleLookup =
    std::function<std::string(const graph::KernelSpec& spec, const std::string& target)>;

// The schedule text a kernel is compiled with on `target`: its own (ConvKernelSpec::schedule),
// else the lookup's, else "" (the default).
std::string requested_schedule(const graph::KernelSpec& spec, const std::string& target,
                               const ScheduleLookup& schedules);

// The schedule texts of `spec` on each of `targets` (requested_schedule), all reading the
// weights in one layout, since the runtime binds them once for whichever target runs: the
// first target's schedule decides between direct and Winograd weights, and a target whose
// schedule reads the other layout gets that layout's default schedule.
std::vector<std::string> library_schedules(const graph::KernelSpec& spec,
                                           const std::vector<std::string>& targets,
                                           const ScheduleLookup& schedules);
// The Winograd tile whose transformed weights the kernel of `spec` for `targets` reads
// (GeneratedKernel::winograd_tile), 0 for the weights as given.
int library_weight_tile(const graph::KernelSpec& spec, const std::vector<std::string>& targets,
                        const ScheduleLookup& schedules);

// `spec`'s half-width kernel (GeneratedKernel::half_fn) in a library for `targets`: the first
// AVX-512 target (16 lanes) and the schedule half_width_schedule gives there, when the kernel
// has no schedule of its own on that target (requested_schedule) and that schedule reads the
// weights in the layout the library binds (library_weight_tile). An empty target: none.
struct HalfWidthKernel {
  std::string target, schedule;
};
HalfWidthKernel half_width_kernel(const graph::KernelSpec& spec,
                                  const std::vector<std::string>& targets,
                                  const ScheduleLookup& schedules);

// The C symbol of generated kernel `index`'s argv entry point.
std::string entry_point(const std::string& prefix, size_t index);

// Identifies the compiler itself: a hash of the running program, which links the passes and
// the code generator. Part of the keys of the kernel cache and of the optimized-graph cache,
// so a rebuilt Kiln (changed passes, algorithms or schedules) never reuses what an older one
// made, whatever its version string.
std::string generator_identity();

// The distinct kernels of `specs`: specs with equal signatures (the repeated blocks of a
// network) share one compiled kernel. `kernels` in order of first use; kernel_of[i] is spec i's.
struct DistinctKernels {
  std::vector<graph::KernelSpec> kernels;
  std::vector<size_t> kernel_of;
};
DistinctKernels distinct_kernels(const std::vector<graph::KernelSpec>& specs);

// Compiles each distinct kernel of `specs` (all graph::is_generated) for `targets` (Halide
// target strings, best first; the first one the CPU supports runs) into DIR/<prefix>_k<u>.a,
// whose entry point is entry_point(prefix, u), u its index in distinct_kernels(specs).kernels.
// Returns the archives in that order; `progress` counts distinct kernels. Throws graph::Error.
// `schedules` chooses each kernel's schedule per target (requested_schedule).
// A bf16 convolution (ConvKernelSpec::bf16) is compiled, before each AVX-512 target, for that
// target's AVX512_BF16 variant as well (runtime::bf16_target, picked by the dispatch wrapper
// where the CPU has it), and into a second archive DIR/<prefix>_k<u>_amx.a with the amx
// schedule (entry <prefix>_k<u>_amx_argv, GeneratedKernel::amx_fn), when the schedule takes the
// layer. A float32 convolution whose output channels are an odd multiple of 8 also gets, for
// the first AVX-512 target, a kernel with 8-lane vectors in DIR/<prefix>_k<u>_half.a (entry
// <prefix>_k<u>_half_argv, GeneratedKernel::half_fn; schedules::half_width_params), unless it
// has a schedule of its own on that target or `half_width` is never.
// `this_cpu` (one target, for the machine compiling it): only the kernels this CPU runs (the
// half-width ones with `half_width` always, or where_faster on a CPU that splits 512-bit
// multiply-adds).
// `cache_dir` (non-empty): each kernel's archives are kept in cache_dir/archives, keyed by
// everything they depend on (Kiln's generator, Halide, the compiler, the targets, the entry
// point's name, the kernel's signature and resolved schedules), and copied from there when the
// same kernel is compiled again; an entry whose archives do not match the sizes and hashes
// recorded with them is compiled again, and a cache that cannot be written is skipped.
std::vector<std::filesystem::path> write_kernel_archives(
    const std::vector<graph::KernelSpec>& specs, const std::vector<std::string>& targets,
    const std::string& prefix, const std::filesystem::path& dir, const Progress& progress = nullptr,
    const ScheduleLookup& schedules = nullptr, bool this_cpu = false,
    const std::string& cache_dir = "", HalfWidth half_width = HalfWidth::where_faster);

// Writes what Halide made of each distinct kernel for each target:
// DIR/<prefix>_k<u>-<target>.stmt (kind "stmt", the lowered statement) or .s (kind "assembly").
// Returns the number of files.
int write_kernel_listings(const std::vector<graph::KernelSpec>& specs,
                          const std::vector<std::string>& targets, const std::string& prefix,
                          const std::string& kind, const std::filesystem::path& dir,
                          const Progress& progress = nullptr,
                          const ScheduleLookup& schedules = nullptr);

// C++ source of `extern "C" const kiln::GeneratedKernel* <prefix>_kernel_table(std::size_t*)`:
// for each spec, its distinct kernel's entry point with the signature it was compiled for and
// the weight layout its kernels for `targets` with `schedules` read (library_weight_tile), and
// its AMX and half-width entry points where it has them.
std::string kernel_table_source(const std::vector<graph::KernelSpec>& specs,
                                const std::string& prefix,
                                const std::vector<std::string>& targets,
                                const ScheduleLookup& schedules = nullptr);

struct CodegenOptions {
  // Halide targets of CPU kernels, best first. Empty: the best target of this build's CPU
  // target list (runtime::cpu_targets()) that this CPU supports. A request for one CPU target
  // (KernelRequest::cpu_target) or for a GPU backend (KILN_CUDA_TARGET for CUDA, baseline
  // x86-64 with OpenCL for OpenCL) overrides them.
  std::vector<std::string> targets;
  // Where compiled kernel sets are kept, keyed by their signatures, the targets and Kiln's
  // version; a later model with the same kernels loads them instead of compiling. A set not
  // there is linked from each kernel's archives, themselves cached (write_kernel_archives), so
  // only kernels never compiled before are. Empty: no cache (compiled into a temporary
  // directory, loaded, removed).
  std::string cache_dir;
  Progress progress;  // null: silent
  // Tuned schedules (e.g. a schedule database's lookup); null: every kernel's default. The
  // cache key holds each kernel's resolved schedule, so a changed record recompiles.
  ScheduleLookup schedules;
};

// A KernelGenerator (for ModelOptions::generate_kernels) that compiles the specs as
// write_kernel_archives does, links them into a shared object and loads it. The Halide runtime
// is the one already linked into the program (whose symbols must be exported: ENABLE_EXPORTS).
KernelGenerator kernel_generator(const CodegenOptions& options = {});

}  // namespace kiln::codegen
