// Model: lowers an optimized graph to kernel calls, plans and owns the arena, and runs.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <optional>
#include <tuple>

#include "HalideBuffer.h"
#include "HalideRuntime.h"
#include "HalideRuntimeCuda.h"
#include "HalideRuntimeOpenCL.h"
#include "conv_weights.h"
#include "float_mode.h"
#include "graph/verify.h"
#include "halide_errors.h"
#include "kernels.h"
#include "kiln/runtime.h"
#include "scratch_memory.h"
#include "thread_pool.h"

namespace kiln {

void set_kernel_threads(int threads) {
  if (threads <= 0) throw std::invalid_argument("set_kernel_threads: threads must be > 0");
  runtime::use_thread_pool(threads);
}

namespace {

using HalideBuffer = Halide::Runtime::Buffer<float>;

// The form of a weight copy (Model::Impl::weight_copies) a bf16 kernel reads: bfloat16 pairs
// blocked by 16 output channels (runtime::Bf16Layout::blocked).
constexpr int kBf16Form = -1;
// The same for an AMX kernel: Bf16Layout::rows.
constexpr int kBf16RowsForm = -2;

// Halide dimensions are innermost first: the reverse of the row-major shape. A rank-0 tensor is
// one element of shape [1], as the kernels see it (graph::lower_to_kernels).
HalideBuffer wrap(float* data, const graph::Shape& shape) {
  std::vector<int> sizes(shape.rbegin(), shape.rend());
  if (sizes.empty()) sizes = {1};
  return HalideBuffer(data, sizes);
}

struct Call {
  std::string name;
  GeneratedKernelFn fn = nullptr;
  std::vector<graph::TensorDesc> arguments;  // in argument order, output last
  std::vector<void*> args;
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

bool is_gpu(Backend b) { return b != Backend::cpu; }

}  // namespace

std::string backend_unusable_reason(Backend b) {
  if (!is_gpu(b)) return "";
  const halide_device_interface_t* device = nullptr;
  if (b == Backend::cuda) {
#ifdef KILN_HAVE_CUDA
    device = halide_cuda_device_interface();
#else
    return "this build of Kiln has no CUDA support (KILN_BUILD_CUDA=OFF)";
#endif
  } else {
    device = halide_opencl_device_interface();
  }
  runtime::begin_halide_call();
  float probe_data[1] = {0.0f};
  HalideBuffer probe(probe_data, 1);
  const int rc = halide_device_malloc(nullptr, probe.raw_buffer(), device);
  if (rc == 0) {
    probe.device_free();
    return "";
  }
  std::string why = runtime::last_halide_error();
  return std::string(b == Backend::cuda ? "CUDA" : "OpenCL") + " is not usable here (error " +
         std::to_string(rc) + (why.empty() ? "" : ": " + why) + ")";
}

const char* to_string(Backend b) {
  switch (b) {
    case Backend::cpu: return "cpu";
    case Backend::cuda: return "cuda";
    case Backend::opencl: return "opencl";
  }
  return "?";
}
const char* to_string(Schedule s) { return s == Schedule::tuned ? "tuned" : "naive"; }

struct Model::Impl {
  graph::Graph g;
  ModelOptions options;
  std::vector<graph::KernelSpec> kernels;
  graph::ArenaPlan plan;
  std::unique_ptr<void, FreeDeleter> arena;
  std::vector<HalideBuffer> buffers;  // by value id
  // Copies of conv weights in the layouts the CPU kernels read: narrow groups' weights widened
  // to blocks, dense weights blocked by output channels, Winograd-transformed weights (owned
  // here).
  std::vector<runtime::AlignedVector<float>> restrided_weights;
  std::vector<runtime::AlignedVector<uint16_t>> bf16_weights;  // packed for bf16 kernels
  // Buffers over the blocked, the bf16-packed and the Winograd-transformed copies, one per
  // (weights, form: the Winograd tile, 0 for blocked, kBf16Form for bf16; the stride of a
  // Winograd form, whose matrices it picks), bound to those calls
  // only; a list, so the buffers never move once calls point at them.
  std::list<std::pair<std::tuple<uint32_t, int, int>, Halide::Runtime::Buffer<>>> weight_copies;
  // Arguments a kernel reads under another shape of their dense bytes (argument()), with the
  // value each views (a graph input's view follows the input run() binds); a list, so the
  // buffers never move once calls point at them.
  std::list<std::pair<graph::ValueId, HalideBuffer>> reshaped;
  // Constants the kernels read as the graph holds them, moved to aligned storage
  // (align_constants).
  std::vector<runtime::AlignedVector<float>> aligned_constants;
  std::vector<Call> calls;
  std::shared_ptr<const GeneratedKernels> generated;  // for the graph::is_generated specs
  std::string fallback_reason;
  std::vector<double> kernel_seconds;
  std::vector<int> winograd_tiles;  // by kernel: GeneratedKernel::winograd_tile, or 0
  std::vector<bool> half_widths;    // by kernel: whether it calls GeneratedKernel::half_fn
  // Set while run() binds inputs and calls kernels: the arena, the bound inputs and the outputs
  // belong to one call at a time, so a concurrent call fails instead of corrupting the results.
  std::atomic<bool> running{false};

