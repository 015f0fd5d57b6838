// The kiln command: one executable, one subcommand per job. Each subcommand parses its own
// options and prints its own --help.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "cli.h"
#include "commands.h"
#include "graph/ir.h"

namespace {

using kiln::graph::printable;

struct Command {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* summary;
};

const Command kCommands[] = {
    {"example", kiln::cli::cmd_example,
     "compile and run the built-in reference model (Conv + BatchNorm + ReLU) and report every "
     "decision"},
    {"inspect", kiln::cli::cmd_inspect,
     "print the graph after each pass, the fusion groups, kernel descriptions and the arena plan"},
    {"run", kiln::cli::cmd_run,
     "run a model on .npy or random inputs, write its outputs as .npy; --check compares every "
     "kernel with the reference"},
    {"bench", kiln::cli::cmd_bench,
     "measure a model's latency (median, p90, min); --per-layer: each kernel's time and share "
     "of peak"},
    {"tune", kiln::cli::cmd_tune,
     "search each convolution's schedule by measurement and record the winners in a schedule "
     "database (--schedules FILE applies it)"},
    {"compile", kiln::cli::cmd_compile,
     "compile a model into NAME.a + NAME.h + NAME.weights for a program to link (no Halide at "
     "run time)"},
};

void print_usage(FILE* out) {
  std::fprintf(out, "usage: kiln <command> [options]   (kiln <command> --help for its options)\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help") {
    print_usage(stdout);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (cmd != c.name) continue;
    try {
      return c.run(argc, argv);
    } catch (const kiln::cli::UsageError& e) {
      std::fprintf(stderr, "kiln %s: %s\n(run 'kiln %s --help' for usage)\n", c.name,
                   printable(e.what()).c_str(), c.name);
      return 2;
    } catch (const kiln::graph::Error& e) {
      std::fprintf(stderr, "kiln %s: %s\n", c.name, e.what());  // printable already
      return 1;
    } catch (const std::bad_alloc&) {
      // An allocation no limit caught ahead (the limits see the arena, inputs and files).
      std::fprintf(stderr,
                   "kiln %s: out of memory (an allocation failed; the model needs more memory "
                   "than this process can get)\n",
                   c.name);
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kiln %s: internal error: %s\n", c.name, printable(e.what()).c_str());
      return 3;
    }
  }
  std::fprintf(stderr, "kiln: unknown command '%s'\n", printable(cmd).c_str());
  print_usage(stderr);
  return 2;
}
