// The kiln subcommands; each returns the process exit code (0 ok, 1 error, 2 usage).
#pragma once

namespace kiln::cli {

int cmd_example(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_compile(int argc, char** argv);
int cmd_tune(int argc, char** argv);

}  // namespace kiln::cli
