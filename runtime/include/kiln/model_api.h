// The engine behind the model classes `kiln compile` generates: loads a compiled model's
// .weights file and runs it, with outputs in the model's declared (logical) layout.
// Header-only: it is compiled into each generated model's archive, not into Kiln's libraries.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "graph/serialize.h"
#include "kiln/runtime.h"
#include "runtime/kernels.h"

namespace kiln {

struct CompiledModelOptions {
  // Indices into runtime::cpu_targets(), best first: the first one this CPU supports runs.
  // Empty: every compiled CPU target, picked by the kernels' dispatch wrappers.
  std::vector<int> cpu_targets;
  bool cuda = false;  // run on CUDA, on the CPU when no GPU is usable
  int threads = 0;    // 0: one per core
  // The model's generated kernels, linked into its archive (codegen::kernel_table_source): for
  // the CPU, and with `cuda` for CUDA.
  const GeneratedKernel* (*kernel_table)(std::size_t* count) = nullptr;
  const GeneratedKernel* (*cuda_kernel_table)(std::size_t* count) = nullptr;
  // The checksum of the .weights file `kiln compile` wrote with this model (0: not checked):
  // another model's weights file, or the same model's with other weights, is refused.
  std::uint64_t weights_checksum = 0;
};

class CompiledModel {
 public:
  // Throws std::runtime_error (graph::Error) naming the problem: a missing or corrupt file, a
  // CPU without any of the compiled targets' features.
  CompiledModel(const std::string& weights_path, const CompiledModelOptions& o) {
    std::uint64_t checksum = 0;
    graph::Graph g = graph::read_graph_file(weights_path, &checksum);
    if (o.weights_checksum != 0 && checksum != o.weights_checksum)
      throw graph::Error("'" + weights_path + "' is not the weights file this model was compiled "
                         "with (it holds another graph or other weights); use the .weights file "
                         "kiln compile wrote next to this model's library");
    ModelOptions mo;
    mo.backend = o.cuda ? Backend::cuda : Backend::cpu;
    mo.fallback_to_cpu = true;
    mo.threads = o.threads;
    mo.cpu_target = pick_cpu_target(o.cpu_targets);
    const auto cpu_table = o.kernel_table, cuda_table = o.cuda_kernel_table;
    mo.generate_kernels = [cpu_table, cuda_table](const std::vector<graph::KernelSpec>&,
                                                  const KernelRequest& request) {
      const auto table = request.backend == Backend::cpu ? cpu_table : cuda_table;
      if (!table || (request.backend != Backend::cpu && request.backend != Backend::cuda))
        throw graph::Error(std::string("this model was compiled without kernels for ") +
                           to_string(request.backend));
      std::size_t count = 0;
      const GeneratedKernel* k = table(&count);
      auto kernels = std::make_shared<GeneratedKernels>();
      kernels->kernels.assign(k, k + count);
      return std::shared_ptr<const GeneratedKernels>(std::move(kernels));
    };
    model_ = std::make_unique<Model>(std::move(g), mo);  // the Model's alone: see runtime.h
    logical_.resize(model_->num_outputs());
  }

  size_t num_inputs() const { return model_->num_inputs(); }
  std::string input_name(size_t i) const { return model_->input_info(i).name; }
  std::vector<int64_t> input_shape(size_t i) const { return model_->input_info(i).shape; }
  size_t num_outputs() const { return model_->num_outputs(); }
  std::string output_name(size_t i) const { return model_->output(i).name; }
  // Logical shape: NCHW for an image output the runtime keeps NHWC.
  std::vector<int64_t> output_shape(size_t i) const {
    const TensorView v = model_->output(i);
    const auto& s = v.shape;
    if (v.layout == graph::Layout::nhwc) return {s[0], s[3], s[1], s[2]};
    return s;
  }
  size_t output_size(size_t i) const {
    return static_cast<size_t>(graph::num_elements(model_->output(i).shape));
  }

  // One call at a time (kiln::Model::run): a concurrent call throws and changes nothing.
  void run(const std::vector<const float*>& inputs) {
    if (running_.exchange(true))
      throw std::runtime_error("run() was called while another thread's call on this model is "
                               "running; a model runs one call at a time (use one per thread)");
    struct Done {
      std::atomic<bool>& flag;
      ~Done() { flag = false; }
    } done{running_};
    const Status s = model_->run(inputs);
    if (!s) throw std::runtime_error(s.message());
    for (size_t i = 0; i < logical_.size(); ++i) to_logical(i);
  }
  // Valid after run(), until the next one: output_size(i) floats in output_shape(i) order.
  const float* output(size_t i) const {
    return model_->output(i).layout == graph::Layout::nhwc ? logical_.at(i).data()
                                                           : model_->output(i).data;
  }
  std::string backend() const { return to_string(model_->backend()); }
  const std::string& fallback_reason() const { return model_->fallback_reason(); }

 private:
  static int pick_cpu_target(const std::vector<int>& targets) {
    if (targets.empty()) return -1;
    std::string names;
    for (int t : targets) {
      if (t < 0 || t >= static_cast<int>(runtime::cpu_targets().size()))
        throw graph::Error("CPU target index " + std::to_string(t) + " is not in this build");
      if (runtime::cpu_target_supported(t)) return t;
      names += (names.empty() ? "" : ", ") + runtime::cpu_targets()[t];
    }
    throw graph::Error("this CPU supports none of the targets the model was compiled for: " + names);
  }

  // NHWC -> NCHW into logical_[i]; other layouts are already logical.
  void to_logical(size_t i) {
    const TensorView v = model_->output(i);
    if (v.layout != graph::Layout::nhwc) return;
    const int64_t n = v.shape[0], h = v.shape[1], w = v.shape[2], c = v.shape[3];
    std::vector<float>& dst = logical_[i];
    dst.resize(static_cast<size_t>(n * c * h * w));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          for (int64_t k = 0; k < c; ++k)
            dst[((b * c + k) * h + y) * w + x] = v.data[((b * h + y) * w + x) * c + k];
  }

  std::unique_ptr<Model> model_;
  std::vector<std::vector<float>> logical_;
  std::atomic<bool> running_{false};
};

}  // namespace kiln
