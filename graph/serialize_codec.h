// The byte codec of Kiln's graph files (graph/serialize.cpp): a Writer and a Reader with the
// same calls, little-endian, so the attribute lists shared by both read what they wrote. The
// Reader checks every byte count before it reads and names the byte where a file is corrupt.
// Internal to the graph library.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "graph/bf16.h"
#include "graph/ir.h"
#include "graph/serialize.h"

namespace kiln::graph::serial {

// Float data is copied as is: Kiln targets x86-64 (and its runtime assumes it anyway).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "graph files assume a little-endian host");

class Writer {
 public:
  uint32_t version = kGraphFormatVersion;
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i32(int& v) { le(static_cast<uint32_t>(v), 4); }
  void i64(int64_t& v) { le(static_cast<uint64_t>(v), 8); }
  void f32(float& v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    le(bits, 4);
  }
  void flag(bool& v) { u8(v ? 1 : 0); }
  template <typename E>
  void enum8(E& e, int /*count*/) { u8(static_cast<uint8_t>(e)); }
  void str(const std::string& s) {
    KILN_CHECK(s.size() <= UINT32_MAX, "string too long to serialize");
    u32(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  void i32s(std::vector<int>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (int& x : v) i32(x);
  }
  void i64s(std::vector<int64_t>& v, int64_t /*lo*/, int64_t /*hi*/) {
    u32(static_cast<uint32_t>(v.size()));
    for (int64_t& x : v) i64(x);
  }
  void floats(const std::vector<float>& v) {
    u64(v.size());
    const size_t at = out_.size();
    out_.resize(at + v.size() * 4);
    if (!v.empty()) std::memcpy(&out_[at], v.data(), v.size() * 4);  // little-endian host
  }
  // Each float rounded to the nearest bfloat16 (graph::to_bf16_bits), two bytes each.
  void bf16s(const std::vector<float>& v) {
    u64(v.size());
    out_.reserve(out_.size() + v.size() * 2);
    for (float f : v) le(to_bf16_bits(f), 2);
  }
  std::string& bytes() { return out_; }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

class Reader {
 public:
  uint32_t version = kGraphFormatVersion;  // of the file being read
  // `consumed`, when set, is told each large byte range the reader is done with (constant data).
  Reader(const char* p, size_t end, const std::function<void(size_t, size_t)>& consumed)
      : p_(p), end_(end), consumed_(consumed) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("corrupt graph file: " + what + " (at byte " + std::to_string(pos_) + ")");
  }
  void need(uint64_t n, const char* what) const {
    if (n > end_ - pos_) fail(std::string("truncated ") + what);
  }
  size_t pos() const { return pos_; }
  size_t left() const { return end_ - pos_; }

  uint8_t u8() { return static_cast<uint8_t>(le(1, "byte")); }
  uint32_t u32() { return static_cast<uint32_t>(le(4, "integer")); }
  uint64_t u64() { return le(8, "integer"); }
  void i32(int& v) { v = static_cast<int32_t>(u32()); }
  void i64(int64_t& v) { v = static_cast<int64_t>(u64()); }
  void f32(float& v) {
    const uint32_t bits = u32();
    std::memcpy(&v, &bits, 4);
  }
  void flag(bool& v) {
    const uint8_t b = u8();
    if (b > 1) fail("boolean is " + std::to_string(b));
    v = b == 1;
  }
  template <typename E>
  void enum8(E& e, int count) {
    const uint8_t b = u8();
    if (b >= count) fail("enum value " + std::to_string(b) + " out of range");
    e = static_cast<E>(b);
  }
  // A count of items that each take at least `min_bytes`: checked against the bytes left
  // before anything is allocated.
  uint32_t count(size_t min_bytes, const char* what) {
    const uint32_t n = u32();
    if (uint64_t{n} * min_bytes > left()) fail(std::string("count of ") + what + " exceeds the file");
    return n;
  }
  void str(std::string& s) {
    const uint32_t n = u32();
    need(n, "string");
    s.assign(p_ + pos_, n);
    pos_ += n;
  }
  void i32s(std::vector<int>& v) {
    v.resize(count(4, "integers"));
    for (int& x : v) i32(x);
  }
  void i64s(std::vector<int64_t>& v, int64_t lo, int64_t hi) {
    v.resize(count(8, "integers"));
    for (int64_t& x : v) {
      i64(x);
      if (x < lo || x > hi) fail("integer " + std::to_string(x) + " out of range");
    }
  }
  void floats(std::vector<float>& v, uint64_t expected) {
    const uint64_t n = u64();
    if (n != expected) fail("constant holds " + std::to_string(n) + " floats, its shape needs " + std::to_string(expected));
    need(n * 4, "constant data");  // n <= kMaxElements, so no overflow
    v.resize(n);
    if (n) std::memcpy(v.data(), p_ + pos_, n * 4);  // little-endian host
    if (consumed_) consumed_(pos_, pos_ + n * 4);
    pos_ += n * 4;
  }
  // bf16s()'s form, widened back to float32 (exactly).
  void bf16s(std::vector<float>& v, uint64_t expected) {
    const uint64_t n = u64();
    if (n != expected) fail("constant holds " + std::to_string(n) + " bfloat16s, its shape needs " + std::to_string(expected));
    need(n * 2, "constant data");
    v.resize(n);
    const auto* b = reinterpret_cast<const unsigned char*>(p_ + pos_);
    for (uint64_t i = 0; i < n; ++i)
      v[i] = from_bf16_bits(static_cast<uint16_t>(b[2 * i] | (b[2 * i + 1] << 8)));
    if (consumed_) consumed_(pos_, pos_ + n * 2);
    pos_ += n * 2;
  }

 private:
  uint64_t le(int n, const char* what) {
    need(n, what);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(p_[pos_ + i])} << (8 * i);
    pos_ += n;
    return v;
  }
  const char* p_;
  size_t end_;
  size_t pos_ = 0;
  std::function<void(size_t, size_t)> consumed_;
};

}  // namespace kiln::graph::serial
