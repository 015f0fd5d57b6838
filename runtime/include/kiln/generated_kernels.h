// The interface between the runtime and the kernels codegen/ generates for one model: a table
// of entry points, one per generated kernel spec, each with the signature it was compiled for.
// Compiled models link their table; `kiln run`, `bench` and the tests load one from codegen.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/kernel_spec.h"

namespace kiln {

// Halide's argv entry point: one halide_buffer_t* per graph::generated_kernel_arguments(spec).
using GeneratedKernelFn = int (*)(void** args);

struct GeneratedKernel {
  const char* signature;  // graph::kernel_signature of the spec it was compiled for
  GeneratedKernelFn fn;
  // A convolution whose kernel reads its weights Winograd-transformed: the tile (2 or 4) of
  // runtime::winograd_conv_weights, which the runtime applies once when it binds them; 0: the
  // weights as the spec gives them.
  int winograd_tile = 0;
  // A bf16 convolution's kernel on Intel's AMX tiles (the amx schedule), or null: the runtime
  // calls it instead of `fn` where runtime::amx_usable() (the CPU has AMX-BF16 and the OS granted
  // this process the tile state). Same arguments and weight layout as `fn`.
  GeneratedKernelFn amx_fn = nullptr;
  // A float32 convolution's kernel with half-width vectors (schedules::half_width_params: 8-lane
  // vectors on an AVX-512 target, for output channels that are an odd multiple of 8), or null,
  // compiled for `half_target` alone. The runtime calls it instead of `fn` where the CPU
  // supports that target and runs a 512-bit multiply-add at half a 256-bit one's rate
  // (runtime::splits_512bit_fma), unless ModelOptions::half_width says otherwise. Same
  // arguments and weight layout as `fn`.
  GeneratedKernelFn half_fn = nullptr;
  const char* half_target = nullptr;
};

struct GeneratedKernels {
  std::vector<GeneratedKernel> kernels;  // in the order of the specs they were generated for
  std::shared_ptr<void> owner;           // keeps the code loaded (a dlopen handle), or null
};

// Where a model's kernels run. cuda: NVIDIA GPUs. opencl: the same GPU schedules through
// OpenCL, for checking them where no NVIDIA GPU is (e.g. on the CPU through pocl); not a
// performance target.
enum class Backend { cpu, cuda, opencl };

// Where a Model calls the half-width kernels of its convolutions (GeneratedKernel::half_fn):
// where_faster, on CPUs that split 512-bit multiply-adds (runtime::splits_512bit_fma); always,
// wherever the CPU supports the kernel's target (to test or measure them anywhere); never.
enum class HalfWidth { where_faster, always, never };

// What a Model asks its KernelGenerator for.
struct KernelRequest {
  Backend backend = Backend::cpu;
  // Backend::cpu: the one Halide target to compile for (ModelOptions::cpu_target), or empty for
  // the generator's own targets, picked at run time by the kernels' dispatch wrappers.
  std::string cpu_target;
  // Which half-width kernels a generator compiling for this CPU alone (empty cpu_target with no
  // targets of its own, or a cpu_target) needs to compile: none with `never`, all with
  // `always`, and with where_faster those of a CPU that splits 512-bit multiply-adds. A library
  // for any CPU holds all of them.
  HalfWidth half_width = HalfWidth::where_faster;
};

// Produces the kernels for a model's generated specs (graph::is_generated), in order, for the
// request, or throws graph::Error naming what failed (e.g. no kernels for that backend).
using KernelGenerator = std::function<std::shared_ptr<const GeneratedKernels>(
    const std::vector<graph::KernelSpec>& specs, const KernelRequest& request)>;

}  // namespace kiln
