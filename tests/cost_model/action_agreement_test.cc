// The op-level simulator agrees with the planning issue's action-level simulator
// (simulator/action_simulator.h) on a synthetic pipeline whose every op costs its stage's
// F or B: one scale op per forward and per backward program, send/recv for every crossing.

#include <gtest/gtest.h>

#include "ir/plan_actions.h"
#include "passes/pipeline/p2p_insertion.h"
#include "passes/pipeline/schedule_generators.h"
#include "sim_test_util.h"
#include "simulator/action_simulator.h"

namespace pw::cost {
namespace {

using namespace testing;

constexpr double kF = 2e-3;       // forward: scale over [2] -> 2 ms
constexpr double kB = 3e-3;       // backward: scale over [3] -> 3 ms
constexpr double kComm = 0.5e-3;  // the test device's transfer latency

std::string Name(const char* kind, int s) { return StrCat(kind, "_", s); }

// Stage s: forward a_s -> a_{s+1}; backward g_{s+1} -> g_s. The last stage's backward
// starts from `seed` (on the compute stream it still runs after its forward, in plan order).
Module SyntheticPipeline(int stages) {
  Module m;
  m.name = "synthetic";
  m.mesh.pp = stages;
  for (int s = 0; s < stages; ++s) {
    std::string in = Name("a", s), out = Name("a", s + 1);
    m.AddProgram(
        MakeProgram(Name("fwd", s), "forward", s, {F32(in, 2), F32(out, 2)}, {Scale(in, out)}));
  }
  for (int s = 0; s < stages; ++s) {
    std::string from = s + 1 == stages ? "seed" : Name("g", s + 1);
    m.AddProgram(MakeProgram(Name("bwd", s), "backward", s, {F32(from, 3), F32(Name("g", s), 3)},
                             {Scale(from, Name("g", s))}));
  }
  return m;
}

struct Case {
  pipeline::ScheduleKind kind;
  int stages;
  int micro_batches;
};

void ExpectAgreement(const Case& c) {
  pipeline::ScheduleSpec spec;
  spec.kind = c.kind;
  spec.num_stages = c.stages;
  spec.num_ranks = c.stages;
  spec.num_micro_batches = c.micro_batches;
  auto compute = pipeline::GenerateSchedule(spec);
  ASSERT_TRUE(compute.ok()) << compute.status().message();
  auto with_comms = pipeline::InsertP2P(*compute, pipeline::P2POptions{});
  ASSERT_TRUE(with_comms.ok()) << with_comms.status().message();

  SimulationOptions options;
  options.costs.forward = kF;
  options.costs.backward = kB;
  options.costs.weight = 0;
  options.costs.comm = kComm;
  auto expected = SimulateTimed(*with_comms, options);
  ASSERT_TRUE(expected.ok()) << expected.status().message();

  Module m = SyntheticPipeline(c.stages);
  PlanNaming naming;
  naming.program = [](JobKind kind, int stage) {
    return kind == JobKind::kForward ? Name("fwd", stage) : Name("bwd", stage);
  };
  m.plan = ActionScheduleToPlan(*with_comms, "synthetic", naming);
  m.plan.num_micro_batches = c.micro_batches;

  Simulator sim(ScaleCostEstimator(m), ops::Registry());
  auto got = sim.Run(m);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_NEAR(got->step_time, expected->makespan, 1e-9)
      << pipeline::ScheduleKindName(c.kind) << " P=" << c.stages << " M=" << c.micro_batches;
  for (int r = 0; r < c.stages; ++r)
    EXPECT_NEAR(got->ranks[r].compute_busy, expected->ranks[r].busy, 1e-9) << "rank " << r;
}

TEST(ActionAgreement, OneFOneBMatchesTheActionSimulator) {
  ExpectAgreement({pipeline::ScheduleKind::k1F1B, 4, 8});
  ExpectAgreement({pipeline::ScheduleKind::k1F1B, 2, 5});
}

TEST(ActionAgreement, FThenBMatchesTheActionSimulator) {
  ExpectAgreement({pipeline::ScheduleKind::kFThenB, 4, 8});
}

}  // namespace
}  // namespace pw::cost
