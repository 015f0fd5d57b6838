// A small, strict .npy reader and writer for float tensors: `kiln run` reads float32, float16
// and float64 files as float32 and writes float32.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::cli {

struct NpyArray {
  graph::Shape shape;  // () for a scalar
  std::vector<float> data;
  std::string dtype;  // the file's: "<f4", "<f2" or "<f8"
};

// An .npy file whose header has been read and checked against the file's size, its data not
// yet read: callers check the shape before they allocate for the data.
struct NpyFile {
  std::string path;
  graph::Shape shape;
  std::string dtype;        // "<f4", "<f2" or "<f8"
  int64_t data_offset = 0;  // the data runs from here to the end of the file
};

// Reads format version 1.0 or 2.0, little-endian float32, float16 or float64 ('<f4', '<f2',
// '<f8'), C order. Anything else (a path that is not a regular file, other dtypes, big-endian,
// Fortran order, a malformed or oversized header, a file shorter or longer than the header says)
// throws graph::Error with one line that names the file and the problem. Nothing but the header
// is read.
NpyFile open_npy(const std::string& path);
// The data of a checked file as float32: float32 read straight into the result, float16
// widened exactly, float64 rounded to the nearest float (past the float range, to infinity).
std::vector<float> read_npy_data(const NpyFile& file);
// Both.
NpyArray read_npy(const std::string& path);

// Parses the bytes of an .npy file; `what` names it in error messages.
NpyArray parse_npy(const std::string& bytes, const std::string& what);

// Version 1.0, '<f4', C order, written from `data` as it is (no copy). Throws graph::Error if
// the file cannot be written.
void write_npy(const std::string& path, const graph::Shape& shape, const float* data);

// The file contents write_npy would produce.
std::string encode_npy(const graph::Shape& shape, const float* data);

}  // namespace kiln::cli
