// The .npy reader and writer. The header is a Python dict literal; it is parsed with a tiny
// recursive-descent reader that accepts exactly what numpy writes (and what literal_eval would
// accept for the three keys), so a hand-edited or foreign header fails loudly, not silently.
#include "npy.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "graph/bf16.h"
#include "graph/file_io.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the .npy code copies '<f4', '<f2' and '<f8' bytes as host values");

namespace kiln::cli {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

// One parsed header value: a string, a bool, or a tuple of non-negative integers.
struct HeaderValue {
  enum Kind { string, boolean, tuple } kind = string;
  std::string s;
  bool b = false;
  graph::Shape dims;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& what) : t_(text), what_(what) {}

  std::map<std::string, HeaderValue> dict() {
    std::map<std::string, HeaderValue> out;
    expect('{');
    while (!peek('}')) {
      const std::string key = quoted();
      expect(':');
      if (!out.emplace(key, value()).second) fail("key '" + key + "' appears twice");
      if (!peek('}')) expect(',');
    }
    expect('}');
    skip_space();
    if (pos_ != t_.size()) fail("unexpected text after the header dict");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw graph::Error(what_ + ": malformed .npy header (" + why + ")");
  }
  void skip_space() {
    while (pos_ < t_.size() && (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n')) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < t_.size() && t_[pos_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string quoted() {
    skip_space();
    if (pos_ >= t_.size() || (t_[pos_] != '\'' && t_[pos_] != '"'))
      fail("expected a quoted string");
    const char q = t_[pos_++];
    const size_t end = t_.find(q, pos_);
    if (end == std::string::npos) fail("unterminated string");
    std::string s = t_.substr(pos_, end - pos_);
    if (s.find('\\') != std::string::npos) fail("escapes in strings are not supported");
    pos_ = end + 1;
    return s;
  }
  int64_t integer() {
    skip_space();
    int64_t v = 0;
    const size_t start = pos_;
    while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') {
      if (v > (INT64_MAX - 9) / 10) fail("dimension too large");
      v = v * 10 + (t_[pos_++] - '0');
    }
    if (pos_ == start) fail("expected a non-negative integer dimension");
    return v;
  }
  HeaderValue value() {
    HeaderValue v;
    skip_space();
    if (t_.compare(pos_, 4, "True") == 0 || t_.compare(pos_, 5, "False") == 0) {
      v.kind = HeaderValue::boolean;
      v.b = t_[pos_] == 'T';
      pos_ += v.b ? 4 : 5;
    } else if (peek('(')) {
      v.kind = HeaderValue::tuple;
      ++pos_;
      bool comma_after_last = false;
      while (!peek(')')) {
        v.dims.push_back(integer());
        comma_after_last = peek(',');
        if (comma_after_last)
          ++pos_;
        else if (!peek(')'))
          fail("expected ',' or ')' in the shape");
      }
      ++pos_;
      // (3) is the integer 3 in Python, not a shape.
      if (v.dims.size() == 1 && !comma_after_last)
        fail("a one-element shape needs a trailing comma");
    } else {
      v.s = quoted();
    }
    return v;
  }

  const std::string& t_;
  const std::string& what_;
  size_t pos_ = 0;
};

uint32_t read_le(const std::string& b, size_t at, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(b[at + i]);
  return v;
}

std::string shape_text(const graph::Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// The bytes of one element of each dtype Kiln reads, 0 for any other.
int element_bytes(const std::string& descr) {
  return descr == "<f4" ? 4 : descr == "<f2" ? 2 : descr == "<f8" ? 8 : 0;
}

struct Header {
  graph::Shape shape;
  std::string descr;
  size_t data_offset = 0;
};

// Checks the three keys.
Header check_header(const std::map<std::string, HeaderValue>& h, const std::string& what) {
  auto get = [&](const char* key, HeaderValue::Kind kind) -> const HeaderValue& {
    auto it = h.find(key);
    if (it == h.end()) throw graph::Error(what + ": .npy header has no '" + key + "' entry");
    if (it->second.kind != kind)
      throw graph::Error(what + ": .npy header entry '" + key + "' has the wrong type");
    return it->second;
  };
  if (h.size() != 3)
    throw graph::Error(what + ": .npy header must have exactly descr, fortran_order and shape");
  const std::string& descr = get("descr", HeaderValue::string).s;
  if (!element_bytes(descr))
    throw graph::Error(what + ": dtype '" + descr +
                       "' is not supported; Kiln reads little-endian float32, float16 and float64 "
                       "('<f4', '<f2', '<f8')");
  if (get("fortran_order", HeaderValue::boolean).b)
    throw graph::Error(what +
                       ": Fortran-order arrays are not supported; save a C-order array "
                       "(numpy.ascontiguousarray)");
  return {get("shape", HeaderValue::tuple).dims, descr, 0};
}

// numpy itself reads headers up to 10,000 bytes by default; no real header comes near this.
constexpr size_t kMaxHeaderBytes = 64 << 10;

// The header at the start of `bytes`, which must hold all of it.
Header parse_header(const std::string& bytes, const std::string& what) {
  if (bytes.size() < kMagicLen + 2 || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    throw graph::Error(what + ": not an .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]),
            minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2) || minor != 0)
    throw graph::Error(what + ": .npy format version " + std::to_string(major) + "." +
                       std::to_string(minor) + " is not supported (Kiln reads 1.0 and 2.0)");
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t header_at = 8 + len_bytes;
  if (bytes.size() < header_at) throw graph::Error(what + ": truncated .npy header");
  const size_t header_len = read_le(bytes, 8, static_cast<int>(len_bytes));
  if (header_len > kMaxHeaderBytes)
    throw graph::Error(what + ": the .npy header is " + std::to_string(header_len) +
                       " bytes; Kiln reads headers up to " + std::to_string(kMaxHeaderBytes));
  if (bytes.size() < header_at + header_len) throw graph::Error(what + ": truncated .npy header");
  const std::string header = bytes.substr(header_at, header_len);
  Header h = check_header(HeaderParser(header, what).dict(), what);
  h.data_offset = header_at + header_len;
  return h;
}

// The element count of `shape`, after checking that the `have` bytes after the header hold
// exactly its data, `bytes` per element.
uint64_t check_data_size(const graph::Shape& shape, int bytes, uint64_t have,
                         const std::string& what) {
  uint64_t count = 1;
  bool too_big = false;  // more elements than 64 bits count: surely more than the file holds
  for (int64_t d : shape)
    too_big |= __builtin_mul_overflow(count, static_cast<uint64_t>(d), &count);
  for (int64_t d : shape) too_big &= d != 0;
  if (too_big || count > have / bytes)
    throw graph::Error(what + ": truncated: shape " + shape_text(shape) +
                       " needs more data than the " + std::to_string(have) +
                       " bytes after the header");
  if (count * bytes != have)
    throw graph::Error(what + ": " + std::to_string(have - count * bytes) +
                       " bytes after the data of shape " + shape_text(shape) +
                       "; the header does not describe the file");
  return count;
}

// `out.size()` elements of dtype `descr` from `raw` into floats: float32 copied, float16 widened
// exactly, float64 rounded to the nearest float (past the float range, to infinity).
void convert(const char* raw, const std::string& descr, std::vector<float>& out) {
  const size_t n = out.size();
  if (descr == "<f4") {
    if (n) std::memcpy(out.data(), raw, n * 4);
  } else if (descr == "<f2") {
    for (size_t i = 0; i < n; ++i) {
      uint16_t bits;
      std::memcpy(&bits, raw + 2 * i, 2);
      out[i] = graph::from_half_bits(bits);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, raw + 8 * i, 8);
      out[i] = static_cast<float>(v);
    }
  }
}

}  // namespace

