// printable(): see printable.h.
#include "graph/printable.h"

#include <cstdint>

#include "graph/ir.h"

namespace kiln::graph {
namespace {

// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0 when the byte there does not start one.
size_t utf8_length(std::string_view s, size_t i, uint32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  size_t n = 0;
  uint32_t cp = 0, min = 0;
  if (b >= 0xc2 && b <= 0xdf) n = 2, cp = b & 0x1f, min = 0x80;
  else if (b >= 0xe0 && b <= 0xef) n = 3, cp = b & 0x0f, min = 0x800;
  else if (b >= 0xf0 && b <= 0xf4) n = 4, cp = b & 0x07, min = 0x10000;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  *code_point = cp;
  return n;
}

// Code points a terminal may act on rather than show: C1 controls (0x9b is CSI on some
// terminals), and the bidirectional and line-breaking formatting characters.
bool is_format_control(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

void append_hex(std::string& out, unsigned char b) {
  static const char kDigits[] = "0123456789abcdef";
  out += "\\x";
  out += kDigits[b >> 4];
  out += kDigits[b & 0xf];
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    uint32_t cp = 0;
    // Bytes in this character: 1 for ASCII and for a byte that starts no UTF-8 sequence.
    const size_t utf8 = b >= 0x80 ? utf8_length(text, i, &cp) : 0;
    const size_t n = utf8 ? utf8 : 1;
    if (b >= 0x20 && b < 0x7f) {
      out += static_cast<char>(b);
    } else if (b == '\n' || b == '\r' || b == '\t') {
      out += b == '\n' ? "\\n" : b == '\r' ? "\\r" : "\\t";
    } else if (b < 0x80 || utf8 == 0 || is_format_control(cp)) {
      for (size_t k = 0; k < n; ++k)
        append_hex(out, static_cast<unsigned char>(text[i + k]));
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

Graph with_printable_names(Graph g) {
  for (uint32_t i = 0; i < g.values().size(); ++i) {
    std::string& name = g.value(ValueId{i}).name;
    name = printable(name);
  }
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    std::string& name = g.node(NodeId{i}).name;
    name = printable(name);
  }
  return g;
}

}  // namespace kiln::graph
