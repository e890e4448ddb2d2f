#include "viz/sim_report.h"

#include <cstdio>
#include <string>

#include "viz/chrome_trace.h"

namespace pw::cost {
namespace {

std::array<bool, kNumStreamTypes> StreamsInUse(const SimGraph& g, int rank) {
  std::array<bool, kNumStreamTypes> used{};
  for (int i : g.rank_order[g.simulated_rank(rank)])
    used[static_cast<int>(g.instrs[i].stream)] = true;
  return used;
}

void Field(std::string& out, const char* key, double value, bool comma = true) {
  if (comma) out += ", ";
  AppendJsonString(out, key);
  out += ": ";
  AppendJsonNumber(out, value);
}

double Ms(double seconds) { return seconds * 1e3; }

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string Format(const char* fmt, const char* s) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, s);
  return buf;
}

std::string MiB(int64_t bytes) { return Format("%.2f", bytes / (1024.0 * 1024.0)); }

const char* ClassName(int c) { return CommClassName(static_cast<CommClass>(c)); }
const char* StreamName(int s) { return StreamTypeName(static_cast<StreamType>(s)); }

// `, "key": {`
void OpenObject(std::string& out, const char* key) {
  out += ", ";
  AppendJsonString(out, key);
  out += ": {";
}

// "exposed_comm_ms": every class (kNone aside), then their union.
void ExposedCommJson(std::string& out, const std::array<double, kNumCommClasses>& by_class,
                     double total) {
  OpenObject(out, "exposed_comm_ms");
  for (int c = 1; c < kNumCommClasses; ++c) Field(out, ClassName(c), Ms(by_class[c]), c > 1);
  Field(out, "total", Ms(total));
  out += "}";
}

// "busy_ms_by_stream": every stream type, 0 where unused.
void BusyByStreamJson(std::string& out, const std::array<double, kNumStreamTypes>& busy) {
  OpenObject(out, "busy_ms_by_stream");
  for (int s = 0; s < kNumStreamTypes; ++s) Field(out, StreamName(s), Ms(busy[s]), s > 0);
  out += "}";
}

// Per rank: each stream's busy time ("-" where unused), exposed, bubble, end, peak memory.
std::string BusyByStreamTable(const SimResult& r, const SimGraph& g, const MemoryFit* fit) {
  std::string out = Format("%-5s", "rank");
  for (int s = 0; s < kNumStreamTypes; ++s) out += Format(" %11s", StreamName(s));
  out += Format(" %11s", "exposed") + Format(" %11s", "bubble") + Format(" %11s", "end") +
         Format(" %10s", "peak MiB") + (fit && fit->checked ? " fits\n" : "\n");
  for (size_t k = 0; k < r.ranks.size(); ++k) {
    const RankResult& rr = r.ranks[k];
    std::array<bool, kNumStreamTypes> used = StreamsInUse(g, rr.rank);
    out += Format("%-5s", std::to_string(rr.rank).c_str());
    for (int s = 0; s < kNumStreamTypes; ++s)
      out += used[s] ? Format(" %11.3f", Ms(rr.busy[s])) : Format(" %11s", "-");
    out += Format(" %11.3f", Ms(rr.exposed_comm)) + Format(" %11.3f", Ms(rr.bubble)) +
           Format(" %11.3f", Ms(rr.end)) + Format(" %10s", MiB(rr.peak_bytes).c_str());
    if (fit && fit->checked && k < fit->ranks.size()) out += fit->ranks[k].fits ? " yes" : " NO";
    out += "\n";
  }
  return out;
}

// Per rank: exposed communication of each class, then their union.
std::string ExposedByClassTable(const SimResult& r) {
  std::string out = Format("%-5s", "rank");
  for (int c = 1; c < kNumCommClasses; ++c) out += Format(" %11s", ClassName(c));
  out += Format(" %11s\n", "total");
  for (const RankResult& rr : r.ranks) {
    out += Format("%-5s", std::to_string(rr.rank).c_str());
    for (int c = 1; c < kNumCommClasses; ++c) out += Format(" %11.3f", Ms(rr.exposed_by_class[c]));
    out += Format(" %11.3f\n", Ms(rr.exposed_comm));
  }
  return out;
}

}  // namespace

