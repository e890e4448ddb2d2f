// Plans across ranks, with ranks as threads of this process (the in-process transport):
// point-to-point jobs between pipeline stages, collectives in mp groups, and the plan
// check that refuses a send without its recv.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "executor/comm/in_process_comm.h"
#include "executor/interpreter.h"
#include "test_plans.h"

namespace pw::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Two stages: stage 0 doubles x into h, stage 1 computes loss = h + h. Forward only; each
// micro-batch is sent as soon as it is ready, fthenb style.
Module TwoStageModule(int micro_batches, bool drop_last_recv = false) {
  Module m;
  m.mesh.pp = 2;
  m.AddProgram(MakeProgram("f0", "forward", 0, {F32("x"), F32("h")},
                           {{"t_double", {{"X", {"x"}}}, {{"Out", {"h"}}}}}));
  m.AddProgram(MakeProgram("f1", "forward", 1, {F32("h"), F32("loss")},
                           {{"t_add", {{"X", {"h"}}, {"Y", {"h"}}}, {{"Out", {"loss"}}}}}));
  m.plan.num_micro_batches = micro_batches;
  m.plan.num_stages = 2;
  m.plan.stage_to_rank = {0, 1};
  RankPlan r0{0, {}}, r1{1, {}};
  for (int mb = 0; mb < micro_batches; ++mb) {
    r0.jobs.push_back(MakeJob(JobKind::kForward, 0, mb, "f0"));
    r0.jobs.push_back(MakeJob(JobKind::kSendF, 0, mb, "f0", 1));
    if (!(drop_last_recv && mb == micro_batches - 1))
      r1.jobs.push_back(MakeJob(JobKind::kRecvF, 1, mb, "f1", 0));
    r1.jobs.push_back(MakeJob(JobKind::kForward, 1, mb, "f1"));
  }
  m.plan.ranks = {r0, r1};
  return m;
}

// Runs `steps` steps on every rank of `module`, each rank a thread; returns each rank's
// losses of the last step.
std::vector<std::vector<double>> RunRanks(const Module& module, int steps,
                                          std::function<float(int rank, int mb)> value) {
  const int world = module.mesh.world_size();
  InProcessHub hub(module.mesh);
  std::vector<std::vector<double>> losses(world);
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      auto factory = hub.FactoryFor(rank);
      cpu::CpuBackend backend(TestBackendOptions(factory.get()));
      InterpreterOptions options;
      options.lowering.feeds = {"x"};
      options.lowering.loss = "loss";
      auto interp = Interpreter::Create(module, rank, backend, options);
      if (!interp.ok()) {
        errors[rank] = interp.status().ToString();
        hub.Abort(errors[rank]);
        return;
      }
      auto feed = [&](const std::string&, int mb) -> StatusOr<Tensor> {
        Tensor t(DataType::kFloat32, {1});
        t.Fill(value(rank, mb));
        return t;
      };
      for (int s = 0; s < steps; ++s) {
        auto stats = (*interp)->RunStep(feed);
        if (!stats.ok()) {
          errors[rank] = stats.status().ToString();
          hub.Abort(errors[rank]);
          return;
        }
        losses[rank] = stats->losses;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < world; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
  return losses;
}

TEST(PipelineTest, TwoStagesSendActivationsForward) {
  auto losses = RunRanks(TwoStageModule(4), 3, [](int, int mb) { return mb + 1.0f; });
  EXPECT_TRUE(losses[0].empty());  // stage 0 computes no loss
  EXPECT_THAT(losses[1], ElementsAre(4.0, 8.0, 12.0, 16.0));
}

TEST(PipelineTest, RefusesASendWithoutItsRecv) {
  Module m = TwoStageModule(2, /*drop_last_recv=*/true);
  cpu::CpuBackend backend(TestBackendOptions());
  auto interp = Interpreter::Create(m, 0, backend, InterpreterOptions{});
  ASSERT_FALSE(interp.ok());
  EXPECT_THAT(interp.status().message(),
              HasSubstr("SEND_F of micro-batch 1 (h) from pipeline rank 0 to 1 has no matching "
                        "RECV_F on pipeline rank 1"));
}

// mp = 2: each rank feeds its own x; c_allreduce_sum on the mp_comm stream sums them.
TEST(PipelineTest, AllReducesOverTheMpGroup) {
  Module m;
  m.mesh.mp = 2;
  OpSpec reduce{"c_allreduce_sum", {{"X", {"x"}}}, {{"Out", {"s"}}}, "mp_comm"};
  reduce.role = OpRole::kCommunication;
  m.AddProgram(MakeProgram("p", "forward", 0, {F32("x"), F32("s"), F32("loss")},
                           {reduce, {"t_double", {{"X", {"s"}}}, {{"Out", {"loss"}}}}}));
  m.programs()[0].ops()[0].SetAttr("group", std::string("mp"));
  m.plan.num_micro_batches = 3;
  m.plan.stage_to_rank = {0};
  RankPlan r{0, {}};
  for (int mb = 0; mb < 3; ++mb) r.jobs.push_back(MakeJob(JobKind::kForward, 0, mb, "p"));
  m.plan.ranks = {r};
  auto losses = RunRanks(m, 2, [](int rank, int mb) { return 10.0f * rank + mb; });
  // (mb + 10 + mb) * 2 on both ranks
  EXPECT_THAT(losses[0], ElementsAre(20.0, 24.0, 28.0));
  EXPECT_THAT(losses[1], ElementsAre(20.0, 24.0, 28.0));
}

}  // namespace
}  // namespace pw::testing
