// Kernel listings of a compiled model's generated kernels (see compile_emit.h).
#include "compile_emit.h"

#include <algorithm>
#include <iostream>

#include "codegen/kernel_library.h"
#include "kiln_compile_config.h"
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

}  // namespace

int emit_kernel_listings(const std::vector<graph::KernelSpec>& kernels, const Targets& targets,
                         const std::string& prefix, const std::string& kind, const fs::path& dir,
                         const codegen::ScheduleLookup& schedules) {
  fs::create_directories(dir);
  return codegen::write_kernel_listings(
      kernels, listing_targets(targets), prefix, kind, dir,
      [&](size_t i, size_t n, const std::string& name, bool) {
        std::cout << "      " << kind << ": generated kernel " << i + 1 << " of " << n << ", " << name
                  << "\n";
      },
      schedules);
}

}  // namespace kiln::cli
