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

std::string StepTraceJson(const Interpreter& interp) {
  ChromeTraceWriter trace;
  const int rank = interp.rank();
  trace.SetProcessName(rank, StrCat("rank ", rank, " (measured)"));
  const LoweredPlan& plan = interp.lowered();
  for (StreamType type : plan.streams) {
    const int tid = StreamIndex(type);
    trace.SetThreadName(rank, tid, StreamTypeName(type));
    trace.SetThreadSortIndex(rank, tid, tid);
  }
  const double origin = static_cast<double>(interp.step_began_ns());
  auto us = [&](int64_t ns) { return (static_cast<double>(ns) - origin) / 1e3; };
  for (const Instr& instr : plan.instrs) {
    const Instr::Times& t = instr.times;
    if (t.ended == 0 || t.began < interp.step_began_ns()) continue;  // not run this step
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
