// Node-level helpers for the ONNX converters: error messages that name the node, input-count
// checks and type-checked attribute access.
#include "graph/onnx/importer.h"

namespace kiln::graph::onnx {
namespace {

using AP = ::onnx::AttributeProto;

const AP* typed_attr(const NodeCtx& c, const char* name, AP::AttributeType type) {
  const AP* a = find_attr(c, name);
  if (a && a->type() != type)
    node_error(c, std::string("attribute '") + name + "' must be " + AP::AttributeType_Name(type) +
                      ", got " + AP::AttributeType_Name(a->type()));
  return a;
}

}  // namespace

void node_error(const NodeCtx& c, const std::string& what) {
  throw Error("node '" + c.name + "' (" + c.op() + "): " + what);
}

void expect_inputs(const NodeCtx& c, int lo, int hi) {
  const int n = c.proto->input_size();
  if (n < lo || n > hi)
    node_error(
        c, "expected " +
               (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
               " inputs, got " + std::to_string(n));
}

const AP* find_attr(const NodeCtx& c, const char* name) {
  for (const AP& a : c.proto->attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t attr_int(const NodeCtx& c, const char* name, int64_t def) {
  const AP* a = typed_attr(c, name, AP::INT);
  return a ? a->i() : def;
}

float attr_float(const NodeCtx& c, const char* name, float def) {
  const AP* a = typed_attr(c, name, AP::FLOAT);
  return a ? a->f() : def;
}

std::string attr_string(const NodeCtx& c, const char* name, const std::string& def) {
  const AP* a = typed_attr(c, name, AP::STRING);
  return a ? a->s() : def;
}

std::vector<int64_t> attr_ints(const NodeCtx& c, const char* name) {
  const AP* a = typed_attr(c, name, AP::INTS);
  if (!a) return {};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::vector<float> attr_floats(const NodeCtx& c, const char* name) {
  const AP* a = typed_attr(c, name, AP::FLOATS);
  if (!a) return {};
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

int to_int(const NodeCtx& c, int64_t v, const std::string& what, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    node_error(c, what + " is " + std::to_string(v) + ", expected a value in [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(v);
}

int normalize_axis(const NodeCtx& c, int64_t axis, size_t rank, const std::string& what) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    node_error(c, what + " " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(r) + " (expected -" + std::to_string(r) + " to " +
                      std::to_string(r - 1) + ")");
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

}  // namespace kiln::graph::onnx
