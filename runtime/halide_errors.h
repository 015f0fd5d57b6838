// Halide's default error handler calls abort(). The runtime installs its own, which records
// the message so that a failing kernel call comes back as an error value.
#pragma once

#include <string>

namespace kiln::runtime {

// Installs the handler (once; thread-safe) and clears the last recorded message.
void begin_halide_call();
// The messages Halide reported since begin_halide_call(), or "" if none.
std::string last_halide_error();

}  // namespace kiln::runtime
