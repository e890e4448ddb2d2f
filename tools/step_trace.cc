#include "tools/step_trace.h"

#include <unordered_map>

#include "executor/watchdog.h"
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
  step.cpu_time = interp.tracing() == Tracing::kTimesAndCpu;
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
  // Where the step began on the machine's steady clock (CLOCK_MONOTONIC, shared by its
  // processes): the ranks of one host line up on it (scripts/compare_traces.py).
  std::string began_us, host;
  AppendJsonNumber(began_us, static_cast<double>(step.began_ns) / 1e3);
  AppendJsonString(host, Watchdog::HostName());
  trace.AddOtherData("clock", "\"steady\"");
  trace.AddOtherData("step_began_us", began_us);
  trace.AddOtherData("host", host);
  const double origin = static_cast<double>(step.began_ns);
  auto us = [&](int64_t ns) { return (static_cast<double>(ns) - origin) / 1e3; };
  // The instruction that records each event: what a wait for it waits for.
  std::unordered_map<const Event*, size_t> recorder;
  for (size_t i = 0; i < plan.instrs.size(); ++i)
    for (const Event* e : plan.instrs[i].records) recorder[e] = i;
  auto ran = [&](size_t i) {
    return i < step.times.size() && step.times[i].ended != 0 &&
           step.times[i].began >= step.began_ns;
  };
  for (size_t i = 0; i < plan.instrs.size() && i < step.times.size(); ++i) {
    const Instr& instr = plan.instrs[i];
    const Instr::Times& t = step.times[i];
    if (!ran(i)) continue;  // not run this step
    const int tid = StreamIndex(instr.stream);
    if (t.began - t.taken > 1000)  // waited more than 1 us for its events
      trace.AddComplete("wait", "wait", rank, tid, us(t.taken), us(t.began) - us(t.taken));
    std::string name =
        instr.kind == Instr::Kind::kKernel && instr.op ? instr.op->type : KindName(instr.kind);
    std::string args = StrCat("{\"micro_batch\": ", instr.micro_batch, ", \"job\": ");
    AppendJsonString(args, instr.job >= 0 && instr.job < static_cast<int>(plan.job_names.size())
                               ? plan.job_names[instr.job]
                               : "step");
    // cpu_us: the stream thread's CPU time in it, without the time it waited for a core.
    if (step.cpu_time) args += StrCat(", \"cpu_us\": ", static_cast<double>(t.cpu) / 1e3);
    args += ", \"where\": ";
    AppendJsonString(args, instr.where);
    // A hand-off: its stream waited, and the last of the events it waited for was recorded
    // by another stream during that wait; from that instruction's end to this one's start.
    const Instr* released_by = nullptr;
    int64_t released_at = 0;
    for (const Event* e : instr.waits) {
      auto it = recorder.find(e);
      if (it == recorder.end() || !ran(it->second)) continue;
      const Instr& from = plan.instrs[it->second];
      const int64_t end = step.times[it->second].ended;
      if (from.stream != instr.stream && end > released_at) {
        released_by = &from;
        released_at = end;
      }
    }
    if (released_by && t.began - t.taken > 1000 && released_at >= t.taken &&
        released_at <= t.began) {
      args += StrCat(", \"handoff_from\": \"", StreamTypeName(released_by->stream),
                     "\", \"handoff_us\": ", static_cast<double>(t.began - released_at) / 1e3);
    }
    args += "}";
    trace.AddComplete(name, KindName(instr.kind), rank, tid, us(t.began), us(t.ended) - us(t.began),
                      args);
  }
  return trace.Finish();
}

}  // namespace pw::tools