NpyArray parse_npy(const std::string& bytes, const std::string& what) {
  const Header h = parse_header(bytes, what);
  const uint64_t count =
      check_data_size(h.shape, element_bytes(h.descr), bytes.size() - h.data_offset, what);
  NpyArray a{h.shape, std::vector<float>(count), h.descr};
  convert(bytes.data() + h.data_offset, h.descr, a.data);
  return a;
}

NpyFile open_npy(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw graph::Error("no such file: " + path);
  if (std::filesystem::is_directory(path, ec))
    throw graph::Error(path + " is a directory, not an .npy file");
  const int64_t size = graph::regular_file_size(path, ".npy file");
  std::ifstream f(path, std::ios::binary);
  std::string prefix(std::min<uint64_t>(size, kMagicLen + 6 + kMaxHeaderBytes), '\0');
  if (!f || !f.read(prefix.data(), static_cast<std::streamsize>(prefix.size())))
    throw graph::Error("cannot read '" + path + "'");
  const Header h = parse_header(prefix, path);
  check_data_size(h.shape, element_bytes(h.descr), static_cast<uint64_t>(size) - h.data_offset,
                  path);
  return {path, h.shape, h.descr, static_cast<int64_t>(h.data_offset)};
}

std::vector<float> read_npy_data(const NpyFile& file) {
  std::vector<float> data(static_cast<size_t>(graph::num_elements(file.shape)));
  const size_t bytes = data.size() * element_bytes(file.dtype);
  // float32 straight into the result; the other dtypes through a buffer of their own bytes
  std::string raw(file.dtype == "<f4" ? 0 : bytes, '\0');
  char* to = file.dtype == "<f4" ? reinterpret_cast<char*>(data.data()) : raw.data();
  std::ifstream f(file.path, std::ios::binary);
  if (!f || !f.seekg(file.data_offset) || !f.read(to, static_cast<std::streamsize>(bytes)) ||
      f.peek() != std::char_traits<char>::eof())
    throw graph::Error("cannot read '" + file.path + "': it changed since its header was read");
  if (file.dtype != "<f4") convert(raw.data(), file.dtype, data);
  return data;
}

NpyArray read_npy(const std::string& path) {
  NpyFile file = open_npy(path);
  std::vector<float> data = read_npy_data(file);
  return {std::move(file.shape), std::move(data), std::move(file.dtype)};
}

namespace {

// Magic, version 1.0, header length and the header dict, padded as numpy pads it.
std::string npy_header(const graph::Shape& shape) {
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // numpy pads the header with spaces to a multiple of 64 bytes, then a newline.
  const size_t total = kMagicLen + 4 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicLen);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header;
}

}  // namespace

std::string encode_npy(const graph::Shape& shape, const float* data) {
  const size_t n = static_cast<size_t>(graph::num_elements(shape));
  return npy_header(shape).append(reinterpret_cast<const char*>(data), n * 4);
}

void write_npy(const std::string& path, const graph::Shape& shape, const float* data) {
  const std::string header = npy_header(shape);
  const size_t n = static_cast<size_t>(graph::num_elements(shape));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw graph::Error("cannot create '" + path + "'");
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * 4));
  f.close();
  if (!f) throw graph::Error("cannot write '" + path + "' (disk full?)");
}

}  // namespace kiln::cli