  bool poison = false;  // ModelOptions::poison_arena, the build or the environment

  void load_generated_kernels();
  void bind_buffers();
  void poison_arena();
  void widen_grouped_weights(const graph::ConvKernelSpec& conv);
  std::vector<void*> copied_weight_args(const graph::ConvKernelSpec& conv, int tile);
  void release_constant(graph::ValueId v);
  void* argument(const graph::TensorDesc& t);
  void make_calls();
  bool uses_half_width(const GeneratedKernel& gk) const;
  void align_constants();
  Status run_calls();
};

// Asks the generator for the kernels of the generated specs and checks that each one was
// compiled for exactly its spec, so a stale or foreign table is an error, not wrong numbers.
void Model::Impl::load_generated_kernels() {
  const std::vector<graph::KernelSpec>& specs = kernels;
  if (specs.empty()) return;
  if (!options.generate_kernels)
    throw graph::Error("kernel '" + graph::kernel_name(specs[0]) + "' (and " +
                       std::to_string(specs.size() - 1) +
                       " more) must be generated for this model's shapes; give the Model a "
                       "kernel generator (ModelOptions::generate_kernels, e.g. "
                       "codegen::kernel_generator())");
  KernelRequest request;
  request.backend = options.backend;
  if (options.backend == Backend::cpu && options.cpu_target >= 0)
    request.cpu_target = runtime::cpu_targets()[static_cast<size_t>(options.cpu_target)];
  request.half_width = options.half_width;
  generated = options.generate_kernels(specs, request);
  if (!generated || generated->kernels.size() != specs.size())
    throw graph::Error("the generated kernel table has " +
                       std::to_string(generated ? generated->kernels.size() : 0) +
                       " kernels; this model needs " + std::to_string(specs.size()));
  for (size_t i = 0; i < specs.size(); ++i) {
    const GeneratedKernel& k = generated->kernels[i];
    if (!k.fn || !k.signature || graph::kernel_signature(specs[i]) != k.signature)
      throw graph::Error("generated kernel " + std::to_string(i) + " was compiled for another "
                         "model or shape than kernel '" + graph::kernel_name(specs[i]) +
                         "'; recompile the model");
  }
}

void Model::Impl::bind_buffers() {
  const int64_t bytes = std::max<int64_t>(plan.arena_bytes, 64);
  arena.reset(std::aligned_alloc(64, static_cast<size_t>((bytes + 63) / 64 * 64)));
  if (!arena) throw graph::Error("cannot allocate the " + std::to_string(bytes) + "-byte arena");
  buffers.resize(g.values().size());
  for (uint32_t i = 0; i < g.values().size(); ++i) {
    const graph::Value& v = g.value(graph::ValueId{i});
    if (v.is_constant()) {
      // Kernels never write their inputs; Halide's buffer type is simply not const-aware here.
      buffers[i] = wrap(const_cast<float*>(v.data->data()), v.shape);
    } else if (const graph::ArenaBuffer* b = plan.find(graph::ValueId{i})) {
      buffers[i] = wrap(reinterpret_cast<float*>(static_cast<char*>(arena.get()) + b->offset),
                        v.shape);
    } else if (!plan.find_alias(graph::ValueId{i})) {
      buffers[i] = wrap(nullptr, v.shape);  // a graph input: bound by run()
    }
  }
  // Strided views (a Transpose's, and the Slices and Reshapes of one): the base's elements at
  // their offset and strides. Reshapes and contiguous Slices stored as views: the base's bytes
  // from the view's offset on, under their own dense shape. Tensors written in place into a
  // Concat's output, and the other Slices stored as views: a view of their slice, at the base's
  // strides. Mins at 0, like every other kernel argument.
  for (const graph::ArenaAlias& a : plan.aliases) {
    const HalideBuffer& base = buffers[a.base.index];
    const graph::Shape& shape = g.value(a.value).shape;
    const int rank = static_cast<int>(shape.size());
    std::vector<halide_dimension_t> dims(static_cast<size_t>(rank));
    if (a.is_strided()) {  // Halide dimension d is shape axis rank - 1 - d
      for (int d = 0; d < rank; ++d)
        dims[static_cast<size_t>(d)] = {
            0, static_cast<int32_t>(shape[static_cast<size_t>(rank - 1 - d)]),
            static_cast<int32_t>(a.strides[static_cast<size_t>(rank - 1 - d)])};
      buffers[a.value.index] =
          HalideBuffer(const_cast<float*>(base.data()) + a.offset, rank, dims.data());
      continue;
    }
    if (a.is_view()) {
      buffers[a.value.index] = wrap(const_cast<float*>(base.data()) + a.offset, shape);
      continue;
    }
    for (int d = 0; d < rank; ++d)
      dims[static_cast<size_t>(d)] = {
          0, static_cast<int32_t>(shape[static_cast<size_t>(rank - 1 - d)]), base.dim(d).stride()};
    float* data = base.data() + a.offset * base.dim(rank - 1 - a.axis).stride();
    buffers[a.value.index] = HalideBuffer(data, rank, dims.data());
  }
}

// Narrow groups run as blocks of groups (runtime::grouped_conv_merge): the generated kernel
// reads the weights widened to the block's input channels.
void Model::Impl::widen_grouped_weights(const graph::ConvKernelSpec& c) {
  const int merge = runtime::grouped_conv_merge(c.groups, c.output.shape[3]);
  if (c.depthwise || merge == 1) return;
  HalideBuffer& b = buffers[c.weights.value.index];
  const graph::Shape& s = g.value(c.weights.value).shape;  // [Kh, Kw, Ci / groups, Co]
  if (b.dim(1).extent() != s[2]) return;  // widened already, for another conv
  runtime::AlignedVector<float> wide =
      runtime::widen_grouped_conv_weights(b.data(), s[0], s[1], s[2], s[3], c.groups, merge);
  b = HalideBuffer(wide.data(), {static_cast<int>(s[3]), static_cast<int>(merge * s[2]),
                                 static_cast<int>(s[1]), static_cast<int>(s[0])});
  restrided_weights.push_back(std::move(wide));  // the buffer keeps pointing at it
  release_constant(c.weights.value);
}

// A kernel compiled with Winograd (tile > 0) reads its weights transformed
// (runtime::winograd_conv_weights), a bf16 kernel packed as bfloat16 pairs (tile kBf16Form, or
// kBf16RowsForm for an AMX kernel; runtime::pack_bf16_conv_weights), a dense CPU kernel otherwise blocked by output channels
// (tile 0, runtime::block_conv_weights). The copy is made here once for all calls; kernels
// that read the same weights in the same form share it. Returns the kernel's argument vector
// with the copy in the weights' place.
std::vector<void*> Model::Impl::copied_weight_args(const graph::ConvKernelSpec& c, int tile) {
  const graph::Value& w = g.value(c.weights.value);
  if (!w.is_constant())
    throw graph::Error("kernel '" + c.name + "' reads its weights " +
                       (tile > 0 ? "Winograd-transformed" : tile < 0 ? "as bf16" : "blocked") +
                       ", which needs constant weights; '" + w.name + "' is an input");
  const std::tuple<uint32_t, int, int> key{c.weights.value.index, tile, tile > 0 ? c.stride_w : 0};
  auto it = std::find_if(weight_copies.begin(), weight_copies.end(),
                         [&](const auto& e) { return e.first == key; });
  if (it == weight_copies.end()) {
    const graph::Shape& s = w.shape;  // HWIO [Kh, Kw, Ci, Co]
    KILN_CHECK(w.data, "conv weights released before every form of them was made");
    const auto i32 = [](int64_t v) { return static_cast<int>(v); };
    runtime::AlignedVector<float> copy;
    Halide::Runtime::Buffer<> buffer;
    if (tile == kBf16Form || tile == kBf16RowsForm) {
      const runtime::Bf16Layout layout =
          tile == kBf16Form ? runtime::Bf16Layout::blocked : runtime::Bf16Layout::rows;
      runtime::AlignedVector<uint16_t> packed =
          runtime::pack_bf16_conv_weights(w.data->data(), s[0], s[1], s[2], s[3], layout);
      const int pairs = i32(runtime::bf16_conv_reduction(s[0], s[1], s[2]) / 2);
      const halide_type_t bf16(halide_type_bfloat, 16);
      buffer = layout == runtime::Bf16Layout::blocked
                   ? Halide::Runtime::Buffer<>(bf16, packed.data(),
                                               {2, runtime::kConvWeightBlock, pairs,
                                                i32(runtime::conv_weight_blocks(s[3]))})
                   : Halide::Runtime::Buffer<>(bf16, packed.data(),
                                               {2, i32(runtime::bf16_conv_columns(s[3])), pairs});
      bf16_weights.push_back(std::move(packed));
    } else if (tile > 0) {
      // The stride picks the matrices (runtime::winograd_matrices), so it is part of the key.
      copy = runtime::winograd_conv_weights(w.data->data(), s[2], s[3], tile, c.stride_w);
      const int alpha = runtime::winograd_alpha(tile, c.stride_w);
      buffer = HalideBuffer(copy.data(), {i32(s[3]), i32(s[2]), alpha, alpha});
    } else {
      copy = runtime::block_conv_weights(w.data->data(), s[0], s[1], s[2], s[3],
                                         runtime::conv_weight_interleave(c));
      buffer = HalideBuffer(copy.data(), 5,
                            runtime::blocked_conv_weight_dims(s[0], s[1], s[2], s[3]).data());
    }
    // The buffer points into the copy, which restrided_weights owns (no second copy at load).
    weight_copies.emplace_back(key, std::move(buffer));
    restrided_weights.push_back(std::move(copy));
    it = std::prev(weight_copies.end());
    // Read by this kernel alone: the copy is the weights' only resident form.
    size_t readers = 0;
    for (const graph::KernelSpec& k : kernels)
      for (const graph::TensorDesc& t : graph::generated_kernel_arguments(k)) readers += t.value == c.weights.value;
    if (readers == 1) release_constant(c.weights.value);
  }
  std::vector<void*> args;
  for (const graph::TensorDesc& t : graph::generated_kernel_arguments(c))
    args.push_back(t.value == c.weights.value ? it->second.raw_buffer() : argument(t));
  return args;
}

// The buffer of kernel argument t: its value's, or where the kernel reads the value under
// another shape of the same rank (a pointwise convolution's longer rows, graph::PlanOptions::
// flat_pointwise), a dense view of the same bytes with t's shape. Made once per call site,
// before any run; run() points a graph input's views at the input it binds. Constants are
// passed as they are (align_constants moves their storage afterwards; no spec reshapes them).
void* Model::Impl::argument(const graph::TensorDesc& t) {
  HalideBuffer& b = buffers[t.value.index];
  const graph::Shape& shape = g.value(t.value).shape;
  if (t.shape == shape || t.shape.size() != shape.size() || g.value(t.value).is_constant())
    return b.raw_buffer();
  KILN_CHECK(graph::num_elements(t.shape) == graph::num_elements(shape) && t.strides.empty(),
             "kernel argument '" + t.name + "' reshaped to other sizes or strides");
  reshaped.emplace_back(t.value, wrap(b.data(), t.shape));
  return reshaped.back().second.raw_buffer();
}

// The kernels read constant v from a re-laid-out copy now: the graph's own data is not read
// again (only run() and the accessors use the graph from here on, never constants' data), so
// it goes, and its memory with it unless the caller still shares it (a Model made from a
// moved graph holds the only reference). The weights are then resident once, not twice.
void Model::Impl::release_constant(graph::ValueId v) { g.value(v).data.reset(); }

// Whether the call of `gk` is its half-width kernel: one the CPU can run, of the CPU target the
// options name if they name one, where the options ask for it (by default where the CPU splits
// 512-bit multiply-adds).
bool Model::Impl::uses_half_width(const GeneratedKernel& gk) const {
  if (!gk.half_fn || !gk.half_target || options.backend != Backend::cpu ||
      options.half_width == HalfWidth::never || !runtime::target_supported(gk.half_target))
    return false;
  if (options.cpu_target >= 0 &&
      runtime::cpu_targets()[static_cast<size_t>(options.cpu_target)] != gk.half_target)
    return false;
  return options.half_width == HalfWidth::always || runtime::splits_512bit_fma();
}

void Model::Impl::make_calls() {
  for (size_t i = 0; i < kernels.size(); ++i) {
    const graph::KernelSpec& k = kernels[i];
    Call c;
    c.name = graph::kernel_name(k);
    {
      const GeneratedKernel& gk = generated->kernels[i];
      const auto* conv = std::get_if<graph::ConvKernelSpec>(&k);
      winograd_tiles.resize(calls.size() + 1);
      const bool amx = gk.amx_fn && options.amx && options.backend == Backend::cpu && runtime::amx_usable();
      if (conv && gk.winograd_tile > 0) {
        winograd_tiles.back() = gk.winograd_tile;
        c.args = copied_weight_args(*conv, gk.winograd_tile);
      } else if (conv && conv->bf16) {
        c.args = copied_weight_args(*conv, amx ? kBf16RowsForm : kBf16Form);
      } else if (conv && options.backend == Backend::cpu && runtime::blocks_conv_weights(*conv)) {
        c.args = copied_weight_args(*conv, 0);
      } else if (conv) {
        widen_grouped_weights(*conv);
      }
      const bool half = !amx && uses_half_width(gk);
      half_widths.resize(calls.size() + 1);
      half_widths.back() = half;
      c.fn = amx ? gk.amx_fn : half ? gk.half_fn : gk.fn;
      c.arguments = graph::generated_kernel_arguments(k);
    }
    calls.push_back(std::move(c));
  }
  // Argument vectors point into `buffers`, which stays put from here on.
  for (Call& c : calls)
    if (c.args.empty())
      for (const graph::TensorDesc& t : c.arguments) c.args.push_back(argument(t));
  if (options.backend == Backend::cpu) align_constants();
}

// The constants the kernels read as the graph holds them (depthwise and Gemm weights, biases,
// per-channel parameters) start where std::vector's allocation put them, 16 bytes past a
// cache line for large ones, so a vector load of 16 of them straddled two lines. Each such
// constant moves to 64-byte-aligned storage, its buffer (which the calls' argument vectors
// point at) to the copy, and the graph's data goes. After every weight copy is made: nothing
// reads the graph's constants from here on.
void Model::Impl::align_constants() {
  for (const Call& c : calls)
    for (size_t i = 0; i < c.arguments.size(); ++i) {
      const graph::ValueId id = c.arguments[i].value;
      const graph::Value& v = g.value(id);
      halide_buffer_t* b = buffers[id.index].raw_buffer();
      // Not a copy's buffer (Winograd, blocked, bf16), and not moved already.
      if (c.args[i] != b || !v.is_constant() || reinterpret_cast<uintptr_t>(b->host) % 64 == 0)
        continue;
      aligned_constants.emplace_back(v.data->begin(), v.data->end());
      b->host = reinterpret_cast<uint8_t*>(aligned_constants.back().data());
      release_constant(id);
    }
}

// All bits set: a quiet NaN in every float of the arena, gaps between tensors included.
void Model::Impl::poison_arena() {
  if (poison && options.backend == Backend::cpu)
    std::memset(arena.get(), 0xff, static_cast<size_t>(std::max<int64_t>(plan.arena_bytes, 64)));
}

Status Model::Impl::run_calls() {
  poison_arena();
  const runtime::FlushDenormals denormals_are_zero;  // the caller's mode is back on return
  for (size_t i = 0; i < calls.size(); ++i) {
    Call& c = calls[i];
    const auto t0 = std::chrono::steady_clock::now();
    runtime::begin_halide_call();
    const int rc = c.fn(c.args.data());
    if (options.profile)
      kernel_seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rc != 0) {
      const std::string why = runtime::last_halide_error();
      return Status::error("kernel '" + c.name + "' failed on " + to_string(options.backend) +
                           " (error " + std::to_string(rc) + ")" + (why.empty() ? "" : ": " + why));
    }
  }
  if (is_gpu(options.backend)) {
    for (graph::ValueId v : g.outputs) {
      runtime::begin_halide_call();
      const int rc = buffers[v.index].copy_to_host();
      if (rc != 0)
        return Status::error("copying output '" + g.value(v).name + "' from the GPU failed (error " +
                             std::to_string(rc) + "): " + runtime::last_halide_error());
    }
  }
  return Status::ok();
}

Model::Model(graph::Graph optimized, const ModelOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  graph::verify(optimized, "given to the runtime");
  m.g = std::move(optimized);
  m.options = options;

  const int num_targets = static_cast<int>(runtime::cpu_targets().size());
  if (options.cpu_target >= num_targets || options.cpu_target < -1)
    throw graph::Error("CPU target index " + std::to_string(options.cpu_target) +
                       " is out of range (this build has " + std::to_string(num_targets) + ")");
  if (options.cpu_target >= 0 && !runtime::cpu_target_supported(options.cpu_target))
    throw graph::Error("this CPU lacks features that target " +
                       runtime::cpu_targets()[options.cpu_target] + " needs");
  if (is_gpu(options.backend)) {
    const std::string why = backend_unusable_reason(options.backend);
    if (!why.empty()) {
      if (!options.fallback_to_cpu)
        throw graph::Error(why + "; choose the cpu backend, or allow fallback to the CPU");
      m.options.backend = Backend::cpu;
      m.fallback_reason = why;
    } else {
      // Buffers a kernel allocates on the device for itself (a fused convolution's output before
      // its pooling, an average pooling's window counts) come from a cache after the first call
      // instead of a device allocation per call.
      halide_reuse_device_allocations(nullptr, true);
    }
  }
  // Concats whose inputs are written in place, and Reshapes stored as views, are not kernels
  // any more; a kernel reading a slice is compiled for its strides. GPU buffers are device
  // allocations of their own: no aliasing there.
  m.plan = graph::plan_arena(m.g, graph::plan_options_for(m.options.backend == Backend::cpu));
  m.kernels = graph::planned_kernels(m.g, m.plan);  // one kernel per node left, in node order
  for (graph::KernelSpec& k : m.kernels) {
    if (const auto* op = std::get_if<graph::OpKernelSpec>(&k))
      if (!graph::is_generated(k))
        throw graph::Error(std::string(graph::op_name(op->op)) + " node '" + op->name +
                           "': no kernel is generated for it in this form (" +
                           graph::not_generated_reason(k) +
                           "); a Model runs the graph graph::run_passes makes");
    if (auto* conv = std::get_if<graph::ConvKernelSpec>(&k))
      if (options.schedule == Schedule::naive && options.backend == Backend::cpu && !conv->depthwise)
        conv->schedule = "naive";
  }
  if (options.lower_only) return;  // nothing is allocated; kiln compile may target a larger machine
  graph::check_memory_limit(m.plan.arena_bytes, options.max_memory_bytes,
                            "the model's arena (its intermediate tensors and outputs)");
  m.load_generated_kernels();
  runtime::use_thread_pool(options.threads);
  runtime::use_scratch_memory();
  const char* env_poison = std::getenv("KILN_POISON_ARENA");
  m.poison = options.poison_arena || (env_poison && std::string(env_poison) == "1");
#ifndef NDEBUG
  m.poison = true;
#endif
  m.bind_buffers();
  m.poison_arena();
  std::vector<graph::ValueId> constants;
  for (uint32_t i = 0; i < m.g.values().size(); ++i)
    if (m.g.value(graph::ValueId{i}).is_constant()) constants.push_back(graph::ValueId{i});
  m.make_calls();
  // Constants (weights, and the runtime's re-laid-out copies) live on the host until a GPU
  // kernel first reads them: marked as newer there, so that first call copies them up.
  if (is_gpu(m.options.backend))
    for (graph::ValueId v : constants) m.buffers[v.index].set_host_dirty(true);
  m.kernel_seconds.assign(m.calls.size(), 0.0);
}

Model::~Model() {
  if (impl_ && is_gpu(impl_->options.backend))
    for (HalideBuffer& b : impl_->buffers)
      if (b.raw_buffer()->device) b.device_free();
}

Status Model::run(const std::vector<const float*>& inputs) {
  Impl& m = *impl_;
  if (m.options.lower_only) return Status::error("this Model was made with lower_only; it cannot run");
  if (m.running.exchange(true))
    return Status::error("Model::run was called while another call on this Model is running; a "
                         "Model runs one call at a time (use one Model per thread)");
  struct Done {
    std::atomic<bool>& flag;
    ~Done() { flag = false; }
  } done{m.running};
  if (inputs.size() != m.g.inputs.size())
    return Status::error("the model has " + std::to_string(m.g.inputs.size()) + " inputs, got " +
                         std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) return Status::error("input '" + m.g.value(m.g.inputs[i]).name + "' is null");
    HalideBuffer& b = m.buffers[m.g.inputs[i].index];
    b.raw_buffer()->host = reinterpret_cast<uint8_t*>(const_cast<float*>(inputs[i]));
    if (is_gpu(m.options.backend)) b.set_host_dirty(true);
    for (auto& [value, view] : m.reshaped)
      if (value == m.g.inputs[i]) view.raw_buffer()->host = b.raw_buffer()->host;
  }
  return m.run_calls();
}

