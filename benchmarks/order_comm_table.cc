// order-comm against the fixed send/recv orders: simulated makespans side by side for the
// U-Net at pp 4, 6, 8 (1F1B, 2*pp micro-batches) and the 6-stage chain with the skip
// communications 1 -> 6 and 2 -> 5 (8 micro-batches), F = B = W = 1 and comm 0.5, under
// rendezvous (NCCL) and eager semantics, with the search's wall time.
//
//   build/benchmarks/order_comm_table

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "passes/pipeline/comm_order_search.h"
#include "tests/planning/comm_order_cases.h"

namespace pw::pipeline {
namespace {

void Row(const std::string& name, const StatusOr<ActionSchedule>& compute,
         CommSemantics semantics) {
  if (!compute.ok()) {
    std::fprintf(stderr, "%s\n", compute.status().message().c_str());
    std::exit(1);
  }
  CommOrderOptions options;
  options.costs.comm = 0.5;
  options.semantics = semantics;
  auto start = std::chrono::steady_clock::now();
  StatusOr<CommOrderResult> r = SearchCommOrder(*compute, options);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.status().message().c_str());
    std::exit(1);
  }
  std::printf("%-10s %-10s", name.c_str(), CommSemanticsName(semantics));
  double best = 1e300;
  for (const FixedOrderMakespan& f : r->fixed) {
    if (f.valid) {
      std::printf(" %9.2f", f.makespan);
      best = std::min(best, f.makespan);
    } else {
      std::printf(" %9s", "deadlock");
    }
  }
  std::printf(" %10.2f %7.3f %-8s %6d %5d %9.1f\n", r->makespan, r->makespan / best,
              r->start.c_str(), r->evaluations, r->accepted_moves, ms);
}

}  // namespace
}  // namespace pw::pipeline

int main() {
  using namespace pw::pipeline;
  std::printf("%-10s %-10s %9s %9s %9s %10s %7s %-8s %6s %5s %9s\n", "case", "semantics", "naive",
              "parity", "batched", "order-comm", "ratio", "start", "evals", "moves", "search ms");
  for (pw::CommSemantics semantics : {pw::CommSemantics::kRendezvous, pw::CommSemantics::kEager}) {
    for (int pp : {4, 6, 8})
      Row("unet pp" + std::to_string(pp), comm_order_cases::Unet(pp, 2 * pp), semantics);
    Row("6-stage", comm_order_cases::SixStagesWithSkips(8), semantics);
  }
  return 0;
}
