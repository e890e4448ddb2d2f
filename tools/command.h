#pragma once
// Subcommands of the `pipeweave` tool. Each lives in its own cmd_*.cc and registers
// itself with PW_REGISTER_COMMAND; main() dispatches on the first argument.

#include <string>
#include <vector>

#include "ir/status.h"

namespace pw::tools {

struct Command {
  std::string name;
  std::string summary;  // one line for `pipeweave --help`
  std::string usage;    // shown by `pipeweave NAME --help` and on a usage error
  // args excludes the program and command names. Returns the process exit code; an
  // error Status is printed as one line and exits 1 (usage errors: 2).
  StatusOr<int> (*run)(const std::vector<std::string>& args);
  // Started by pipeweave itself (a rank of a measuring run), not by a user: left out of
  // `pipeweave --help`, still runnable and documented by `pipeweave NAME --help`.
  bool internal = false;
  // Trains or times kernels: runs with its host memory on huge pages (tools/huge_pages.h).
  bool trains = false;
};

class CommandRegistry {
 public:
  static CommandRegistry& Global();
  void Register(Command command);
  const Command* Find(const std::string& name) const;
  const std::vector<Command>& commands() const { return commands_; }

 private:
  std::vector<Command> commands_;
};

struct CommandRegistration {
  explicit CommandRegistration(Command command) {
    CommandRegistry::Global().Register(std::move(command));
  }
};

}  // namespace pw::tools

#define PW_REGISTER_COMMAND(var, ...) \
  static ::pw::tools::CommandRegistration pw_command_##var(::pw::tools::Command{__VA_ARGS__})
