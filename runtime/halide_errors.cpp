// Error handler for the Halide runtime.
#include "halide_errors.h"

#include <mutex>

#include "HalideRuntime.h"
#include "kernels.h"

namespace kiln::runtime {
namespace {

std::mutex& error_mutex() {
  static std::mutex m;
  return m;
}
std::string& error_text() {
  static std::string s;
  return s;
}

// Halide may report from a worker thread, so the message goes to shared, locked storage.
void record_error(void* /*user_context*/, const char* msg) {
  std::lock_guard<std::mutex> lock(error_mutex());
  std::string& s = error_text();
  if (!s.empty()) s += "; ";
  s += msg;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
}

}  // namespace

void begin_halide_call() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    halide_set_error_handler(record_error);
    install_cpu_feature_check();
  });
  std::lock_guard<std::mutex> lock(error_mutex());
  error_text().clear();
}

std::string last_halide_error() {
  std::lock_guard<std::mutex> lock(error_mutex());
  return error_text();
}

}  // namespace kiln::runtime
