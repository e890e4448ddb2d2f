// split-program, schedule and insert-p2p on real model modules.

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include "ir/p2p_vars.h"
#include "ir/plan_actions.h"
#include "ir/rank_sequence.h"
#include "models/gpt.h"
#include "models/unet.h"
#include "passes/pass_manager.h"
#include "passes/pipeline/module_stages.h"
#include "passes/pipeline/schedule_checker.h"

namespace pw {
namespace {

Module Gpt(int pp, int vpp, int mp = 1,
           models::ChunkPlacement placement = models::ChunkPlacement::kLoop) {
  models::GptConfig c;
  c.layers = 4;
  c.hidden = 16;
  c.heads = 2;
  c.ffn = 32;
  c.seq = 4;
  c.vocab = 16;
  c.pp = pp;
  c.vpp = vpp;
  c.mp = mp;
  c.placement = placement;
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

// insert-p2p{wait=exchange}: each send/recv part of an exchange records an event of its own,
// the rank's next job waits on all of them (with the transfer's micro-batch), and the rank
// sequence holds that job's first op on each stream on them.
TEST(PlanningPasses, WaitExchangeHoldsTheNextJobOnTheWholeExchange) {
  Module m = Gpt(4, 1);
  Status st = RunPipeline(m,
                          "append-backward,split-program,schedule{kind=1f1b,micro-batches=8},"
                          "insert-p2p{order=batched,wait=exchange}");
  ASSERT_TRUE(st.ok()) << st.message();
  for (const RankPlan& rank : m.plan.ranks) {
    std::vector<std::string> pending;
    int held = 0;
    for (const Job& job : rank.jobs) {
      const std::vector<Job> one{job};
      std::vector<const Job*> parts;
      FlattenJobs(one, parts);
      if (IsP2pJob(parts.front()->kind)) {
        for (const Job* part : parts) {
          ASSERT_EQ(part->record_events.size(), 1u) << JobToString(*part);
          pending.push_back(StrCat(part->record_events[0], "@", part->micro_batch));
        }
        continue;
      }
      EXPECT_EQ(job.wait_events, pending) << JobToString(job) << " on rank " << rank.rank;
      held += !pending.empty();
      pending.clear();
    }
    EXPECT_GT(held, 0) << "rank " << rank.rank;
    // Every transfer's event is waited on by the first op of a later job.
    StatusOr<RankSequence> seq = BuildRankSequence(m, rank.rank);
    ASSERT_TRUE(seq.ok()) << seq.status().message();
    int last_program_job = -1;
    for (size_t j = 0; j < seq->jobs.size(); ++j)
      if (!IsP2pJob(seq->jobs[j]->kind)) last_program_job = static_cast<int>(j);
    std::set<int> waited;
    for (const WorkItem& item : seq->items)
      if (item.kind == WorkKind::kOp)
        waited.insert(item.wait_events.begin(), item.wait_events.end());
    for (size_t i = 0; i < seq->items.size(); ++i) {
      const WorkItem& item = seq->items[i];
      if (item.kind != WorkKind::kSend && item.kind != WorkKind::kRecv) continue;
      ASSERT_EQ(item.record_events.size(), 1u) << seq->Describe(static_cast<int>(i));
      // Only an exchange that ends the plan has no job after it.
      if (!waited.count(item.record_events[0])) EXPECT_GT(item.job, last_program_job);
    }
  }
}

TEST(PlanningPasses, WaitExchangeNeedsAnOrderForBlockingTransfers) {
  Module m = Gpt(2, 1);
  Status st = RunPipeline(m,
                          "append-backward,split-program,schedule{kind=1f1b,micro-batches=4},"
                          "insert-p2p{order=naive,wait=exchange}");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("use order=parity, batched or megatron"), std::string::npos)
      << st.message();
  Module waited = Gpt(2, 1);
  st = RunPipeline(waited,
                   "append-backward,split-program,schedule{kind=1f1b,micro-batches=4},"
                   "insert-p2p{order=parity,wait=exchange},order-comm");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("run order-comm in place of insert-p2p"), std::string::npos)
      << st.message();
}

// scatter-gather-p2p moves each crossing value's mp slice (the jobs' vars follow the
// programs); it needs the stages' ranks, and leaves sequence-parallel values (slices already)
// alone.
TEST(PlanningPasses, ScatterGatherSendsSlicesOfWhatCrosses) {
  Module m = Gpt(2, 1, 2);
  Status st = RunPipeline(m,
                          "append-backward,split-program,schedule{kind=1f1b,micro-batches=4},"
                          "insert-p2p,scatter-gather-p2p");
  ASSERT_TRUE(st.ok()) << st.message();
  int jobs = 0;
  for (const RankPlan& rank : m.plan.ranks)
    for (const Job& job : rank.jobs) {
      if (!IsP2pJob(job.kind)) continue;
      StatusOr<std::vector<std::string>> vars = P2pVars(m, rank.rank, job);
      ASSERT_TRUE(vars.ok()) << vars.status().message();
      for (const std::string& v : *vars)
        EXPECT_NE(v.find("@mp_slice"), std::string::npos) << JobToString(job) << " moves " << v;
      ++jobs;
    }
  EXPECT_GT(jobs, 0);
  Module early = Gpt(2, 1, 2);
  st = RunPipeline(early, "append-backward,scatter-gather-p2p");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("run it after split-program and schedule"), std::string::npos)
      << st.message();
  Module sp = Gpt(2, 1, 2);
  ASSERT_TRUE(RunPipeline(sp,
                          "sequence-parallel,append-backward,split-program,"
                          "schedule{kind=1f1b,micro-batches=4},insert-p2p")
                  .ok());
  Module same = sp;
  ASSERT_TRUE(RunPipeline(same, "scatter-gather-p2p").ok());
  EXPECT_TRUE(same == sp);
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

// Vars each program writes.
std::set<std::string> Written(const Program& p) {
  std::set<std::string> out;
  for (const Op& op : p.ops()) op.ForEachOutput([&](const std::string& v) { out.insert(v); });
  return out;
}

// I runs before W, so no input-gradient program may read what a weight-gradient program
// writes; and W keeps only work that produces weight gradients or feeds it.
void ExpectInputGradNeverReadsWeightGrad(const Module& m) {
  std::set<std::string> w_written;
  int w_programs = 0;
  for (const Program& p : m.programs())
    if (p.info().kind == pipeline::kBackwardWeightKind) {
      ++w_programs;
      std::set<std::string> w = Written(p);
      w_written.insert(w.begin(), w.end());
      bool has_weight_grad = false;
      for (const Op& op : p.ops()) has_weight_grad |= op.weight_grad;
      EXPECT_TRUE(has_weight_grad) << p.name();
    }
  EXPECT_GT(w_programs, 0);
  for (const Program& p : m.programs()) {
    if (p.info().kind == pipeline::kBackwardWeightKind || p.info().kind == pipeline::kOptimizerKind)
      continue;
    for (const std::string& v : p.info().inputs)
      EXPECT_FALSE(w_written.count(v))
          << p.name() << " reads " << v << ", which a backward_weight program writes";
  }
}

// Column-parallel layers put c_identity before the matmul; its gradient is an mp
// all-reduce of the matmul's input gradient, which the previous layer's I needs.
TEST(PlanningPasses, SplitBackwardKeepsInputGradientAllReducesInI) {
  for (int mp : {1, 2}) {
    SCOPED_TRACE(mp);
    Module m = Gpt(2, 1, mp);
    Status st = RunPipeline(m, "append-backward,split-program{split-backward=true}");
    ASSERT_TRUE(st.ok()) << st.message();
    ExpectInputGradNeverReadsWeightGrad(m);
    const Program* w = m.FindProgram("stage0_backward_weight");
    ASSERT_NE(w, nullptr);
    for (const Op& op : w->ops()) EXPECT_NE(op.type, "c_allreduce_sum") << "in " << w->name();
  }
}

TEST(PlanningPasses, GptInAVPlacementRunsZeroBubbleV) {
  Module m = Gpt(2, 2, 1, models::ChunkPlacement::kV);
  Status st = RunPipeline(m,
                          "append-backward,split-program{split-backward=true},"
                          "schedule{kind=zb-v,micro-batches=4},insert-p2p");
  ASSERT_TRUE(st.ok()) << st.message();
  StatusOr<pipeline::ModuleStages> stages = pipeline::ReadModuleStages(m);
  ASSERT_TRUE(stages.ok());
  EXPECT_EQ(stages->stage_to_rank, (std::vector<int>{0, 1, 1, 0}));
  ExpectInputGradNeverReadsWeightGrad(m);
  // The V turn (stages 1 -> 2 on rank 1) hands over without a send.
  for (const Job& job : m.plan.ranks[1].jobs)
    EXPECT_FALSE(job.kind == JobKind::kSendF && job.stage == 1) << JobToString(job);
}

// DualPipeV mixes full backwards (alone and in OVERLAP_F_B) with I/W pairs: on a split
// module every B runs its stage's I program then its W program.
TEST(PlanningPasses, GptInAVPlacementRunsDualPipeVOnASplitBackward) {
  Module m = Gpt(2, 2, 1, models::ChunkPlacement::kV);
  Status st = RunPipeline(m,
                          "append-backward,split-program{split-backward=true},"
                          "schedule{kind=dualpipe-v,micro-batches=4},insert-p2p");
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(m.plan.schedule, "dualpipe-v");
  int split_b = 0, overlaps = 0, plain_i = 0;
  std::function<void(const Job&)> visit = [&](const Job& job) {
    if (job.kind == JobKind::kOverlapFB) ++overlaps;
    if (job.kind == JobKind::kBackward) {
      ++split_b;
      EXPECT_TRUE(job.program.empty()) << JobToString(job);
      ASSERT_EQ(job.sub_jobs.size(), 2u) << JobToString(job);
      EXPECT_EQ(job.sub_jobs[0].program,
                pipeline::StageProgramName(job.stage, pipeline::kBackwardInputKind));
      EXPECT_EQ(job.sub_jobs[1].program,
                pipeline::StageProgramName(job.stage, pipeline::kBackwardWeightKind));
      return;
    }
    if (job.kind == JobKind::kBackwardInput) ++plain_i;
    for (const Job& sub : job.sub_jobs) visit(sub);
  };
  for (const RankPlan& rank : m.plan.ranks)
    for (const Job& job : rank.jobs) visit(job);
  EXPECT_GT(split_b, 0);
  EXPECT_GT(overlaps, 0);
  EXPECT_GT(plain_i, 0);
  // 4 stages x 4 micro-batches, each backward once: as B or as I.
  EXPECT_EQ(split_b + plain_i, 16);
  StatusOr<ActionSchedule> s = PlanToActionSchedule(m.plan);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(pipeline::CheckSchedule(*s).ok());
}

// Backward kinds against the module's split: I and W need a split module; a B-only kind on
// a split module runs its B's as I then W.
TEST(PlanningPasses, ScheduleMatchesBackwardKindsToTheSplit) {
  Module unsplit = Gpt(2, 2, 1, models::ChunkPlacement::kV);
  Status st = RunPipeline(
      unsplit, "append-backward,split-program,schedule{kind=dualpipe-v,micro-batches=4}");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("kind dualpipe-v splits backwards into I and W; run "
                              "split-program{split-backward=true} first"),
            std::string::npos)
      << st.message();

