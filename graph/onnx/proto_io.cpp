// File access and TensorProto decoding for the ONNX importer: every size a file claims is
// checked against the bytes it actually holds before anything is allocated.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "graph/bf16.h"
#include "graph/file_io.h"
#include "graph/onnx/importer.h"

namespace kiln::graph::onnx {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "ONNX raw_data is little-endian; decoding copies it as is");

using TP = ::onnx::TensorProto;

// Bytes per element in raw_data, 0 for dtypes Kiln does not load.
size_t element_bytes(int32_t dtype) {
  switch (dtype) {
    case TP::FLOAT:
    case TP::INT32:
      return 4;
    case TP::DOUBLE:
    case TP::INT64:
      return 8;
    case TP::INT16:
    case TP::UINT16:
    case TP::FLOAT16:
    case TP::BFLOAT16:
      return 2;
    case TP::INT8:
    case TP::UINT8:
    case TP::BOOL:
      return 1;
    default:
      return 0;
  }
}

// Values in the typed field that matches dtype, and in all the other typed fields.
std::pair<int64_t, int64_t> typed_counts(const TP& t) {
  const int64_t counts[] = {t.float_data_size(), t.double_data_size(), t.int64_data_size(),
                            t.int32_data_size(), t.uint64_data_size(), t.string_data_size()};
  int match = 3;  // int32_data holds INT32, INT16, INT8, UINT16, UINT8, BOOL (and FLOAT16)
  if (t.data_type() == TP::FLOAT) match = 0;
  if (t.data_type() == TP::DOUBLE) match = 1;
  if (t.data_type() == TP::INT64) match = 2;
  int64_t others = 0;
  for (int k = 0; k < 6; ++k)
    if (k != match) others += counts[k];
  return {counts[match], others};
}

const char* typed_field_name(int32_t dtype) {
  if (dtype == TP::FLOAT) return "float_data";
  if (dtype == TP::DOUBLE) return "double_data";
  if (dtype == TP::INT64) return "int64_data";
  return "int32_data";
}

template <typename T>
T read_raw(const std::string& raw, size_t index) {
  T v;
  std::memcpy(&v, raw.data() + index * sizeof(T), sizeof(T));
  return v;
}

void decode_raw(const TP& t, int64_t n, HostTensor& h) {
  const std::string& raw = t.raw_data();
  if (h.is_float())
    h.f.resize(n);
  else
    h.i.resize(n);
  for (int64_t k = 0; k < n; ++k) {
    switch (h.dtype) {
      case TP::FLOAT:
        h.f[k] = read_raw<float>(raw, k);
        break;
      case TP::DOUBLE:
        h.f[k] = static_cast<float>(read_raw<double>(raw, k));
        break;
      case TP::INT64:
        h.i[k] = read_raw<int64_t>(raw, k);
        break;
      case TP::INT32:
        h.i[k] = read_raw<int32_t>(raw, k);
        break;
      case TP::FLOAT16:
        h.f[k] = from_half_bits(read_raw<uint16_t>(raw, k));
        break;
      case TP::BFLOAT16:
        h.f[k] = from_bf16_bits(read_raw<uint16_t>(raw, k));
        break;
      case TP::INT16:
        h.i[k] = read_raw<int16_t>(raw, k);
        break;
      case TP::UINT16:
        h.i[k] = read_raw<uint16_t>(raw, k);
        break;
      case TP::INT8:
        h.i[k] = read_raw<int8_t>(raw, k);
        break;
      case TP::UINT8:
        h.i[k] = read_raw<uint8_t>(raw, k);
        break;
      default:
        h.i[k] = read_raw<uint8_t>(raw, k) != 0;
        break;  // BOOL
    }
  }
}

void decode_typed(const TP& t, int64_t n, HostTensor& h) {
  if (h.dtype == TP::FLOAT)
    h.f.assign(t.float_data().begin(), t.float_data().end());
  else if (h.dtype == TP::DOUBLE)
    h.f.assign(t.double_data().begin(), t.double_data().end());
  else if (h.dtype == TP::INT64)
    h.i.assign(t.int64_data().begin(), t.int64_data().end());
  else if (h.dtype == TP::FLOAT16 || h.dtype == TP::BFLOAT16)  // the bits, one per int32
    for (int32_t bits : t.int32_data()) {
      const auto b = static_cast<uint16_t>(bits);
      h.f.push_back(h.dtype == TP::FLOAT16 ? from_half_bits(b) : from_bf16_bits(b));
    }
  else
    h.i.assign(t.int32_data().begin(), t.int32_data().end());
  if (h.dtype == TP::BOOL)
    for (int64_t& v : h.i) v = v != 0;
  (void)n;
}

}  // namespace

