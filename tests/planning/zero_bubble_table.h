#pragma once
// The Zero Bubble paper's Table 5 (bubble rates of its schedules) with the Table 9 inputs
// they were priced from (measured F, B, W and comm per configuration), read from
// tests/planning/data/zero_bubble_table5.csv, and our schedules priced the same way. Shared
// by the Table 5 test and the zero_bubble_table benchmark.

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "passes/pipeline/schedule_generators.h"
#include "simulator/action_simulator.h"

namespace pw::pipeline::zero_bubble {

struct PaperRow {
  std::string model;
  int p = 0, m = 0;
  ActionCosts costs;
  // Table 5: 1F1B, 1F1B-I, ZB-H1, ZB-H2, ZB-1p, ZB-2p.
  double one_f_one_b = 0, interleaved = 0, zb_h1 = 0, zb_h2 = 0, zb_1p = 0, zb_2p = 0;
};

inline std::vector<PaperRow> ReadPaperTable(const std::string& path) {
  std::vector<PaperRow> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream cells(line);
    PaperRow r;
    cells >> r.model >> r.p >> r.m >> r.costs.forward >> r.costs.backward >> r.costs.weight >>
        r.costs.comm >> r.one_f_one_b >> r.interleaved >> r.zb_h1 >> r.zb_h2 >> r.zb_1p >> r.zb_2p;
    if (cells) rows.push_back(r);
  }
  return rows;
}

// The paper's bubble rate, (cost - m(F+B+W)) / cost with cost the longest per-rank span,
// of one of our kinds on a row's configuration; mem_limit in M_B (0: the kind's default).
inline StatusOr<double> BubbleRate(const PaperRow& row, ScheduleKind kind, double mem_limit) {
  ScheduleSpec spec;
  spec.kind = kind;
  spec.num_stages = spec.num_ranks = row.p;
  spec.num_micro_batches = row.m;
  spec.costs = row.costs;
  spec.mem_limit = mem_limit;
  PW_ASSIGN_OR_RETURN(ActionSchedule schedule, GenerateSchedule(spec));
  SimulationOptions options;
  options.costs = row.costs;
  PW_ASSIGN_OR_RETURN(TimedResult timed, SimulateTimed(schedule, options));
  return timed.bubble_rate;
}

// Rounded as the paper prints its rates.
inline double Round4(double rate) { return std::round(rate * 1e4) / 1e4; }

}  // namespace pw::pipeline::zero_bubble
