// Kernel listings via the kernel generator (see compile_emit.h).
#include "compile_emit.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "kiln_compile_config.h"
#include "codegen/kernel_library.h"
#include "codegen/process.h"
#include "runtime/kernels.h"

namespace kiln::cli {
namespace {

namespace cfg = compile_config;
namespace fs = std::filesystem;

// The targets listings are written for: CUDA when requested, then the CPU targets.
std::vector<std::string> listing_targets(const Targets& targets) {
  std::vector<std::string> names;
  if (targets.cuda && cfg::kHaveCuda) names.push_back(cfg::kCudaTarget);
  if (targets.cpu.empty()) {
    names.insert(names.end(), runtime::cpu_targets().begin(), runtime::cpu_targets().end());
  } else {
    for (int t : targets.cpu) names.push_back(runtime::cpu_targets()[t]);
  }
  return names;
}

struct Job {
  std::string generator, function, target;
  std::vector<std::string> params;
};

// The generator invocations behind the model's kernels: one per (kernel variant, target).
std::vector<Job> jobs_for(const std::vector<graph::KernelSpec>& kernels, const Targets& targets) {
  std::set<std::vector<std::string>> variants;  // {generator, function, params...}
  for (const graph::KernelSpec& k : kernels) {
    if (graph::is_generated(k)) continue;  // listed by codegen
    if (const auto* c = std::get_if<graph::ConvKernelSpec>(&k)) {
      static const char* kEpilogue[] = {"none", "relu", "relu6"};
      const std::string e = kEpilogue[static_cast<int>(runtime::conv_epilogue(c->activation))];
      if (c->depthwise) {
        variants.insert({"kiln_fused_depthwise", "kiln_depthwise_" + e, "epilogue=" + e});
        continue;
      }
      const bool r = c->residual.has_value();
      const graph::Shape &out = c->output.shape, &w = c->weights.shape;  // NHWC, HWIO
      static const char* kSchedules[] = {"naive", "tuned", "tuned_deep", "tuned_1x1"};
      const bool padded = c->pad_top || c->pad_left || c->pad_bottom || c->pad_right;
      const std::string s = kSchedules[static_cast<int>(
          runtime::tuned_conv_schedule(out[1], out[2], w[2], w[0], w[1], padded))];
      variants.insert({"kiln_fused_conv", "kiln_conv_" + e + (r ? "_residual" : "") + "_" + s,
                       "epilogue=" + e, std::string("residual=") + (r ? "true" : "false"),
                       "schedule=" + s});
    } else if (std::holds_alternative<graph::LayoutKernelSpec>(k)) {
      variants.insert({"kiln_nchw_to_nhwc", "kiln_nchw_to_nhwc"});
    }
  }
  const std::vector<std::string> target_names = listing_targets(targets);
  std::vector<Job> jobs;
  for (const auto& v : variants)
    for (const std::string& t : target_names)
      jobs.push_back({v[0], v[1], t, std::vector<std::string>(v.begin() + 2, v.end())});
  return jobs;
}

}  // namespace

int emit_kernel_listings(const std::vector<graph::KernelSpec>& kernels, const Targets& targets,
                         const std::string& prefix, const std::string& kind, const fs::path& dir) {
  const std::vector<Job> jobs = jobs_for(kernels, targets);
  const std::string ext = kind == "assembly" ? ".s" : ".stmt";
  fs::create_directories(dir);
  std::atomic<size_t> next{0};
  std::mutex mutex;
  std::exception_ptr failure;
  size_t done = 0;
  auto worker = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      const Job& j = jobs[i];
      const fs::path scratch = dir / (".job" + std::to_string(i));
      try {
        fs::create_directories(scratch);
        std::vector<std::string> argv = {cfg::kGenerator, "-g", j.generator, "-f", j.function,
                                         "-e", kind, "-o", scratch.string(),
                                         "target=" + j.target + "-no_runtime"};
        argv.insert(argv.end(), j.params.begin(), j.params.end());
        codegen::run_tool(argv, "generating the " + kind + " of " + j.function + " for " + j.target);
        fs::rename(scratch / (j.function + ext), dir / (j.function + "-" + j.target + ext));
        fs::remove_all(scratch);
        std::lock_guard<std::mutex> lock(mutex);
        std::cout << "      " << kind << ": kernel " << ++done << " of " << jobs.size() << ", "
                  << j.function << " for " << j.target << "\n";
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        next = jobs.size();  // stop handing out work
      }
    }
  };
  const size_t n = std::max<size_t>(1, std::min<size_t>(jobs.size(), std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t i = 0; i < n; ++i) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  std::vector<graph::KernelSpec> generated;
  for (const graph::KernelSpec& k : kernels)
    if (graph::is_generated(k)) generated.push_back(k);
  const int generated_files = codegen::write_kernel_listings(
      generated, listing_targets(targets), prefix, kind, dir,
      [&](size_t i, size_t n, const std::string& name) {
        std::cout << "      " << kind << ": generated kernel " << i + 1 << " of " << n << ", " << name
                  << "\n";
      });
  const size_t portable = std::count_if(kernels.begin(), kernels.end(), [](const graph::KernelSpec& k) {
    return std::holds_alternative<graph::OpKernelSpec>(k) && !graph::is_generated(k);
  });
  if (portable > 0)
    std::cout << "      note: " << portable << " kernels are portable C++ (runtime/ops) and have no " << kind
              << " listing here\n";
  return static_cast<int>(jobs.size()) + generated_files;
}

}  // namespace kiln::cli
