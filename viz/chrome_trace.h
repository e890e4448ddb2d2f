#pragma once
// A Chrome Trace Event Format writer (the JSON that chrome://tracing and Perfetto open).
// General on purpose: any number of processes (pid) with any number of threads (tid) each,
// e.g. one process per rank and one thread per stream. Times are microseconds.
//
//   ChromeTraceWriter trace;
//   trace.SetProcessName(0, "rank 0");
//   trace.SetThreadName(0, 1, "compute");
//   trace.AddComplete("0F1", "forward", 0, 1, /*ts=*/10, /*dur=*/5);
//   WriteFileAtomically(path, trace.Finish());

#include <cstdint>
#include <string>
#include <string_view>

namespace pw {

// Appends `s` as a JSON string literal (quoted, escaped).
void AppendJsonString(std::string& out, std::string_view s);
// Appends a number the way JSON wants it: integers without a fraction, no inf/nan.
void AppendJsonNumber(std::string& out, double value);

class ChromeTraceWriter {
 public:
  // Metadata events: the names (and order) tracks get in the viewer.
  void SetProcessName(int pid, std::string_view name);
  void SetThreadName(int pid, int tid, std::string_view name);
  void SetThreadSortIndex(int pid, int tid, int index);

  // A complete ("X") event. `args_json` is an optional JSON object ("{\"mb\":3}").
  void AddComplete(std::string_view name, std::string_view category, int pid, int tid, double ts,
                   double dur, std::string_view args_json = {});
  // An instant ("i") event, thread-scoped.
  void AddInstant(std::string_view name, std::string_view category, int pid, int tid, double ts);
  // A flow arrow from one point to another ("s" then "f"), e.g. a send to its recv. The
  // arrow binds to the enclosing complete events on both tracks.
  void AddFlow(std::string_view name, uint64_t id, int from_pid, int from_tid, double from_ts,
               int to_pid, int to_tid, double to_ts);

  // A field (each key once) of the document's "otherData" object: facts about the whole
  // trace, e.g. the clock its times are read from. `json_value` is a JSON value
  // ("\"steady\"", "12.5").
  void AddOtherData(std::string_view key, std::string_view json_value);

  size_t num_events() const { return count_; }
  // The whole document: {"traceEvents":[...],"displayTimeUnit":"ms"}, with "otherData":{...}
  // when any was added.
  std::string Finish() const;

 private:
  void Begin(std::string_view ph, std::string_view name, int pid, int tid);
  std::string events_;
  std::string other_data_;
  size_t count_ = 0;
};

}  // namespace pw
