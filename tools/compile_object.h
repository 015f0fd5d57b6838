// `kiln compile`'s compile of the model's C++ source (NAME.cpp) into NAME.o, with the object
// kept in the compile cache, and the depfile of NAME.a.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kiln::cli {

// Writes `content` to `path`; graph::Error naming the file when it cannot.
void write_file(const std::filesystem::path& path, const std::string& content);

// Compiles `staging`/NAME.cpp (whose text is `source`) into `staging`/NAME.o with the compiler
// command `cxx` (compiler and flags; the file arguments are added here), writing its depfile to
// `staging`/deps.d. The object and the depfile come from `cache_dir`'s "objects" cache where the
// command, the source and the headers they were compiled from are unchanged. Prints
// "      NAME.cpp" or "      NAME.cpp (cached)".
void compile_model_source(std::vector<std::string> cxx, const std::filesystem::path& staging,
                          const std::string& name, const std::string& source,
                          const std::string& cache_dir);

// The compiler's depfile `compiler_deps` rewritten for `target` (NAME.a), the staging
// directory's own files left out.
std::string depfile_for(const std::filesystem::path& compiler_deps,
                        const std::filesystem::path& staging, const std::filesystem::path& target);

}  // namespace kiln::cli
