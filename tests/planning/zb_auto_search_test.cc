// zb-auto's shortcuts (skipping variants that decide alike, stopping a run whose work
// left or drain bound cannot win) keep the best makespan of all its variants: the search
// equals every variant run to its end, on the Zero Bubble paper's configurations and on
// small pipelines with other costs, memory limits, W memory shares and placements.

#include <gtest/gtest.h>

#include "planning_test_util.h"
#include "zero_bubble_table.h"

namespace pw::pipeline {
namespace {

// The makespan of a generator's schedule, or the generator's error.
StatusOr<double> Makespan(const ScheduleSpec& spec,
                          StatusOr<ActionSchedule> (*generate)(const ScheduleSpec&)) {
  PW_ASSIGN_OR_RETURN(ActionSchedule schedule, generate(spec));
  SimulationOptions options;
  options.costs = spec.costs;
  PW_ASSIGN_OR_RETURN(TimedResult timed, SimulateTimed(schedule, options));
  return timed.cost;
}

void ExpectSameAsExhaustive(const ScheduleSpec& spec) {
  StatusOr<double> fast = Makespan(spec, GenerateZbAuto);
  StatusOr<double> full = Makespan(spec, GenerateZbAutoExhaustive);
  ASSERT_EQ(fast.ok(), full.ok()) << (fast.ok() ? full : fast).status().message();
  if (fast.ok()) EXPECT_NEAR(*fast, *full, 1e-9);
}

TEST(ZbAutoSearch, EqualsEveryVariantRunOnThePapersConfigurations) {
  for (const zero_bubble::PaperRow& row :
       zero_bubble::ReadPaperTable(testing::DataPath("zero_bubble_table5.csv")))
    for (int mem : {1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << row.model << " p=" << row.p << " m=" << row.m << " mem=" << mem << "p");
      ScheduleSpec spec = testing::Spec(ScheduleKind::kZbAuto, row.p, row.m);
      spec.costs = row.costs;
      spec.mem_limit = mem * row.p;
      ExpectSameAsExhaustive(spec);
    }
}

TEST(ZbAutoSearch, EqualsEveryVariantRunOnSmallPipelines) {
  struct Costs {
    double f, b, w, comm;
  };
  for (Costs c : {Costs{1, 1, 1, 0}, Costs{1, 1, 0.5, 0.1}, Costs{2, 1, 3, 0.3}})
    for (double w_mem : {0.0, 0.3, 0.5, 1.0})
      for (int chunks : {1, 2})
        for (int p : {2, 4, 6})
          for (int m : {p, 2 * p + 1, 4 * p})
            for (double mem : {0.5, 1.0, 1.5, 2.0}) {
              SCOPED_TRACE(::testing::Message()
                           << "F=" << c.f << " B=" << c.b << " W=" << c.w << " comm=" << c.comm
                           << " w_mem=" << w_mem << " chunks=" << chunks << " p=" << p << " m=" << m
                           << " mem=" << mem << "p");
              ScheduleSpec spec = testing::Spec(ScheduleKind::kZbAuto, p, m, chunks);
              if (chunks == 2) spec.placement = StagePlacement::kV;
              spec.costs.forward = c.f;
              spec.costs.backward = c.b;
              spec.costs.weight = c.w;
              spec.costs.comm = c.comm;
              spec.costs.w_mem = w_mem;
              spec.mem_limit = mem * p * chunks;
              ExpectSameAsExhaustive(spec);
            }
}

// The paper's ZB-1p is never worse than ZB-H1: where the limit holds ZB-H1 (p M_B),
// zb-auto's schedule is at least as good on its longest rank span and, at an equal span, on
// its makespan; with thin first and last stages (one layer fewer, as the paper's runs) too.
TEST(ZbAutoSearch, NeverWorseThanZbH1WhereTheLimitHoldsIt) {
  for (const zero_bubble::PaperRow& row :
       zero_bubble::ReadPaperTable(testing::DataPath("zero_bubble_table5.csv")))
    for (bool thin_ends : {false, true}) {
      SCOPED_TRACE(::testing::Message() << row.model << " p=" << row.p << " m=" << row.m
                                        << (thin_ends ? " thin ends" : ""));
      ScheduleSpec spec = testing::Spec(ScheduleKind::kZbAuto, row.p, row.m);
      spec.costs = row.costs;
      spec.mem_limit = row.p;
      if (thin_ends) {
        spec.costs.stage_scale.assign(row.p, 1.0);
        spec.costs.stage_scale.front() = spec.costs.stage_scale.back() = 0.5;
      }
      ScheduleSpec h1 = spec;
      h1.kind = ScheduleKind::kZbH1;
      auto timed = [&](const ActionSchedule& schedule) {
        SimulationOptions options;
        options.costs = spec.costs;
        StatusOr<TimedResult> t = SimulateTimed(schedule, options);
        EXPECT_TRUE(t.ok()) << t.status().message();
        return t.ok() ? *t : TimedResult{};
      };
      StatusOr<ActionSchedule> automatic = GenerateZbAuto(spec);
      ASSERT_TRUE(automatic.ok()) << automatic.status().message();
      const TimedResult a = timed(*automatic), b = timed(GenerateOneFOneB(h1));
      EXPECT_LE(a.cost, b.cost + 1e-9);
      if (a.cost > b.cost - 1e-9) EXPECT_LE(a.makespan, b.makespan + 1e-9);
    }
}

}  // namespace
}  // namespace pw::pipeline
