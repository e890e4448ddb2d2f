// The exact search (branch and bound) on small pipelines: it proves its optimum within the
// node limit, its schedule is valid and simulates to the cost it reports, it is never
// worse than zb-auto, where the optimum is known (zero bubble) it finds it, and zb-auto
// reaches it on small pipelines with the paper's costs.

#include <gtest/gtest.h>

#include <cstdio>

#include "passes/pipeline/exact_schedule.h"
#include "passes/pipeline/schedule_checker.h"
#include "planning_test_util.h"
#include "simulator/action_simulator.h"

namespace pw::pipeline {
namespace {

ScheduleSpec SmallSpec(int p, int m, double mem_limit, ActionCosts costs) {
  ScheduleSpec spec = testing::Spec(ScheduleKind::kZbAuto, p, m);
  spec.mem_limit = mem_limit;
  spec.costs = costs;
  return spec;
}

ExactResult Solve(const ScheduleSpec& spec) {
  StatusOr<ExactResult> r = SolveExactSchedule(spec, 20'000'000);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {};
  EXPECT_TRUE(r->optimal) << r->nodes << " nodes";
  EXPECT_LE(r->cost, r->start_cost + 1e-9);
  CheckOptions check;
  check.mem_limit = spec.mem_limit;
  check.w_mem = spec.costs.w_mem;
  Status valid = CheckSchedule(r->schedule, check);
  EXPECT_TRUE(valid.ok()) << valid.message();
  SimulationOptions options;
  options.costs = spec.costs;
  StatusOr<TimedResult> timed = SimulateTimed(r->schedule, options);
  EXPECT_TRUE(timed.ok());
  if (timed.ok()) EXPECT_NEAR(timed->cost, r->cost, 1e-9);
  return *r;
}

// F = B = W and no comm: with 2p M_B every rank can be kept busy from its first forward
// to its last W (the ZB-H2 picture), so the optimum is 3m on every rank.
TEST(ZeroBubbleExact, FindsTheZeroBubbleOptimum) {
  for (int p : {2, 3}) {
    SCOPED_TRACE(::testing::Message() << "p=" << p);
    ExactResult r = Solve(SmallSpec(p, 2 * p, 2 * p, ActionCosts{}));
    EXPECT_DOUBLE_EQ(r.cost, 3 * 2 * p);
  }
}

// Started from 1F1B's cost the search must find the better schedules on its own, and
// reach the same optimum as from zb-auto's.
TEST(ZeroBubbleExact, ImprovesOnAWeakStart) {
  ActionCosts costs;
  costs.comm = 0.1;
  for (int p : {2, 3, 4}) {
    SCOPED_TRACE(::testing::Message() << "p=" << p);
    ScheduleSpec spec = SmallSpec(p, p + 2, p, costs);
    ExactResult from_auto = Solve(spec);
    spec.kind = ScheduleKind::k1F1B;
    ExactResult from_1f1b = Solve(spec);
    EXPECT_LT(from_1f1b.cost, from_1f1b.start_cost - 1);
    EXPECT_NEAR(from_1f1b.cost, from_auto.cost, 1e-9);
  }
}

TEST(ZeroBubbleExact, ReportsTheRefusedShapes) {
  ScheduleSpec spec = SmallSpec(2, 4, 4, ActionCosts{});
  spec.num_stages = 4;
  spec.placement = Placement::kLoop;
  EXPECT_FALSE(SolveExactSchedule(spec, 1000).ok());
  spec = SmallSpec(2, 40, 4, ActionCosts{});
  EXPECT_FALSE(SolveExactSchedule(spec, 1000).ok());
}

// The measured costs of the paper's 1.5B model (its Table 9, p=8 m=24) on small pipelines:
// zb-auto's schedule is optimal on every one (the exact search proves it finds nothing
// better).
TEST(ZeroBubbleExact, ZbAutoIsOptimalOnSmallPipelines) {
  ActionCosts costs;
  costs.forward = 18.522;
  costs.backward = 18.086;
  costs.weight = 9.337;
  costs.comm = 0.601;
  for (int p : {2, 3, 4})
    for (int m : {p, p + 2})
      for (double mem : {1.0 * p, 2.0 * p}) {
        SCOPED_TRACE(::testing::Message() << "p=" << p << " m=" << m << " mem=" << mem);
        ScheduleSpec spec = SmallSpec(p, m, mem, costs);
        ExactResult r = Solve(spec);
        std::printf("p=%d m=%d mem=%g: zb-auto %.3f exact %.3f gap %.2f%% (%lld nodes)\n", p, m,
                    mem, r.start_cost, r.cost, 100 * (r.start_cost / r.cost - 1),
                    static_cast<long long>(r.nodes));
        EXPECT_NEAR(r.start_cost, r.cost, 1e-9 * r.cost);
      }
}

}  // namespace
}  // namespace pw::pipeline