  Module split = Gpt(2, 1);
  st = RunPipeline(split,
                   "append-backward,split-program{split-backward=true},"
                   "schedule{kind=1f1b,micro-batches=4},insert-p2p");
  ASSERT_TRUE(st.ok()) << st.message();
  int b = 0;
  for (const RankPlan& rank : split.plan.ranks)
    for (const Job& job : rank.jobs) {
      EXPECT_NE(job.kind, JobKind::kBackwardInput) << JobToString(job);
      if (job.kind != JobKind::kBackward) continue;
      ++b;
      EXPECT_TRUE(RunsSubJobs(job)) << JobToString(job);
    }
  EXPECT_EQ(b, 8);
}

TEST(PlanningPasses, VPlacementNeedsTwoChunks) {
  models::GptConfig c;
  c.layers = 6;
  c.pp = 2;
  c.vpp = 3;
  c.placement = models::ChunkPlacement::kV;
  StatusOr<Module> m = models::BuildGpt(c);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("placement v needs vpp 2"), std::string::npos);
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
  // The skip's gradient goes back the way its value came (3 -> 0) and is summed on the
  // producer's stage: no backward edge between consumers (3 -> 1).
  bool skip_grad_recv = false;
  for (const Job& job : m->plan.ranks[0].jobs)
    skip_grad_recv |= job.kind == JobKind::kRecvB && job.peer_stage == 3;
  EXPECT_TRUE(skip_grad_recv);
  for (const Job& job : m->plan.ranks[1].jobs)
    EXPECT_FALSE(job.kind == JobKind::kRecvB && job.peer_stage == 3) << JobToString(job);
}

}  // namespace
}  // namespace pw
