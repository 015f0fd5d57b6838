// Writing a file so that no reader ever sees half of it: a temporary file next to it (named
// per process), renamed into place. Used for every file Kiln writes that others read back.
#pragma once

#include <string>

namespace kiln::graph {

// Throws Error("cannot write '<path>': <reason>"); leaves no temporary file behind.
void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace kiln::graph
