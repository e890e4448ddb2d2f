#pragma once
// Opens one of pipeweave's own shared modules (lib/libpipeweave_<name>.so): code that pulls
// in heavy libraries (oneDNN, Highway, Gloo, the CUDA toolkit) lives in such a module and is
// opened the first time it is needed, so commands that never compute or communicate start
// without loading, relocating and initializing those libraries.

#include <string>

#include "ir/status.h"

namespace pw {

// Opens `file_name` (e.g. "libpipeweave_cpu_math.so") and returns what its extern "C"
// function `entry` returns. Where it looks, first match wins: the path in the environment
// variable `env_var` when set; beside this program as installed (BIN/../LIB, wherever the
// prefix was moved); the configured install location; this build tree's lib/. The module
// stays open for the life of the process. Each call opens afresh: callers keep the result.
StatusOr<const void*> OpenPipeweaveModule(const std::string& file_name, const char* env_var,
                                          const char* entry);

}  // namespace pw
