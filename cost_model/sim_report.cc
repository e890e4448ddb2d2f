#include "cost_model/sim_report.h"

#include <cstdio>

#include "cost_model/chrome_trace.h"

namespace pw::cost {
namespace {

std::array<bool, kNumStreamTypes> StreamsInUse(const SimGraph& g, int rank) {
  std::array<bool, kNumStreamTypes> used{};
  for (int i : g.rank_order[rank]) used[static_cast<int>(g.instrs[i].stream)] = true;
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

std::string MiB(int64_t bytes) { return Format("%.2f", bytes / (1024.0 * 1024.0)); }

}  // namespace

std::string SimResultToJson(const SimResult& r, const SimGraph& g) {
  std::string out = "{";
  Field(out, "step_time_ms", Ms(r.step_time), false);
  Field(out, "bubble_rate", r.bubble_rate);
  Field(out, "exposed_comm_ms", Ms(r.exposed_comm));
  Field(out, "world_size", g.world_size);
  Field(out, "micro_batches", g.num_micro_batches);
  out += ", \"coverage\": {";
  double total = 0;
  for (double s : r.path_seconds) total += s;
  for (int p = 0; p < kNumEstimatePaths; ++p)
    Field(out, EstimatePathName(static_cast<EstimatePath>(p)),
          total > 0 ? r.path_seconds[p] / total : 0, p > 0);
  out += "}, \"ranks\": [";
  for (size_t k = 0; k < r.ranks.size(); ++k) {
    const RankResult& rr = r.ranks[k];
    out += k ? ", {" : "{";
    Field(out, "rank", rr.rank, false);
    Field(out, "peak_bytes", static_cast<double>(rr.peak_bytes));
    Field(out, "persistent_bytes", static_cast<double>(rr.persistent_bytes));
    Field(out, "compute_busy_ms", Ms(rr.compute_busy));
    Field(out, "exposed_comm_ms", Ms(rr.exposed_comm));
    Field(out, "bubble_ms", Ms(rr.bubble));
    out += ", \"busy_ms\": {";
    std::array<bool, kNumStreamTypes> used = StreamsInUse(g, rr.rank);
    bool first = true;
    for (int s = 0; s < kNumStreamTypes; ++s) {
      if (!used[s]) continue;
      Field(out, StreamTypeName(static_cast<StreamType>(s)), Ms(rr.busy[s]), !first);
      first = false;
    }
    out += "}}";
  }
  out += "]}\n";
  return out;
}

std::string SimResultToTable(const SimResult& r, const SimGraph& g) {
  std::string out;
  out += "step time     " + Format("%.3f", Ms(r.step_time)) + " ms\n";
  out += "bubble rate   " + Format("%.1f", 100 * r.bubble_rate) + " %\n";
  out += "exposed comm  " + Format("%.3f", Ms(r.exposed_comm)) + " ms (worst rank)\n\n";
  char line[256];
  std::snprintf(line, sizeof(line), "%-5s %10s %10s %10s %10s %10s %10s %10s %10s %9s\n", "rank",
                "compute", "mp_comm", "pp_send", "pp_recv", "dp_comm", "exposed", "bubble", "end",
                "peak MiB");
  out += line;
  for (const RankResult& rr : r.ranks) {
    std::array<bool, kNumStreamTypes> used = StreamsInUse(g, rr.rank);
    std::snprintf(line, sizeof(line), "%-5d", rr.rank);
    out += line;
    for (int s = 0; s < kNumStreamTypes; ++s)
      out += used[s] ? Format(" %10.3f", Ms(rr.busy[s])) : std::string("          -");
    out += Format(" %10.3f", Ms(rr.exposed_comm)) + Format(" %10.3f", Ms(rr.bubble)) +
           Format(" %10.3f", Ms(rr.end));
    std::snprintf(line, sizeof(line), " %9s\n", MiB(rr.peak_bytes).c_str());
    out += line;
  }
  out += "(busy, exposed, bubble and end in ms)\n";
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
