// Escaping of model-controlled text (node, value and attribute names, op types, strings read
// from files) before it reaches a message or report, so a name cannot break the one-line rule
// of errors or send escape sequences to the user's terminal.
#pragma once

#include <string>
#include <string_view>

namespace kiln::graph {

// `text` with every byte that is not printable written as an escape: "\n", "\r" and "\t" for
// those three, "\xNN" for every other control byte (C0, DEL), for each byte of a C1 control,
// a bidirectional override or a line/paragraph separator (U+0080-U+009F, U+200E-U+200F,
// U+2028-U+202E, U+2066-U+2069), and for each byte that is not part of well-formed UTF-8.
// Printable ASCII and other well-formed UTF-8 are kept as they are. The backslash itself is
// not escaped, so applying printable twice gives the same text as once: messages that wrap
// other messages (graph::Error's constructor escapes, and so does the CLI) never escape twice.
std::string printable(std::string_view text);

}  // namespace kiln::graph