std::string dtype_name(int32_t onnx_dtype) {
  if (TP::DataType_IsValid(onnx_dtype)) return TP::DataType_Name(onnx_dtype);
  return "dtype " + std::to_string(onnx_dtype);
}

bool is_float_dtype(int32_t onnx_dtype) {
  return onnx_dtype == TP::FLOAT || onnx_dtype == TP::DOUBLE || onnx_dtype == TP::FLOAT16 ||
         onnx_dtype == TP::BFLOAT16;
}

bool is_graph_float_dtype(int32_t onnx_dtype) {
  return onnx_dtype == TP::FLOAT || onnx_dtype == TP::FLOAT16 || onnx_dtype == TP::BFLOAT16;
}

float round_to_dtype(float v, int32_t onnx_dtype) {
  if ((onnx_dtype != TP::FLOAT16 && onnx_dtype != TP::BFLOAT16) || !std::isfinite(v) || v == 0)
    return v;
  const bool half = onnx_dtype == TP::FLOAT16;
  const float a = std::fabs(v);
  if (half && a >= 65520.0f) return std::copysign(INFINITY, v);  // past 65504's half step
  int e = 0;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  // The spacing of the type's values near a: 11 significant bits (float16; 2^-24 below its
  // normals), 8 (bfloat16, float32's exponent range).
  const int quantum = half ? std::max(e - 11, -24) : e - 8;
  const float r = std::ldexp(std::nearbyint(std::ldexp(a, -quantum)), quantum);  // ties to even
  return std::copysign(r, v);
}

std::string read_file(const std::string& path, const char* what) {
  const int64_t size = regular_file_size(path, what);
  if (size > kMaxFileBytes)
    throw Error(std::string(what) + " '" + path + "' is " + std::to_string(size) +
                " bytes; Kiln refuses files over 2 GiB (protobuf's own limit)");
  return read_whole_file(path, what);
}

int64_t checked_elements(const Shape& dims, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) throw Error(what + " has a negative dimension in " + to_string(dims));
    if (__builtin_mul_overflow(n, d, &n))
      throw Error(what + " has dimensions " + to_string(dims) +
                  " whose element count overflows int64");
  }
  return n;
}

bool external_location_is_inside(const std::string& location) {
  const std::filesystem::path rel(location);
  bool escapes = rel.is_absolute();
  for (const auto& part : rel) escapes |= part == "..";
  return !escapes;
}

namespace {

// A non-negative integer from an external_data entry's text.
int64_t external_number(const std::string& text, const std::string& key, const std::string& what) {
  int64_t v = 0;
  bool ok = !text.empty() && text.size() <= 18;
  for (char ch : text) ok &= ch >= '0' && ch <= '9';
  if (ok) v = std::stoll(text);
  if (!ok)
    throw Error(what + " has external_data " + key + " '" + text + "'; expected a byte count");
  return v;
}

// The bytes of a tensor kept in a file beside the model (ONNX external data, as PyTorch's
// dynamo exporter and large models write): `location` relative to the model's directory (no
// absolute path, no '..'), `offset` and `length` in bytes (defaults: 0, to the end of the
// file); `checksum` is not verified. Their count must be what the tensor's dims and dtype need,
// checked before anything is read.
std::string read_external_data(const TP& t, const std::string& what, const std::string& base_dir) {
  std::string location, offset_text = "0", length_text;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset_text = kv.value();
    else if (kv.key() == "length")
      length_text = kv.value();
  }
  if (location.empty()) throw Error(what + " is stored externally but names no location");
  const std::filesystem::path rel(location);
  if (!external_location_is_inside(location))
    throw Error(what + " keeps its data in '" + location +
                "'; an external data location must be a relative path inside the model's "
                "directory");
  if (base_dir.empty())
    throw Error(what + " keeps its data in the file '" + location +
                "' beside the model, but the model was given as bytes, with no directory to "
                "look in");
  const std::string path = (std::filesystem::path(base_dir) / rel).string();
  const int64_t size = regular_file_size(path, "external data file of " + what);
  const int64_t offset = external_number(offset_text, "offset", what);
  const int64_t length = length_text.empty() ? size - std::min(offset, size)
                                             : external_number(length_text, "length", what);
  if (offset > size || length > size - offset)
    throw Error(what + " claims bytes [" + std::to_string(offset) + ", " +
                std::to_string(offset + length) + ") of '" + path + "', which holds " +
                std::to_string(size));
  int64_t need = checked_elements({t.dims().begin(), t.dims().end()}, what);
  const size_t elem = element_bytes(t.data_type());
  if (elem == 0) return {};  // a dtype Kiln does not load: decode_tensor says so, nothing read
  if (__builtin_mul_overflow(need, static_cast<int64_t>(elem), &need) || need != length)
    throw Error(what + " has " + std::to_string(length) + " bytes in '" + path + "'; its dims " +
                to_string(Shape(t.dims().begin(), t.dims().end())) + " and dtype " +
                dtype_name(t.data_type()) + " need " + std::to_string(need));
  std::string bytes(static_cast<size_t>(length), '\0');
  std::ifstream in(path, std::ios::binary);
  in.seekg(offset);
  if (!in.read(bytes.data(), length))
    throw Error("cannot read " + std::to_string(length) + " bytes at offset " +
                std::to_string(offset) + " of '" + path + "' (" + what + ")");
  return bytes;
}

}  // namespace

