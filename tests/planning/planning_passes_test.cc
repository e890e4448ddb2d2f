// split-program, schedule and insert-p2p on real model modules.

#include <gtest/gtest.h>

#include "ir/plan_actions.h"
#include "models/gpt.h"
#include "models/unet.h"
#include "passes/pass_manager.h"
#include "passes/pipeline/module_stages.h"
#include "passes/pipeline/schedule_checker.h"

namespace pw {
namespace {

Module Gpt(int pp, int vpp) {
  models::GptConfig c;
  c.layers = 4;
  c.hidden = 16;
  c.heads = 2;
  c.ffn = 32;
  c.seq = 4;
  c.vocab = 16;
  c.pp = pp;
  c.vpp = vpp;
  StatusOr<Module> m = models::BuildGpt(c);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(m).value();
}

Status RunPipeline(Module& module, const std::string& pipeline) {
  PassManager manager;
  PW_RETURN_IF_ERROR(manager.AddPipeline(pipeline));
  return manager.Run(module).status();
}

TEST(PlanningPasses, GptOneFOneBPlanWithSendRecv) {
  Module m = Gpt(2, 1);
  Status st = RunPipeline(
      m, "append-backward,split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p");
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(m.plan.ranks.size(), 2u);
  EXPECT_EQ(m.plan.schedule, "1f1b");
  EXPECT_EQ(m.plan.num_micro_batches, 4);
  const Job& first = m.plan.ranks[0].jobs[0];
  EXPECT_EQ(JobToString(first), "0F0");
  EXPECT_EQ(first.program, "stage0_forward");
  EXPECT_EQ(JobToString(m.plan.ranks[0].jobs[1]), "0SEND_F0");
  EXPECT_EQ(m.plan.ranks[0].jobs[1].peer, 1);
  EXPECT_EQ(m.plan.ranks[0].jobs.back().kind, JobKind::kOptimizer);
  StatusOr<ActionSchedule> s = PlanToActionSchedule(m.plan);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(pipeline::CheckSchedule(*s).ok());
  // The programs record what crosses and what a later job needs.
  const Program* fwd = m.FindProgram("stage0_forward");
  ASSERT_NE(fwd, nullptr);
  EXPECT_FALSE(fwd->info().outputs.empty());
  EXPECT_FALSE(fwd->info().keep_alive.empty());
}

TEST(PlanningPasses, GptZeroBubbleNeedsSplitBackward) {
  Module m = Gpt(2, 1);
  Status st = RunPipeline(m, "append-backward,split-program,schedule{kind=zb-h1,micro-batches=4}");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("split-backward=true"), std::string::npos) << st.message();
  Module split = Gpt(2, 1);
  st = RunPipeline(split,
                   "append-backward,split-program{split-backward=true},"
                   "schedule{kind=zb-h1,micro-batches=4},insert-p2p{order=parity}");
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_NE(split.FindProgram("stage1_backward_weight"), nullptr);
}

TEST(PlanningPasses, GptInterleavedOverVirtualStages) {
  Module m = Gpt(2, 2);
  Status st =
      RunPipeline(m,
                  "append-backward,split-program,schedule{kind=interleaved-1f1b,micro-batches=4},"
                  "insert-p2p{order=batched}");
  ASSERT_TRUE(st.ok()) << st.message();
  StatusOr<pipeline::ModuleStages> stages = pipeline::ReadModuleStages(m);
  ASSERT_TRUE(stages.ok());
  EXPECT_EQ(stages->stage_to_rank, (std::vector<int>{0, 1, 0, 1}));
}

TEST(PlanningPasses, UnetSkipConnectionsGetTheirOwnSendRecv) {
  models::UnetConfig c;
  c.layers = 8;
  c.hidden = 8;
  c.seq = 4;
  c.vocab = 16;
  c.pp = 4;
  StatusOr<Module> m = models::BuildUnet(c);
  ASSERT_TRUE(m.ok()) << m.status().message();
  Status st = RunPipeline(
      *m, "append-backward,split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p");
  ASSERT_TRUE(st.ok()) << st.message();
  StatusOr<pipeline::ModuleStages> stages = pipeline::ReadModuleStages(*m);
  ASSERT_TRUE(stages.ok());
  EXPECT_FALSE(stages->skip_edges.empty());
  bool skip_send = false;
  for (const Job& job : m->plan.ranks[0].jobs)
    skip_send |= job.kind == JobKind::kSendF && job.peer_stage > 1;
  EXPECT_TRUE(skip_send);
}

}  // namespace
}  // namespace pw
