#pragma once
// The one validation every command runs on a module it reads (check, inspect, sim, run,
// run-parallel, opt, profile, ab), so that all of them accept and refuse the same files:
// the verifier (programs, sizes, mesh, the plan's jobs against programs and mesh), then,
// for a module with a plan, the executor's plan check (every send meets its recv) and the
// schedule checker (placement, one F and one B per stage and micro-batch in order,
// deadlock freedom).

#include <string>

#include "ir/module.h"
#include "ir/status.h"

namespace pw::tools {

Status ValidateModule(const Module& module);
// LoadModule, then ValidateModule; errors start with the path.
StatusOr<Module> LoadValidModule(const std::string& path);

}  // namespace pw::tools
