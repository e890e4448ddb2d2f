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

}  // namespace
}  // namespace pw::pipeline
