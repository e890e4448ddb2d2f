// The simulator orders a plan the way the executor does: the plan's events, and an edge of
// its own for every cross-stream dependency they leave open. After insert-events there is
// none left to add; and the column-parallel overlap hides the backward all-reduces it moves.

#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "passes/pass_manager.h"
#include "simulator/simulator.h"

namespace pw::cost {
namespace {

Module PlannedGpt(int hidden, int seq, const std::string& extra) {
  models::GptConfig g;
  g.layers = 4;
  g.hidden = hidden;
  g.heads = 8;
  g.ffn = 4 * hidden;
  g.seq = seq;
  g.vocab = 1024;
  g.micro_batch_size = 1;
  g.mp = 2;
  g.pp = 2;
  auto built = models::BuildGpt(g);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  Module m = std::move(built).value();
  PassManager pm;
  EXPECT_TRUE(pm.AddPipeline("append-backward{optimizer=adam},split-program,"
                             "schedule{kind=1f1b,micro-batches=8},insert-p2p" +
                             extra)
                  .ok());
  auto ran = pm.Run(m);
  EXPECT_TRUE(ran.ok()) << ran.status().ToString();
  return m;
}

constexpr const char* kOverlap = ",assign-streams,overlap-column-parallel-backward,insert-events";

TEST(SimEventsTest, AfterInsertEventsTheSimulatorAddsNoOrderingOfItsOwn) {
  auto estimator = MakeEstimator("h100", "");
  ASSERT_TRUE(estimator.ok()) << estimator.status().ToString();
  Module plain = PlannedGpt(256, 64, "");
  Module overlapped = PlannedGpt(256, 64, kOverlap);
  auto a = BuildSimGraph(plain, **estimator, ops::Registry());
  auto b = BuildSimGraph(overlapped, **estimator, ops::Registry());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(a->auto_events, 0);  // every send, recv and their readers
  EXPECT_EQ(b->auto_events, 0);
  EXPECT_EQ(a->instrs.size(), b->instrs.size());  // the same work
}

TEST(SimEventsTest, TheColumnParallelOverlapHidesTheBackwardAllReduces) {
  auto estimator = MakeEstimator("h100", "");
  ASSERT_TRUE(estimator.ok()) << estimator.status().ToString();
  Simulator simulator(*estimator, ops::Registry());
  auto a = simulator.Run(PlannedGpt(2048, 1024, ""));
  auto b = simulator.Run(PlannedGpt(2048, 1024, kOverlap));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const int backward = static_cast<int>(CommClass::kMpBackward);
  const int forward = static_cast<int>(CommClass::kMpForward);
  EXPECT_GT(a->exposed_by_class[backward], 0);
  EXPECT_LT(b->exposed_by_class[backward], 0.1 * a->exposed_by_class[backward]);
  // The forward all-reduces have nothing to hide under: still exposed.
  EXPECT_GT(b->exposed_by_class[forward], 0.5 * a->exposed_by_class[forward]);
  EXPECT_LT(b->step_time, a->step_time);
}

// insert-p2p{wait=exchange}: every compute op that opens a job after an exchange waits for
// the exchange's sends too (Megatron's waits on every request of a batch), which a plan
// whose jobs wait only for what they read lets finish in the background.
TEST(SimEventsTest, BlockingExchangesHoldTheNextJobUntilEverySendIsDone) {
  auto estimator = MakeEstimator("a100", "");
  ASSERT_TRUE(estimator.ok()) << estimator.status().ToString();
  auto sends_waited_on = [&](const Module& m) {
    auto g = BuildSimGraph(m, **estimator, ops::Registry());
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    std::set<int> sends, waited;
    for (size_t i = 0; i < g->instrs.size(); ++i) {
      const SimInstr& in = g->instrs[i];
      if (in.kind == InstrKind::kSend) sends.insert(static_cast<int>(i));
      if (in.stream != StreamType::kCompute) continue;
      for (int d : in.deps)
        if (g->instrs[d].kind == InstrKind::kSend && g->instrs[d].rank == in.rank) waited.insert(d);
    }
    EXPECT_FALSE(sends.empty());
    return std::pair{sends.size(), waited.size()};
  };
  const Module background = PlannedGpt(2048, 1024, "{order=batched}");
  const Module blocking = PlannedGpt(2048, 1024, "{order=batched,wait=exchange}");
  EXPECT_EQ(sends_waited_on(background).second, 0u);
  const auto [sends, waited] = sends_waited_on(blocking);
  EXPECT_EQ(waited, sends);
  SimOptions options;
  options.rendezvous_p2p = true;
  Simulator simulator(*estimator, ops::Registry(), options);
  auto a = simulator.Run(background);
  auto b = simulator.Run(blocking);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_GT(b->step_time, a->step_time);
}

// scatter-gather-p2p: each of the mp = 2 ranks of a stage sends half of what it sent whole,
// and the receivers all-gather over mp.
TEST(SimEventsTest, ScatterGatherSendsOneSliceAPeerAndGathersItOverMp) {
  auto estimator = MakeEstimator("a100", "");
  ASSERT_TRUE(estimator.ok()) << estimator.status().ToString();
  auto sent = [&](const Module& m) {
    auto g = BuildSimGraph(m, **estimator, ops::Registry());
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    double bytes = 0;
    int gathers = 0;
    for (const SimInstr& in : g->instrs) {
      if (in.kind == InstrKind::kSend) bytes += in.bytes;
      gathers += in.name == "c_all_gather";
    }
    return std::pair{bytes, gathers};
  };
  const auto [whole, none] = sent(PlannedGpt(2048, 1024, "{order=batched}"));
  const auto [sliced, gathers] = sent(PlannedGpt(2048, 1024, "{order=batched},scatter-gather-p2p"));
  EXPECT_EQ(none, 0);
  EXPECT_GT(gathers, 0);
  EXPECT_DOUBLE_EQ(sliced, whole / 2);
}

}  // namespace
}  // namespace pw::cost
