// Kernel listings for `kiln compile --emit stmt,assembly`: what Halide made of each kernel
// generated for the model, once per target.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "codegen/kernel_library.h"
#include "compile_codegen.h"
#include "graph/kernel_spec.h"

namespace kiln::cli {

// Writes DIR/<prefix>_k<i>-<target>.stmt (kind "stmt") or .s (kind "assembly") for every
// distinct generated kernel in `kernels` (named after NAME.a's entry points) and every target in
// `targets`, printing "generated kernel i of n" as it goes. Returns the number of files
// written. Portable C++ kernels have no listing.
int emit_kernel_listings(const std::vector<graph::KernelSpec>& kernels, const Targets& targets,
                         const std::string& prefix, const std::string& kind,
                         const std::filesystem::path& dir,
                         const codegen::ScheduleLookup& schedules = nullptr);

}  // namespace kiln::cli
