// The Zero Bubble paper's Table 5 beside ours, priced from its Table 9 inputs, the time
// zb-auto takes on each configuration, and zb-auto's gap to the exact optimum (branch and
// bound) on small pipelines.
//
//   build/benchmarks/zero_bubble_table [NODE_LIMIT]

#include "tests/planning/zero_bubble_table.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "passes/pipeline/exact_schedule.h"

namespace pw::pipeline {
namespace {

double Rate(const zero_bubble::PaperRow& row, ScheduleKind kind, double mem_limit) {
  StatusOr<double> rate = zero_bubble::BubbleRate(row, kind, mem_limit);
  if (!rate.ok()) {
    std::fprintf(stderr, "%s\n", rate.status().message().c_str());
    std::exit(1);
  }
  return *rate;
}

// Median wall time of zb-auto at a row's shape and memory limit, in milliseconds.
double ZbAutoMillis(const zero_bubble::PaperRow& row, double mem_limit) {
  std::vector<double> times;
  for (int i = 0; i < 11; ++i) {
    auto start = std::chrono::steady_clock::now();
    Rate(row, ScheduleKind::kZbAuto, mem_limit);
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

void PrintTable5() {
  std::printf(
      "Table 5 (bubble rate; paper / ours). ZB-1p and ZB-2p: the paper's automatic "
      "schedule;\nours is zb-auto with --mem-limit p and 2p. Time: zb-auto's median wall "
      "time (search + simulation).\n");
  std::printf("%-6s %3s %4s | %-15s | %-15s | %-15s | %-15s | %-15s | %8s %8s\n", "model", "p", "m",
              "1F1B", "ZB-H1", "ZB-H2", "ZB-1p", "ZB-2p", "t(1p) ms", "t(2p) ms");
  for (const zero_bubble::PaperRow& row : zero_bubble::ReadPaperTable(PW_ZERO_BUBBLE_TABLE)) {
    auto cell = [](double paper, double ours) {
      static char buf[8][32];
      static int next = 0;
      char* b = buf[next++ % 8];
      std::snprintf(b, 32, "%.4f / %.4f", paper, zero_bubble::Round4(ours));
      return b;
    };
    const double p = row.p;
    std::printf("%-6s %3d %4d | %s | %s | %s | %s | %s | %8.2f %8.2f\n", row.model.c_str(), row.p,
                row.m, cell(row.one_f_one_b, Rate(row, ScheduleKind::k1F1B, 0)),
                cell(row.zb_h1, Rate(row, ScheduleKind::kZbH1, 0)),
                cell(row.zb_h2, Rate(row, ScheduleKind::kZbH2, 0)),
                cell(row.zb_1p, Rate(row, ScheduleKind::kZbAuto, p)),
                cell(row.zb_2p, Rate(row, ScheduleKind::kZbAuto, 2 * p)), ZbAutoMillis(row, p),
                ZbAutoMillis(row, 2 * p));
  }
}

void PrintExactGaps(int64_t node_limit) {
  std::printf(
      "\nzb-auto against the exact optimum (branch and bound, node limit %lld); costs of the "
      "1.5B row (F=18.522 B=18.086 W=9.337 comm=0.601) and unit costs (F=B=W=1 comm=0.1)\n",
      static_cast<long long>(node_limit));
  std::printf("%-6s %2s %2s %4s %10s %10s %7s %12s %9s %8s\n", "costs", "p", "m", "mem", "zb-auto",
              "exact", "gap %", "nodes", "seconds", "proven");
  for (bool measured : {true, false})
    for (int p : {2, 3, 4})
      for (int m = p; m <= 8; m += 2) {
        for (double mem : {1.0 * p, 2.0 * p}) {
          ScheduleSpec spec;
          spec.kind = ScheduleKind::kZbAuto;
          spec.num_stages = spec.num_ranks = p;
          spec.num_micro_batches = m;
          spec.mem_limit = mem;
          if (measured) {
            spec.costs.forward = 18.522;
            spec.costs.backward = 18.086;
            spec.costs.weight = 9.337;
            spec.costs.comm = 0.601;
          } else {
            spec.costs.comm = 0.1;
          }
          auto start = std::chrono::steady_clock::now();
          StatusOr<ExactResult> r = SolveExactSchedule(spec, node_limit);
          double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (!r.ok()) {
            std::fprintf(stderr, "%s\n", r.status().message().c_str());
            std::exit(1);
          }
          std::printf("%-6s %2d %2d %4g %10.3f %10.3f %7.2f %12lld %9.2f %8s\n",
                      measured ? "1.5B" : "unit", p, m, mem, r->start_cost, r->cost,
                      100 * (r->start_cost / r->cost - 1), static_cast<long long>(r->nodes),
                      seconds, r->optimal ? "yes" : "no");
          std::fflush(stdout);
        }
      }
}

}  // namespace
}  // namespace pw::pipeline

int main(int argc, char** argv) {
  pw::pipeline::PrintTable5();
  pw::pipeline::PrintExactGaps(argc > 1 ? std::atoll(argv[1]) : 300'000'000);
  return 0;
}
