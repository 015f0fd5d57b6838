// What the end-to-end tests of the kiln binary share: a fixture that runs it in a directory of
// the test's own (with the caches inside it), and helpers for files and messages.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "npy.h"
#include "sanitizers.h"  // KILN_TEST_ASAN, read below

namespace kiln::cli_test {

namespace fs = std::filesystem;
using kiln::cli::NpyArray;

struct Result {
  int code = -1;
  std::string out, err;
  long max_rss_kib = 0;  // the command's peak resident memory
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
// True when `s` holds no byte a terminal acts on (newlines end lines and are counted apart).
inline bool terminal_safe(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    const unsigned char b = static_cast<unsigned char>(c);
    return b == '\n' || (b >= 0x20 && b != 0x7f);
  });
}

inline int lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

const kiln::graph::Shape kExampleIn = {1, 64, 56, 56}, kExampleOut = {1, 64, 28, 28};

// Each test in its own directory, with the peak cache inside it (never the user's).
class CliRunBench : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kiln_cli_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // With max_virtual_kib: under that address-space limit (ulimit -v) and a 60 s timeout, so a
  // command that reads unbounded input fails in the test, not on the machine.
  Result kiln(const std::string& args, long max_virtual_kib = 0) const {
    std::string cmd = "cd '" + dir_ + "' && ";
    if (max_virtual_kib) cmd += "ulimit -v " + std::to_string(max_virtual_kib) + " && ";
    cmd += "XDG_CACHE_HOME='" + dir_ + "/cache' exec " + (max_virtual_kib ? "timeout 60 " : "") +
           "'" KILN_BINARY "' " + args + " >stdout.txt 2>stderr.txt";
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    rusage usage{};
    if (pid < 0 || wait4(pid, &status, 0, &usage) != pid) return {};
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(path("stdout.txt")),
            slurp(path("stderr.txt")), usage.ru_maxrss};
  }

  std::string dir_;
};

// AddressSanitizer reserves terabytes of address space at start, so a command run under an
// address-space limit (ulimit -v) dies before it starts: the tests that need one say so.
#ifdef KILN_TEST_ASAN
constexpr bool kAddressSpaceLimitsWork = false;
#else
constexpr bool kAddressSpaceLimitsWork = true;
#endif
#define SKIP_WITHOUT_ADDRESS_SPACE_LIMITS()                                                  \
  if (!kAddressSpaceLimitsWork)                                                              \
  GTEST_SKIP() << "built with AddressSanitizer, which reserves more address space than any " \
                  "limit (ulimit -v) this test sets"

// Lines of `s` other than progress lines ("[codegen] ...", "[winograd] ...": a first compile
// and the Winograd output check write them before a model's inputs are read) and a sanitizer
// runtime's own ("==PID==WARNING: ASan doesn't fully support makecontext/swapcontext ...",
// which the compile prints under AddressSanitizer).
inline int message_lines(const std::string& s) {
  int n = 0;
  for (size_t begin = 0; begin < s.size();) {
    const size_t end = std::min(s.find('\n', begin), s.size());
    const std::string line = s.substr(begin, end - begin);
    const bool sanitizer = line.rfind("==", 0) == 0 && line.find("==", 2) != std::string::npos;
    n += !line.empty() && line[0] != '[' && !sanitizer;
    begin = end + 1;
  }
  return n;
}

// A failed command: the given exit code and one stderr line that says `what` (besides progress
// lines).
inline void expect_error(const Result& r, int code, const std::string& what) {
  EXPECT_EQ(r.code, code) << r.err;
  EXPECT_TRUE(contains(r.err, what)) << r.err;
  // usage errors add the pointer to --help
  EXPECT_EQ(message_lines(r.err), code == 2 ? 2 : 1) << r.err;
}

}  // namespace kiln::cli_test
