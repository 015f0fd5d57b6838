// Running the external tools the compiler needs (the C++ compiler and linker, ar, the kernel
// generator).
#pragma once

#include <string>
#include <vector>

namespace kiln::codegen {

// Runs argv[0] (found on PATH) with stdin from `stdin_path` if given; Error unless it exits 0.
void run_tool(const std::vector<std::string>& argv, const std::string& what,
              const std::string& stdin_path = "");

}  // namespace kiln::codegen
