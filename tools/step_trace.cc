#include "tools/step_trace.h"

#include "viz/chrome_trace.h"

namespace pw::tools {
namespace {

const char* KindName(Instr::Kind kind) {
  switch (kind) {
    case Instr::Kind::kKernel:
      return "compute";
    case Instr::Kind::kSend:
      return "send";
    case Instr::Kind::kRecv:
      return "recv";
    case Instr::Kind::kFetch:
      return "fetch";
  }
  return "?";
}

}  // namespace

StepTimes CaptureStepTimes(const Interpreter& interp) {
  StepTimes step;
  step.began_ns = interp.step_began_ns();
  step.times.reserve(interp.lowered().instrs.size());
  for (const Instr& instr : interp.lowered().instrs) step.times.push_back(instr.times);
  return step;
}

std::string StepTraceJson(const Interpreter& interp, const StepTimes& step) {
  ChromeTraceWriter trace;
  const int rank = interp.rank();
  trace.SetProcessName(rank, StrCat("rank ", rank, " (measured)"));
  const LoweredPlan& plan = interp.lowered();
  for (StreamType type : plan.streams) {
    const int tid = StreamIndex(type);
    trace.SetThreadName(rank, tid, StreamTypeName(type));
    trace.SetThreadSortIndex(rank, tid, tid);
  }
  const double origin = static_cast<double>(step.began_ns);
  auto us = [&](int64_t ns) { return (static_cast<double>(ns) - origin) / 1e3; };
  for (size_t i = 0; i < plan.instrs.size() && i < step.times.size(); ++i) {
    const Instr& instr = plan.instrs[i];
    const Instr::Times& t = step.times[i];
    if (t.ended == 0 || t.began < step.began_ns) continue;  // not run this step
    const int tid = StreamIndex(instr.stream);
    if (t.began - t.taken > 1000)  // waited more than 1 us for its events
      trace.AddComplete("wait", "wait", rank, tid, us(t.taken), us(t.began) - us(t.taken));
    std::string name =
        instr.kind == Instr::Kind::kKernel && instr.op ? instr.op->type : KindName(instr.kind);
    // cpu_us: the stream thread's CPU time in it, without the time it waited for a core.
    std::string args = StrCat("{\"micro_batch\": ", instr.micro_batch,
                              ", \"cpu_us\": ", static_cast<double>(t.cpu) / 1e3, ", \"where\": ");
    AppendJsonString(args, instr.where);
    args += "}";
    trace.AddComplete(name, KindName(instr.kind), rank, tid, us(t.began), us(t.ended) - us(t.began),
                      args);
  }
  return trace.Finish();
}

}  // namespace pw::tools
