// Kiln's runtime: runs an optimized graph with the kernels generated for it out of one planned
// arena. Thin by design:
// every computation is in a kernel; this only binds buffers and calls.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/kernel_spec.h"
#include "graph/memory_limit.h"
#include "graph/memory_plan.h"
#include "graph/reference.h"
#include "kiln/generated_kernels.h"

namespace kiln {

enum class Schedule { tuned, naive };
const char* to_string(Backend b);
const char* to_string(Schedule s);

// Empty when backend `b` can run kernels here (always for the CPU); otherwise why not, e.g.
// "CUDA is not usable here (error -1: ...)" on a machine without a GPU or driver. It allocates
// and frees one element of device memory to find out.
std::string backend_unusable_reason(Backend b);

// Sets the size of the thread pool every Model's kernels run on (ModelOptions::threads), for
// the Models already built as well; threads must be > 0. Waits for a kernel call in flight on
// the pool to end.
void set_kernel_threads(int threads);

struct ModelOptions {
  Backend backend = Backend::cpu;
  // With a GPU backend: run on the CPU instead when no GPU or driver is usable, rather than
  // failing. Model::fallback_reason() then says why.
  bool fallback_to_cpu = false;
  // naive: every dense convolution with Halide's default schedule (a baseline). CPU only; the
  // GPU kernels have one schedule.
  Schedule schedule = Schedule::tuned;
  // Index into the CPU targets (kiln::runtime::cpu_targets()) the kernels are generated for;
  // -1 lets the generator choose (codegen::kernel_generator: the best this CPU supports).
  int cpu_target = -1;
  // Threads of Kiln's thread pool, on which the kernels of every Model in the process run (the
  // calling thread included; runtime/thread_pool.h): a Model built with threads > 0 sets the
  // pool's size for all of them (as set_kernel_threads does). 0: leave it (the first time: one
  // per core, or HL_NUM_THREADS if set).
  int threads = 0;
  bool profile = false;  // time every kernel call (Model::kernel_times)
  // Supplies the kernels generated for this model's shapes (graph::is_generated specs). Needed
  // when the model has any: codegen::kernel_generator() compiles them (the `kiln` tool, tests),
  // a compiled model's archive links them. Without it such a model is refused with an error.
  KernelGenerator generate_kernels;
  // Lower and plan only; bind and call nothing (reports such as `kiln compile`'s). run() fails.
  bool lower_only = false;
  // A model whose planned arena (every intermediate tensor and the outputs) needs more bytes
  // is refused with a graph::Error before anything is allocated (not checked with lower_only).
  // 0: this machine's physical memory (graph::physical_memory_bytes).
  int64_t max_memory_bytes = 0;
  // Fill the arena with NaN before every run (CPU backend), so a kernel that reads a tensor
  // before any kernel of this run wrote it produces NaN instead of a stale or zero value. Also
  // on in a runtime built without NDEBUG and wherever the environment sets KILN_POISON_ARENA=1
  // (the test presets do). Costs one write of the arena per run.
  bool poison_arena = false;
  // bf16 convolutions call their AMX kernels (GeneratedKernel::amx_fn) where the CPU has AMX
  // and the OS grants it (runtime::amx_usable); false: their AVX512_BF16 kernels (or, on
  // targets without it, the same products as float32 multiply-adds).
  bool amx = true;
  // Where float32 convolutions whose output channels are an odd multiple of 8 run their kernel
  // with 8-lane vectors instead of the AVX-512 kernel's 16 (GeneratedKernel::half_fn): by
  // default on CPUs that run a 512-bit multiply-add at half a 256-bit one's rate (Zen 4).
  HalfWidth half_width = HalfWidth::where_faster;
};

// An error value: ok(), or a message naming what failed.
class Status {
 public:
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }
  bool is_ok() const { return message_.empty(); }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const { return message_; }

 private:
  Status() = default;
  // Kept printable() like graph::Error's: messages name nodes and tensors of the model.
  explicit Status(std::string m) : message_(m.empty() ? "unknown error" : graph::printable(m)) {}
  std::string message_;
};

struct TensorView {
  std::string name;
  const float* data = nullptr;
  graph::Shape shape;
  graph::Layout layout = graph::Layout::any;
};

class Model {
 public:
  // `optimized` is the result of graph::run_passes. Throws graph::Error when a node has no
  // kernel (or generated kernels are needed and options.generate_kernels is unset or fails),
  // when a CPU target index is out of range or unsupported by this CPU, or when CUDA is
  // requested, unusable, and fallback_to_cpu is off.
  // A graph moved in is the Model's alone: constants the kernels read re-laid-out (conv
  // weights at a padded row stride, grouped weights widened) are then freed once copied, so
  // the weights are resident once.
  explicit Model(graph::Graph optimized, const ModelOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Graph inputs in their declared shapes and layouts (e.g. NCHW), in graph input order.
  // Thread safety: one call at a time per Model. A call made while another thread's call on the
  // same Model is running fails with an error and touches nothing; outputs are the last
  // finished call's. Separate Models in separate threads are independent.
  Status run(const std::vector<const float*>& inputs);
  // The same, checking each tensor's shape first.
  Status run(const std::vector<graph::Tensor>& inputs);

  size_t num_inputs() const;
  TensorView input_info(size_t i) const;  // data is null
  size_t num_outputs() const;
  // Valid after a successful run(), until the next one. Layout is the graph's (NHWC for
  // images); graph::to_layout converts.
  TensorView output(size_t i) const;

  const std::vector<graph::KernelSpec>& kernels() const;
  // With ModelOptions::profile: wall time of each kernel in the last run, in kernels() order.
  const std::vector<double>& kernel_seconds() const;
  // The Winograd tile m of kernel k's generated code (F(m x m, 3x3) reading transformed
  // weights), in kernels() order; 0 for every other kernel.
  int winograd_tile(size_t k) const;
  // Whether kernel k calls its half-width kernel (GeneratedKernel::half_fn: 8-lane vectors on
  // an AVX-512 target, ModelOptions::half_width), in kernels() order.
  bool half_width(size_t k) const;
  const graph::ArenaPlan& arena_plan() const;
  Backend backend() const;                   // the backend in use (cpu after a fallback)
  const std::string& fallback_reason() const;  // empty unless CUDA fell back to CPU
  std::string cpu_target() const;            // the CPU target in use, for reports

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
