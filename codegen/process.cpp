// Running external tools: the C++ compiler, ar, the kernel generator.
#include "codegen/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "graph/ir.h"

extern char** environ;

namespace kiln::codegen {

void run_tool(const std::vector<std::string>& argv, const std::string& what,
              const std::string& stdin_path) {
  std::cout.flush();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!stdin_path.empty()) posix_spawn_file_actions_addopen(&actions, 0, stdin_path.c_str(), O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw graph::Error(what + ": cannot run " + argv[0] + ": " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw graph::Error(what + ": waiting for " + argv[0] + ": " + std::strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw graph::Error(what + " failed: " + argv[0] +
                       (WIFEXITED(status) ? " exited with " + std::to_string(WEXITSTATUS(status))
                                          : " was killed by signal " + std::to_string(WTERMSIG(status))));
}


}  // namespace kiln::codegen
