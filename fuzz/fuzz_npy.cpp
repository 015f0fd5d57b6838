// Fuzz target: the .npy reader of `kiln run`, both ways it is used: parse_npy on bytes, and
// open_npy (header only, checked against the file's size) then read_npy_data on a file.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "fuzz/fuzz_input.h"
#include "graph/ir.h"
#include "tools/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  if (size > fuzz::kMaxInputBytes) return 0;
  bool parsed = false;
  try {
    const cli::NpyArray a = cli::parse_npy(std::string(reinterpret_cast<const char*>(data), size), "input");
    if (static_cast<int64_t>(a.data.size()) != graph::num_elements(a.shape))
      throw std::logic_error("fuzz_npy: data size disagrees with the shape");
    // What parses must encode back to a file that parses to the same array.
    const std::string again = cli::encode_npy(a.shape, a.data.data());
    const cli::NpyArray b = cli::parse_npy(again, "re-encoded input");
    if (b.shape != a.shape || b.data.size() != a.data.size() ||
        (!a.data.empty() && std::memcmp(b.data.data(), a.data.data(), a.data.size() * 4) != 0))
      throw std::logic_error("fuzz_npy: encode_npy(parse_npy(x)) does not parse back to x");
    parsed = true;
  } catch (const graph::Error&) {
  }
  try {
    const cli::NpyFile f = cli::open_npy(fuzz::as_file(data, size));
    const std::vector<float> values = cli::read_npy_data(f);
    if (!parsed) throw std::logic_error("fuzz_npy: a file read that parse_npy refused");
    if (static_cast<int64_t>(values.size()) != graph::num_elements(f.shape))
      throw std::logic_error("fuzz_npy: read_npy_data gave the wrong number of values");
  } catch (const graph::Error&) {
    if (parsed) throw std::logic_error("fuzz_npy: a file refused that parse_npy read");
  }
  return 0;
}
