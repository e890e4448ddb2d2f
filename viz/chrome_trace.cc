#include "viz/chrome_trace.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace pw {

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void AppendJsonNumber(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out.append(buf, end);
}

void ChromeTraceWriter::Begin(std::string_view ph, std::string_view name, int pid, int tid) {
  if (count_++) events_ += ",\n";
  events_ += "{\"ph\":\"";
  events_ += ph;
  events_ += "\",\"name\":";
  AppendJsonString(events_, name);
  events_ += ",\"pid\":";
  events_ += std::to_string(pid);
  events_ += ",\"tid\":";
  events_ += std::to_string(tid);
}

void ChromeTraceWriter::SetProcessName(int pid, std::string_view name) {
  Begin("M", "process_name", pid, 0);
  events_ += ",\"args\":{\"name\":";
  AppendJsonString(events_, name);
  events_ += "}}";
}

void ChromeTraceWriter::SetThreadName(int pid, int tid, std::string_view name) {
  Begin("M", "thread_name", pid, tid);
  events_ += ",\"args\":{\"name\":";
  AppendJsonString(events_, name);
  events_ += "}}";
}

void ChromeTraceWriter::SetThreadSortIndex(int pid, int tid, int index) {
  Begin("M", "thread_sort_index", pid, tid);
  events_ += ",\"args\":{\"sort_index\":" + std::to_string(index) + "}}";
}

void ChromeTraceWriter::AddComplete(std::string_view name, std::string_view category, int pid,
                                    int tid, double ts, double dur, std::string_view args_json) {
  Begin("X", name, pid, tid);
  events_ += ",\"cat\":";
  AppendJsonString(events_, category);
  events_ += ",\"ts\":";
  AppendJsonNumber(events_, ts);
  events_ += ",\"dur\":";
  AppendJsonNumber(events_, dur);
  if (!args_json.empty()) {
    events_ += ",\"args\":";
    events_ += args_json;
  }
  events_ += '}';
}

void ChromeTraceWriter::AddInstant(std::string_view name, std::string_view category, int pid,
                                   int tid, double ts) {
  Begin("i", name, pid, tid);
  events_ += ",\"cat\":";
  AppendJsonString(events_, category);
  events_ += ",\"s\":\"t\",\"ts\":";
  AppendJsonNumber(events_, ts);
  events_ += '}';
}

void ChromeTraceWriter::AddFlow(std::string_view name, uint64_t id, int from_pid, int from_tid,
                                double from_ts, int to_pid, int to_tid, double to_ts) {
  for (int end = 0; end < 2; ++end) {
    Begin(end ? "f" : "s", name, end ? to_pid : from_pid, end ? to_tid : from_tid);
    events_ += ",\"cat\":\"flow\",\"id\":" + std::to_string(id) + ",\"ts\":";
    AppendJsonNumber(events_, end ? to_ts : from_ts);
    if (end) events_ += ",\"bp\":\"e\"";
    events_ += '}';
  }
}

void ChromeTraceWriter::AddOtherData(std::string_view key, std::string_view json_value) {
  if (!other_data_.empty()) other_data_ += ',';
  AppendJsonString(other_data_, key);
  other_data_ += ':';
  other_data_ += json_value;
}

std::string ChromeTraceWriter::Finish() const {
  std::string out = "{\"traceEvents\":[\n";
  out += events_;
  out += "\n],\"displayTimeUnit\":\"ms\"";
  if (!other_data_.empty()) out += ",\"otherData\":{" + other_data_ + "}";
  out += "}\n";
  return out;
}

}  // namespace pw
