#pragma once
// A measured step as a Chrome trace: one process per rank, one track per stream, each
// instruction the executor ran (its op, or send / recv / fetch) from when it began to when
// it ended (its args: micro-batch, the stream thread's CPU time in it, where it comes from),
// and the time its stream waited for its events before it as a "wait" slice. The
// same tracks as `pipeweave sim --trace`, so the two open side by side.

#include <string>

#include "executor/interpreter.h"

namespace pw::tools {

// The last step `interp` ran with tracing on; times from that step's start, in us.
std::string StepTraceJson(const Interpreter& interp);

}  // namespace pw::tools
