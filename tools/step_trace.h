#pragma once
// A measured step as a Chrome trace: one process per rank, one track per stream, each
// instruction the executor ran (its op, or send / recv / fetch) from when it began to when
// it ended (its args: micro-batch, the plan's job it does, the stream thread's CPU time in it
// where the step recorded it (Tracing::kTimesAndCpu), where it comes from, the hand-off it
// waited for),
// and the time its stream waited for its events before it as a "wait" slice. The
// same tracks as `pipeweave sim --trace`, so the two open side by side.

#include <cstdint>
#include <string>
#include <vector>

#include "executor/interpreter.h"

namespace pw::tools {

// One traced step's instruction times, copied out of the interpreter right after the step
// (a copy of a few numbers per instruction): the trace is written later, after the run,
// since writing it between steps takes CPU from ranks still in the step on shared cores.
struct StepTimes {
  int64_t began_ns = 0;
  bool cpu_time = false;            // the times hold the stream threads' CPU time
  std::vector<Instr::Times> times;  // per instruction of interp.lowered()
};
StepTimes CaptureStepTimes(const Interpreter& interp);

// A step captured from `interp` as a Chrome trace; times from that step's start, in us.
std::string StepTraceJson(const Interpreter& interp, const StepTimes& step);

}  // namespace pw::tools
