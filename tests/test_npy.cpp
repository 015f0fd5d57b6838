// The .npy reader and writer of `kiln run` (tools/npy.h), in process: round trips, version 2
// headers, and each malformed file is one error naming the file and the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "npy.h"

namespace {

using kiln::cli::NpyArray;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string npy_with_header(const std::string& dict, int major, const std::string& data) {
  std::string h = dict + "\n";
  std::string out = std::string("\x93NUMPY", 6) + char(major) + '\0';
  const uint32_t n = static_cast<uint32_t>(h.size());
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out += char(n >> (8 * i));
  return out + h + data;
}

void expect_npy_error(const std::string& bytes, const std::string& what) {
  try {
    kiln::cli::parse_npy(bytes, "t.npy");
    ADD_FAILURE() << "accepted; expected: " << what;
  } catch (const kiln::graph::Error& e) {
    EXPECT_TRUE(contains(e.what(), "t.npy")) << e.what();
    EXPECT_TRUE(contains(e.what(), what)) << e.what();
  }
}

TEST(NpyReader, RoundTripsAndReadsVersion2) {
  const std::vector<float> v = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -1e-3f};
  const NpyArray a = kiln::cli::parse_npy(kiln::cli::encode_npy({2, 3}, v.data()), "t.npy");
  EXPECT_EQ(a.shape, (kiln::graph::Shape{2, 3}));
  EXPECT_EQ(a.data, v);
  EXPECT_EQ(kiln::cli::encode_npy({2, 3}, v.data()).size() % 64,
            (6 * 4) % 64);  // header padded to 64
  std::string data(reinterpret_cast<const char*>(v.data()), 12);
  const NpyArray b = kiln::cli::parse_npy(
      npy_with_header("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3,)}", 2, data),
      "t.npy");
  EXPECT_EQ(b.shape, (kiln::graph::Shape{3}));
}

// float16 and float64 files are read as float32: float16 exactly (bit patterns from the IEEE
// 754 binary16 table), float64 rounded to the nearest float, past the float range to infinity.
TEST(NpyReader, ReadsFloat16AndFloat64AsFloat32) {
  const uint16_t half[] = {0x3c00, 0xc000, 0x3555, 0x0001, 0x7bff, 0xfc00};
  const NpyArray h = kiln::cli::parse_npy(
      npy_with_header("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }", 1,
                      std::string(reinterpret_cast<const char*>(half), sizeof half)),
      "t.npy");
  EXPECT_EQ(h.shape, (kiln::graph::Shape{2, 3}));
  EXPECT_EQ(h.dtype, "<f2");
  EXPECT_EQ(h.data, (std::vector<float>{1.0f, -2.0f, 0.333251953125f, std::ldexp(1.0f, -24),
                                        65504.0f, -INFINITY}));

  const double wide[] = {0.1, -1.0 / 3.0, 1e300, 3.0, 1e-50};
  const NpyArray d = kiln::cli::parse_npy(
      npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }", 1,
                      std::string(reinterpret_cast<const char*>(wide), sizeof wide)),
      "t.npy");
  EXPECT_EQ(d.dtype, "<f8");
  EXPECT_EQ(d.data, (std::vector<float>{0.1f, -1.0f / 3.0f, INFINITY, 3.0f, 0.0f}));

  // A file whose size is right for float32 but not for its declared float16 is refused.
  expect_npy_error(npy_with_header("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", 1,
                                   std::string(16, '\0')),
                   "8 bytes after the data");
}

TEST(NpyReader, RejectsWhatItCannotRead) {
  const std::string four(16, '\0');
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }";
  expect_npy_error("PK\x03\x04 not numpy", "not an .npy file");
  expect_npy_error(npy_with_header(ok, 3, four), "version 3.0");
  expect_npy_error(
      npy_with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", 1, four),
      "'>f4'");
  expect_npy_error(
      npy_with_header("{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", 1, four),
      "'<i4'");
  expect_npy_error(
      npy_with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 1, four),
      "Fortran");
  expect_npy_error(npy_with_header(ok, 1, four.substr(0, 12)), "truncated");
  expect_npy_error(npy_with_header(ok, 1, four + "xxxx"), "4 bytes after the data");
  expect_npy_error(
      npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", 1, four),
      "trailing comma");
  expect_npy_error(npy_with_header("{'descr': '<f4', 'shape': (4,), }", 1, four),
                   "descr, fortran_order and shape");
  expect_npy_error(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                   "(99999999999, 99999999999, 99999999999), }",
                                   1, four),
                   "truncated");
  expect_npy_error(npy_with_header(ok, 1, four).substr(0, 20), "truncated .npy header");
}

}  // namespace
