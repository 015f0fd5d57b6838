// graph::printable and the errors built on it: whatever bytes a model supplies, a message holds
// no control character, no terminal escape and no malformed UTF-8. The oracle is the C
// library's UTF-8 decoder (C.UTF-8 locale), not Kiln's.
#include <gtest/gtest.h>

#include <climits>
#include <clocale>
#include <cstring>
#include <cwchar>
#include <cwctype>
#include <random>
#include <string>

#include "graph/ir.h"
#include "graph/printable.h"

namespace kiln::graph {
namespace {

class Printable : public testing::Test {
 protected:
  void SetUp() override {
    if (!std::setlocale(LC_CTYPE, "C.UTF-8")) GTEST_SKIP() << "no C.UTF-8 locale";
  }
  void TearDown() override { std::setlocale(LC_CTYPE, "C"); }
};

// Bidirectional overrides and line separators are not iswcntrl, yet change what a line shows.
bool is_format(wchar_t c) {
  return (c >= 0x200e && c <= 0x200f) || (c >= 0x2028 && c <= 0x202e) ||
         (c >= 0x2066 && c <= 0x2069);
}

// Empty when `s` is well-formed UTF-8 with no control or formatting character, else why not.
std::string unsafe_part(const std::string& s) {
  std::mbstate_t state{};
  for (size_t i = 0; i < s.size();) {
    wchar_t c = 0;
    const size_t n = std::mbrtowc(&c, s.data() + i, s.size() - i, &state);
    if (n == static_cast<size_t>(-1) || n == static_cast<size_t>(-2))
      return "malformed UTF-8 at byte " + std::to_string(i);
    if (n == 0 || std::iswcntrl(static_cast<wint_t>(c)) || is_format(c))
      return "character U+" + std::to_string(static_cast<uint32_t>(c)) + " at byte " +
             std::to_string(i);
    i += n;
  }
  return "";
}

// Random bytes, weighted towards the troublesome ones: C0 controls, ESC sequences, DEL, UTF-8
// lead and continuation bytes, and the encodings of C1 and bidi controls.
std::string hostile_bytes(std::mt19937_64& rng) {
  static const char* const kPieces[] = {"\n", "\r", "\x1b[2J", "\x1b]0;t\x07", "\x7f", "\xc2\x9b",
                                        "\xe2\x80\xae", "\xe2\x80\xa8", "\xed\xa0\x80", "\xc0\xaf",
                                        "\xf4\x90\x80\x80", "\xe2\x82", "\\x1b", "\xc3\xa9"};
  std::string s;
  const int parts = static_cast<int>(rng() % 24);
  for (int k = 0; k < parts; ++k) {
    if (rng() % 3 == 0)
      s += kPieces[rng() % (sizeof(kPieces) / sizeof(kPieces[0]))];
    else
      s += static_cast<char>(rng() % 256);
  }
  return s;
}

// Random text a terminal shows as it is: printable ASCII and printable non-ASCII characters,
// encoded by the C library.
std::string harmless_text(std::mt19937_64& rng) {
  std::string s;
  std::mbstate_t state{};
  char buf[MB_LEN_MAX];
  const int chars = static_cast<int>(rng() % 20);
  while (static_cast<int>(s.size()) < chars) {
    const wchar_t c =
        rng() % 2 ? static_cast<wchar_t>(0x20 + rng() % 0x5f) : static_cast<wchar_t>(rng() % 0x10ffff);
    if (std::iswcntrl(static_cast<wint_t>(c)) || is_format(c) || !std::iswprint(static_cast<wint_t>(c)))
      continue;
    const size_t n = std::wcrtomb(buf, c, &state);
    if (n != static_cast<size_t>(-1)) s.append(buf, n);
  }
  return s;
}

TEST_F(Printable, EscapesEveryUnsafeByteAndIsIdempotent) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 20000; ++i) {
    const std::string in = hostile_bytes(rng);
    const std::string out = printable(in);
    ASSERT_EQ(unsafe_part(out), "") << "input of " << in.size() << " bytes gave '" << out << "'";
    ASSERT_EQ(printable(out), out);
  }
}

TEST_F(Printable, KeepsPrintableTextAsItIs) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 5000; ++i) {
    const std::string in = harmless_text(rng);
    ASSERT_EQ(printable(in), in);
  }
}

TEST_F(Printable, NamesTheEscapedBytes) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 256; ++i) {
    const std::string word = harmless_text(rng);
    const unsigned char b = static_cast<unsigned char>(rng() % 0x20);
    const std::string out = printable(word + static_cast<char>(b) + word);
    char esc[8];
    std::snprintf(esc, sizeof esc, "\\x%02x", b);
    const std::string want = b == '\n' ? "\\n" : b == '\r' ? "\\r" : b == '\t' ? "\\t" : esc;
    EXPECT_EQ(out, word + want + word);
  }
}

TEST_F(Printable, ErrorMessagesAreOneSafeLine) {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 2000; ++i) {
    const std::string name = hostile_bytes(rng);
    const Error e("node '" + name + "' (Conv): weights must be constant");
    ASSERT_EQ(unsafe_part(e.what()), "");
    ASSERT_EQ(std::string(e.what()), "node '" + printable(name) + "' (Conv): weights must be constant");
  }
}

}  // namespace
}  // namespace kiln::graph