Status Model::run(const std::vector<graph::Tensor>& inputs) {
  const Impl& m = *impl_;
  if (inputs.size() != m.g.inputs.size())
    return Status::error("the model has " + std::to_string(m.g.inputs.size()) + " inputs, got " +
                         std::to_string(inputs.size()));
  std::vector<const float*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const graph::Value& v = m.g.value(m.g.inputs[i]);
    if (inputs[i].shape != v.shape ||
        static_cast<int64_t>(inputs[i].data.size()) != graph::num_elements(v.shape))
      return Status::error("input '" + v.name + "' must have shape " + graph::to_string(v.shape) +
                           " (" + graph::to_string(v.layout) + "), got " +
                           graph::to_string(inputs[i].shape) + " with " +
                           std::to_string(inputs[i].data.size()) + " elements");
    ptrs.push_back(inputs[i].data.data());
  }
  return run(ptrs);
}

size_t Model::num_inputs() const { return impl_->g.inputs.size(); }
size_t Model::num_outputs() const { return impl_->g.outputs.size(); }

TensorView Model::input_info(size_t i) const {
  const graph::Value& v = impl_->g.value(impl_->g.inputs.at(i));
  return {v.name, nullptr, v.shape, v.layout};
}

TensorView Model::output(size_t i) const {
  const graph::ValueId id = impl_->g.outputs.at(i);
  const graph::Value& v = impl_->g.value(id);
  return {v.name, impl_->buffers[id.index].data(), v.shape, v.layout};
}

const std::vector<graph::KernelSpec>& Model::kernels() const { return impl_->kernels; }
const std::vector<double>& Model::kernel_seconds() const { return impl_->kernel_seconds; }
int Model::winograd_tile(size_t k) const {
  return k < impl_->winograd_tiles.size() ? impl_->winograd_tiles[k] : 0;
}
bool Model::half_width(size_t k) const {
  return k < impl_->half_widths.size() && impl_->half_widths[k];
}
const graph::ArenaPlan& Model::arena_plan() const { return impl_->plan; }
Backend Model::backend() const { return impl_->options.backend; }
const std::string& Model::fallback_reason() const { return impl_->fallback_reason; }

std::string Model::cpu_target() const {
  const int t = impl_->options.cpu_target >= 0 ? impl_->options.cpu_target
                                               : runtime::best_cpu_target();
  return t >= 0 ? runtime::cpu_targets()[t] : "none";
}

}  // namespace kiln
