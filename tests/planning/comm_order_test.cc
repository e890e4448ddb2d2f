// order-comm's search on the U-Net (pp 4, 6, 8) and on a 6-stage chain with the skip
// communications 1 -> 6 and 2 -> 5: never worse than the best fixed order that is valid
// under the semantics, strictly better on some, and always a plan the checker proves
// deadlock-free.

#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "comm_order_cases.h"
#include "passes/pipeline/comm_order_search.h"
#include "passes/pipeline/p2p_insertion.h"
#include "passes/pipeline/schedule_checker.h"
#include "planning_test_util.h"

namespace pw::pipeline {
namespace {

CommOrderOptions Options(CommSemantics semantics) {
  CommOrderOptions options;
  options.costs.comm = 0.5;
  options.semantics = semantics;
  return options;
}

// The search's result, checked: valid, and no worse than every valid fixed order. Returns
// how much it gained over the best fixed order.
double Gain(const ActionSchedule& compute, CommSemantics semantics, const char* name) {
  StatusOr<CommOrderResult> r = SearchCommOrder(compute, Options(semantics));
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return 0;
  CheckOptions check;
  check.semantics = semantics;
  SimulationOptions simulation;
  simulation.costs = Options(semantics).costs;
  StatusOr<TimedResult> timed = CheckAndSimulate(r->schedule, check, simulation);
  EXPECT_TRUE(timed.ok()) << timed.status().message();
  if (timed.ok()) EXPECT_NEAR(timed->makespan, r->makespan, 1e-9);
  double best_fixed = 1e300;
  std::printf("%s %s:", name, CommSemanticsName(semantics));
  for (const FixedOrderMakespan& f : r->fixed) {
    if (f.valid) best_fixed = std::min(best_fixed, f.makespan);
    if (f.valid) std::printf(" %s %.2f", f.order.c_str(), f.makespan);
    if (!f.valid) std::printf(" %s deadlocks", f.order.c_str());
  }
  std::printf(" | order-comm %.2f (%d evaluations, %d moves)\n", r->makespan, r->evaluations,
              r->accepted_moves);
  EXPECT_LE(r->makespan, best_fixed + 1e-9);
  return best_fixed - r->makespan;
}

TEST(OrderComm, UnetAndSixStageSkips) {
  double best_gain = 0;
  for (CommSemantics semantics : {CommSemantics::kRendezvous, CommSemantics::kEager}) {
    for (int pp : {4, 6, 8}) {
      StatusOr<ActionSchedule> unet = comm_order_cases::Unet(pp, 2 * pp);
      ASSERT_TRUE(unet.ok()) << unet.status().message();
      best_gain =
          std::max(best_gain, Gain(*unet, semantics, ("unet pp" + std::to_string(pp)).c_str()));
    }
    StatusOr<ActionSchedule> six = comm_order_cases::SixStagesWithSkips(8);
    ASSERT_TRUE(six.ok()) << six.status().message();
    best_gain = std::max(best_gain, Gain(*six, semantics, "6 stages"));
  }
  EXPECT_GT(best_gain, 0.1);
}

// On Megatron's own schedules its placement is one more start (interleaved 1F1B: valid under
// blocking p2p); on a zero-bubble schedule, which it does not place, it is no start at all.
TEST(OrderComm, MegatronsPlacementStartsTheSearchOnItsSchedules) {
  auto starts = [](ScheduleKind kind, int chunks) {
    ActionSchedule compute = testing::Generate(testing::Spec(kind, 4, 8, chunks));
    CommOrderOptions options = Options(CommSemantics::kRendezvous);
    options.costs.backward = 2;
    options.max_evaluations = 50;
    StatusOr<CommOrderResult> r = SearchCommOrder(compute, options);
    EXPECT_TRUE(r.ok()) << r.status().message();
    std::map<std::string, bool> valid;
    if (r.ok())
      for (const FixedOrderMakespan& f : r->fixed) valid[f.order] = f.valid;
    return valid;
  };
  std::map<std::string, bool> interleaved = starts(ScheduleKind::kInterleaved1F1B, 2);
  ASSERT_TRUE(interleaved.count("megatron"));
  EXPECT_TRUE(interleaved.at("megatron"));
  EXPECT_EQ(starts(ScheduleKind::kZbH1, 1).count("megatron"), 0u);
}

// The pass on the U-Net module: the plan gets its sends and recvs, checks under rendezvous
// semantics, and simulates no slower than insert-p2p's best fixed order.
TEST(OrderComm, PassLowersTheUnetPlan) {
  models::UnetConfig config;
  config.layers = 12;
  config.hidden = 8;
  config.seq = 4;
  config.vocab = 16;
  config.pp = 6;
  StatusOr<Module> m = models::BuildUnet(config);
  ASSERT_TRUE(m.ok()) << m.status().message();
  PassManager manager;
  ASSERT_TRUE(manager
                  .AddPipeline("append-backward,split-program,schedule{kind=1f1b,micro-batches="
                               "12},order-comm{F=1,B=1,W=1,comm=0.5}")
                  .ok());
  StatusOr<bool> changed = manager.Run(*m);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  StatusOr<ActionSchedule> lowered = PlanToActionSchedule(m->plan);
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_TRUE(lowered->HasComms());
  StatusOr<ModuleStages> stages = ReadModuleStages(*m);
  ASSERT_TRUE(stages.ok());
  lowered->skip_edges = stages->skip_edges;
  CheckOptions check;
  check.semantics = CommSemantics::kRendezvous;
  SimulationOptions simulation;
  simulation.costs.comm = 0.5;
  StatusOr<TimedResult> timed = CheckAndSimulate(*lowered, check, simulation);
  ASSERT_TRUE(timed.ok()) << timed.status().message();
  StatusOr<ActionSchedule> unet = comm_order_cases::Unet(6, 12);
  ASSERT_TRUE(unet.ok());
  StatusOr<ActionSchedule> batched = InsertP2P(*unet, {P2POrder::kBatched});
  ASSERT_TRUE(batched.ok());
  StatusOr<TimedResult> fixed = CheckAndSimulate(*batched, check, simulation);
  ASSERT_TRUE(fixed.ok());
  EXPECT_LT(timed->makespan, fixed->makespan);
}

// The pass's bad inputs: no plan yet, a plan already lowered by insert-p2p, an unknown
// semantics; each one error line.
TEST(OrderComm, PassRefusesWhatItCannotLower) {
  models::UnetConfig config;
  config.layers = 8;
  config.hidden = 8;
  config.seq = 4;
  config.vocab = 16;
  config.pp = 4;
  auto run = [&](const std::string& pipeline) {
    StatusOr<Module> m = models::BuildUnet(config);
    EXPECT_TRUE(m.ok());
    PassManager manager;
    Status added = manager.AddPipeline(pipeline);
    if (!added.ok()) return added;
    return manager.Run(*m).status();
  };
  Status st = run("append-backward,split-program,order-comm");
  EXPECT_NE(st.message().find("has no plan"), std::string::npos) << st.message();
  st =
      run("append-backward,split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p,"
          "order-comm{F=1,B=1,W=1,comm=0.5}");
  EXPECT_NE(st.message().find("instead of insert-p2p"), std::string::npos) << st.message();
  st =
      run("append-backward,split-program,schedule{kind=1f1b,micro-batches=4},"
          "order-comm{semantics=blocking}");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
}

TEST(OrderComm, RefusesALoweredPlan) {
  StatusOr<ActionSchedule> six = comm_order_cases::SixStagesWithSkips(8);
  ASSERT_TRUE(six.ok());
  StatusOr<ActionSchedule> lowered = InsertP2P(*six, {P2POrder::kNaive});
  ASSERT_TRUE(lowered.ok());
  StatusOr<CommOrderResult> r = SearchCommOrder(*lowered, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("instead of insert-p2p"), std::string::npos);
}

}  // namespace
}  // namespace pw::pipeline