HostTensor decode_tensor(const TP& t, const std::string& what, const std::string& base_dir) {
  if (t.data_location() == TP::EXTERNAL || t.external_data_size() > 0) {
    TP inline_copy = t;  // external tensors hold no data fields of their own
    inline_copy.clear_external_data();
    inline_copy.set_data_location(TP::DEFAULT);
    *inline_copy.mutable_raw_data() = read_external_data(t, what, base_dir);
    return decode_tensor(inline_copy, what);
  }
  if (t.has_segment()) throw Error(what + " is segmented; Kiln does not load segmented tensors");
  if (t.dims_size() > static_cast<int>(kMaxRank))
    throw Error(what + " has rank " + std::to_string(t.dims_size()) + "; Kiln supports up to " +
                std::to_string(kMaxRank));
  HostTensor h;
  h.dtype = t.data_type();
  h.dims.assign(t.dims().begin(), t.dims().end());
  const int64_t n = checked_elements(h.dims, what);
  const size_t elem = element_bytes(h.dtype);
  if (elem == 0)
    throw Error(what + " has dtype " + dtype_name(h.dtype) +
                ", which Kiln does not load (FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT64, INT32, "
                "INT16, INT8, UINT16, UINT8 and BOOL are supported)");
  const auto [typed, others] = typed_counts(t);
  if (others != 0)
    throw Error(what + " (" + dtype_name(h.dtype) +
                ") holds values in a data field of another "
                "dtype (expected raw_data or " +
                typed_field_name(h.dtype) + ")");
  if (!t.raw_data().empty()) {
    if (typed != 0) throw Error(what + " holds both raw_data and " + typed_field_name(h.dtype));
    // n <= raw size first, so n * elem cannot overflow.
    const uint64_t raw = t.raw_data().size();
    if (static_cast<uint64_t>(n) > raw || static_cast<uint64_t>(n) * elem != raw)
      throw Error(what + " has " + std::to_string(raw) + " bytes of raw_data; its dims " +
                  to_string(h.dims) + " and dtype " + dtype_name(h.dtype) + " need " +
                  (static_cast<uint64_t>(n) > raw ? std::to_string(n) + " x " + std::to_string(elem)
                                                  : std::to_string(n * elem)));
    decode_raw(t, n, h);
  } else {
    if (typed != n)
      throw Error(what + " has " + std::to_string(typed) + " values in " +
                  typed_field_name(h.dtype) + "; its dims " + to_string(h.dims) + " need " +
                  std::to_string(n));
    decode_typed(t, n, h);
  }
  return h;
}

Tensor load_tensor_file(const std::string& path) {
  const std::string bytes = read_file(path, "tensor file");
  TP t;
  if (!t.ParseFromString(bytes))
    throw Error("cannot parse '" + path + "' as an ONNX TensorProto (corrupt or truncated)");
  const HostTensor h = decode_tensor(t, "tensor '" + t.name() + "' in '" + path + "'");
  Tensor out{h.dims, h.dims.size() == 4 ? Layout::nchw : Layout::any, {}};
  if (h.is_float()) {
    out.data = h.f;
  } else {
    out.data.reserve(h.i.size());
    for (int64_t v : h.i) out.data.push_back(static_cast<float>(v));
  }
  return out;
}

std::vector<std::string> external_data_files(const std::string& model_path,
                                             const std::string& bytes) {
  ::onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return {};
  const std::filesystem::path dir = std::filesystem::path(model_path).parent_path();
  std::vector<std::string> files;
  for (const auto& t : model.graph().initializer())
    for (const auto& kv : t.external_data()) {
      if (kv.key() != "location" || !external_location_is_inside(kv.value())) continue;
      const std::string f = (dir / kv.value()).string();
      if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
    }
  return files;
}

}  // namespace kiln::graph::onnx
