// Kernel listings for `kiln compile --emit stmt,assembly`: the kernel generator run again for
// the kernels a model uses, once per target, in parallel over the cores.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "compile_codegen.h"
#include "graph/kernel_spec.h"

namespace kiln::cli {

// Writes DIR/<kernel>-<target>.stmt (kind "stmt") or .s (kind "assembly") for every Halide
// kernel in `kernels` and every target in `targets`, printing "kernel i of n" as it goes: the
// prebuilt kernels the model uses by re-running the kernel generator, the kernels generated
// for its shapes as DIR/<prefix>_k<i>-<target>.* (the names of NAME.a's generated entry
// points). Returns the number of files written. Portable C++ kernels have no listing.
int emit_kernel_listings(const std::vector<graph::KernelSpec>& kernels, const Targets& targets,
                         const std::string& prefix, const std::string& kind,
                         const std::filesystem::path& dir);

}  // namespace kiln::cli