std::string SimResultToJson(const SimResult& r, const SimGraph& g, const MemoryFit* fit) {
  std::string out = "{";
  Field(out, "step_time_ms", Ms(r.step_time), false);
  if (r.steady_steps > 1) {
    Field(out, "steady_step_time_ms", Ms(r.steady_step_time));
    Field(out, "steady_steps", r.steady_steps);
  }
  Field(out, "bubble_rate", r.bubble_rate);
  ExposedCommJson(out, r.exposed_by_class, r.exposed_comm);
  BusyByStreamJson(out, r.busy_by_stream);
  if (r.cpu > 0) Field(out, "cpu_ms_per_step", Ms(r.CpuInRun()));
  Field(out, "world_size", g.world_size);
  Field(out, "micro_batches", g.num_micro_batches);
  out += ", \"coverage\": {";
  double total = 0;
  for (double s : r.path_seconds) total += s;
  for (int p = 0; p < kNumEstimatePaths; ++p)
    Field(out, EstimatePathName(static_cast<EstimatePath>(p)),
          total > 0 ? r.path_seconds[p] / total : 0, p > 0);
  out += "}";
  if (fit) {
    out += ", \"fits\": ";
    out += fit->fits ? "true" : "false";
    Field(out, "memory_capacity_bytes", static_cast<double>(fit->capacity));
    out += ", \"memory_summary\": ";
    AppendJsonString(out, fit->Summary());
  }
  out += ", \"ranks\": [";
  for (size_t k = 0; k < r.ranks.size(); ++k) {
    const RankResult& rr = r.ranks[k];
    out += k ? ", {" : "{";
    Field(out, "rank", rr.rank, false);
    Field(out, "peak_bytes", static_cast<double>(rr.peak_bytes));
    Field(out, "persistent_bytes", static_cast<double>(rr.persistent_bytes));
    if (fit && k < fit->ranks.size()) {
      out += ", \"fits\": ";
      out += fit->ranks[k].fits ? "true" : "false";
      Field(out, "memory_need_bytes", static_cast<double>(fit->ranks[k].need));
    }
    Field(out, "compute_busy_ms", Ms(rr.compute_busy));
    ExposedCommJson(out, rr.exposed_by_class, rr.exposed_comm);
    Field(out, "bubble_ms", Ms(rr.bubble));
    OpenObject(out, "busy_ms");
    std::array<bool, kNumStreamTypes> used = StreamsInUse(g, rr.rank);
    bool first = true;
    for (int s = 0; s < kNumStreamTypes; ++s) {
      if (!used[s]) continue;
      Field(out, StreamName(s), Ms(rr.busy[s]), !first);
      first = false;
    }
    out += "}";
    BusyByStreamJson(out, rr.busy);
    out += "}";
  }
  out += "]}\n";
  return out;
}

std::string SimResultToTable(const SimResult& r, const SimGraph& g, const MemoryFit* fit) {
  std::string out;
  out += "step time     " + Format("%.3f", Ms(r.step_time)) + " ms\n";
  if (r.steady_steps > 1)
    out += "steady step   " + Format("%.3f", Ms(r.steady_step_time)) + " ms (" +
           std::to_string(r.steady_steps) + " steps back to back, no barrier between them)\n";
  if (fit) out += fit->Summary() + "\n";
  out += "bubble rate   " + Format("%.1f", 100 * r.bubble_rate) + " %\n";
  if (r.cpu > 0)
    out += "CPU           " + Format("%.3f", Ms(r.CpuInRun())) +
           " ms a step (the ranks' threads on their cores: ops, waits, spins, communication)\n";
  out += "exposed comm  " + Format("%.3f", Ms(r.exposed_comm)) + " ms (worst rank)\n";
  out += "  by kind     ";
  for (int c = 1; c < kNumCommClasses; ++c)
    out +=
        Format(c > 1 ? ", %s " : "%s ", ClassName(c)) + Format("%.3f", Ms(r.exposed_by_class[c]));
  out += " ms (worst rank each)\n\n";
  out += "busy time per stream\n" + BusyByStreamTable(r, g, fit) + "\n";
  out += "exposed communication by kind\n" + ExposedByClassTable(r);
  out += "(times in ms; total: the union of the kinds, which may overlap)\n";
  return out;
}

std::string CoverageTable(const SimResult& r) {
  double total = 0;
  for (double s : r.path_seconds) total += s;
  std::string out = "estimate path   share of estimated time\n";
  for (int p = 0; p < kNumEstimatePaths; ++p) {
    char line[128];
    std::snprintf(line, sizeof(line), "%-14s %8.1f %%  (%.3f ms)\n",
                  EstimatePathName(static_cast<EstimatePath>(p)),
                  total > 0 ? 100 * r.path_seconds[p] / total : 0.0, Ms(r.path_seconds[p]));
    out += line;
  }
  return out;
}

}  // namespace pw::cost
