// The `pipeweave` command line: dispatches to a registered subcommand.

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <new>

#include "executor/process_resources.h"
#include "ir/stream_spin.h"
#include "tools/command.h"
#include "tools/huge_pages.h"

namespace pw::tools {

CommandRegistry& CommandRegistry::Global() {
  static CommandRegistry registry;
  return registry;
}

void CommandRegistry::Register(Command command) { commands_.push_back(std::move(command)); }

const Command* CommandRegistry::Find(const std::string& name) const {
  for (const Command& c : commands_)
    if (c.name == name) return &c;
  return nullptr;
}

namespace {

void PrintHelp() {
  std::cout << "usage: pipeweave COMMAND [ARGS...]\n\ncommands:\n";
  for (const Command& c : CommandRegistry::Global().commands()) {
    if (!c.internal) std::printf("  %-14s %s\n", c.name.c_str(), c.summary.c_str());
  }
  std::cout << "\nRun 'pipeweave COMMAND --help' for a command's flags.\n";
}

// The exception boundary of every command: a failure that escapes as an exception (a
// filesystem error, memory exhausted by a size no check refused) is one line and exit 1,
// never an abort with a core dump.
pw::StatusOr<int> RunGuarded(const Command& command, const std::vector<std::string>& args) {
  try {
    return command.run(args);
  } catch (const std::bad_alloc&) {
    return pw::Internal(
        "out of memory (the module, plan or flags ask for more than "
        "this machine has)");
  } catch (const std::filesystem::filesystem_error& e) {
    return pw::Internal(e.what());
  } catch (const std::exception& e) {
    return pw::Internal(e.what());
  }
}

}  // namespace
}  // namespace pw::tools

int main(int argc, char** argv) {
  using namespace pw::tools;
  // Freed blocks stay in the heap for planning's next phase (fthenb 128 x 16384 with comms:
  // 593 -> 442 ms, CPU 1104 -> 690 ms).
  pw::KeepFreedBlocksInHeap();
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    PrintHelp();
    return argc < 2 ? 2 : 0;
  }
  const Command* command = CommandRegistry::Global().Find(argv[1]);
  if (!command) {
    std::cerr << "pipeweave: error: unknown command '" << argv[1]
              << "' (run 'pipeweave --help' for the list)\n";
    return 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::cout << "usage: " << command->usage << "\n";
      return 0;
    }
  }
  if (command->trains) RestartWithHugePages(argv);
  // The executor's and profile's stream waits follow PW_STREAM_SPIN: a bad value stops
  // every command here rather than running with a wait the user did not ask for.
  pw::StatusOr<int> result = pw::StreamSpinFromEnv().status();
  if (result.ok()) result = RunGuarded(*command, args);
  if (!result.ok()) {
    std::cerr << "pipeweave " << command->name << ": error: " << result.status().message() << "\n";
    return result.status().code() == pw::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return *result;
}
