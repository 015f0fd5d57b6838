// A small, strict .npy reader and writer for float32 tensors (what `kiln run` reads and writes).
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::cli {

struct NpyArray {
  graph::Shape shape;  // () for a scalar
  std::vector<float> data;
};

// Reads format version 1.0 or 2.0, little-endian float32 ('<f4'), C order. Anything else (other
// dtypes, big-endian, Fortran order, a malformed header, truncated or trailing data) throws
// graph::Error with one line that names the file and the problem.
NpyArray read_npy(const std::string& path);

// Parses the bytes of an .npy file; `what` names it in error messages.
NpyArray parse_npy(const std::string& bytes, const std::string& what);

// Version 1.0, '<f4', C order. Throws graph::Error if the file cannot be written.
void write_npy(const std::string& path, const graph::Shape& shape, const float* data);

// The file contents write_npy would produce.
std::string encode_npy(const graph::Shape& shape, const float* data);

}  // namespace kiln::cli
