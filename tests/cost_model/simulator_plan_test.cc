// The op-level simulator on hand-built plans with known answers, and the errors bad plans
// give.

#include <gtest/gtest.h>

#include "passes/pass_context.h"
#include "sim_test_util.h"
#include "simulator/stale_bytes.h"

namespace pw::cost {
namespace {

using namespace testing;

constexpr double kMs = 1e-3;

int Find(const SimGraph& g, int rank, const std::string& name, int mb = -2) {
  for (size_t i = 0; i < g.instrs.size(); ++i)
    if (g.instrs[i].rank == rank && g.instrs[i].name == name &&
        (mb == -2 || g.instrs[i].micro_batch == mb))
      return static_cast<int>(i);
  return -1;
}

TEST(SimulatorPlan, TwoStreamsWithAnEvent) {
  // compute: A (2 ms, records e), C (1 ms); mp_comm: B (3 ms) waits for e.
  Program p = MakeProgram(
      "p", "forward", 0,
      {F32("a", 2), F32("b", 2), F32("c", 3), F32("d", 3), F32("x", 1), F32("y", 1)},
      {Scale("a", "b", "", {}, {"e"}), Scale("c", "d", "mp_comm", {"e"}), Scale("x", "y")});
  Module m = OneRank({p}, {MakeJob(JobKind::kForward, 0, 0, "p")});
  SimGraph g;
  auto r = SimulateModule(m, &g);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->step_time, 5 * kMs, 1e-12);
  const RankResult& rank = r->ranks[0];
  EXPECT_NEAR(rank.busy[static_cast<int>(StreamType::kCompute)], 3 * kMs, 1e-12);
  EXPECT_NEAR(rank.busy[static_cast<int>(StreamType::kMpComm)], 3 * kMs, 1e-12);
  int b = Find(g, 0, "scale", 0);
  ASSERT_GE(b, 0);
  EXPECT_NEAR(r->timeline[b + 1].active, 2 * kMs, 1e-12);  // B starts when e is recorded

  // Without the event B runs at once.
  m.programs()[0].ops()[1].wait_events.clear();
  auto free = SimulateModule(m);
  ASSERT_TRUE(free.ok());
  EXPECT_NEAR(free->step_time, 3 * kMs, 1e-12);
}

TEST(SimulatorPlan, ATablesPriceOfMemoryBeyondACacheMovesTheOpsItMeasured) {
  // a -> b, c -> d, b -> e (4000 B each): the third op reads b after c and d went through.
  Program p =
      MakeProgram("p", "forward", 0,
                  {F32("a", 1000), F32("b", 1000), F32("c", 1000), F32("d", 1000), F32("e", 1000)},
                  {Scale("a", "b"), Scale("c", "d"), Scale("b", "e")});
  Module m = OneRank({p}, {MakeJob(JobKind::kForward, 0, 0, "p")});
  std::shared_ptr<Estimator> plain = ScaleCostEstimator(m);
  StatusOr<SimGraph> unpriced = BuildSimGraph(m, *plain, ops::Registry());
  ASSERT_TRUE(unpriced.ok()) << unpriced.status().message();
  ASSERT_EQ(unpriced->signatures.size(), 1u);  // the three ops share one signature

  // The table's runs found nothing beyond a 1000-byte cache; each byte there costs 1 ns.
  OpCostTable table = plain->table();
  for (OpCostEntry& e : *table.mutable_proto().mutable_entries()) e.set_stale_bytes(0);
  table.mutable_proto().set_stale_capacity(1000);
  table.mutable_proto().set_stale_price(1e-9);
  auto priced_by = Estimator::Create(TestDevice(), table);
  ASSERT_TRUE(priced_by.ok());
  StatusOr<SimGraph> priced = BuildSimGraph(m, **priced_by, ops::Registry());
  ASSERT_TRUE(priced.ok());
  const StaleBytes stale = CountStaleBytes(*unpriced, 1000);
  int64_t beyond = 0;
  for (size_t i = 0; i < priced->instrs.size(); ++i) {
    const int64_t bytes = stale.reads[i] + stale.writes[i];
    beyond += bytes;
    EXPECT_NEAR(priced->instrs[i].seconds - unpriced->instrs[i].seconds, 1e-9 * bytes, 1e-15) << i;
  }
  EXPECT_GE(stale.reads[2], 4000);  // b, read after 8000 B of others
  EXPECT_GT(beyond, 0);
}

TEST(SimulatorPlan, CrossProgramEvent) {
  // Forward of micro-batch k records `done`; the backward of micro-batch k waits, on another
  // stream, for the forward of micro-batch k+1 (`done@+1`).
  Program fwd = MakeProgram("fwd", "forward", 0, {F32("x", 1), F32("y", 1)},
                            {Scale("x", "y", "", {}, {"done"})});
  Program bwd = MakeProgram("bwd", "backward", 0, {F32("p", 4), F32("q", 4)},
                            {Scale("p", "q", "mp_comm", {"done@+1"})});
  Module m =
      OneRank({fwd, bwd},
              {MakeJob(JobKind::kForward, 0, 0, "fwd"), MakeJob(JobKind::kForward, 0, 1, "fwd"),
               MakeJob(JobKind::kBackward, 0, 0, "bwd"), MakeJob(JobKind::kBackward, 0, 1, "bwd")},
              2);
  auto r = SimulateModule(m);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // F0 [0,1], F1 [1,2]; B0 waits for F1: [2,6]; B1 (done@+1 names no micro-batch) [6,10].
  EXPECT_NEAR(r->step_time, 10 * kMs, 1e-12);
}

// A pipeline of `stages` ranks, each stage one 2 ms scale op, micro-batches in order.
Module Chain(int stages, int micro_batches) {
  Module m;
  m.name = "chain";
  m.mesh.pp = stages;
  std::vector<Var> vars;
  for (int s = 0; s <= stages; ++s) vars.push_back(F32("a" + std::to_string(s), 2));
  for (int s = 0; s < stages; ++s)
    m.AddProgram(MakeProgram("fwd" + std::to_string(s), "forward", s, vars,
                             {Scale("a" + std::to_string(s), "a" + std::to_string(s + 1))}));
  m.plan.schedule = "hand";
  m.plan.num_micro_batches = micro_batches;
  m.plan.num_stages = stages;
  for (int s = 0; s < stages; ++s) {
    m.plan.stage_to_rank.push_back(s);
    RankPlan rp{s, {}};
    std::string prog = "fwd" + std::to_string(s);
    for (int mb = 0; mb < micro_batches; ++mb) {
      if (s > 0) rp.jobs.push_back(MakeJob(JobKind::kRecvF, s, mb, prog, s - 1));
      rp.jobs.push_back(MakeJob(JobKind::kForward, s, mb, prog));
      if (s + 1 < stages) rp.jobs.push_back(MakeJob(JobKind::kSendF, s, mb, prog, s + 1));
    }
    m.plan.ranks.push_back(rp);
  }
  return m;
}

TEST(SimulatorPlan, P2pChain) {
  SimGraph g;
  auto r = SimulateModule(Chain(3, 2), &g);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Rank 1: F0 [2.5, 4.5], F1 [4.5, 6.5]; rank 2: F0 [5, 7], F1 [7, 9].
  EXPECT_NEAR(r->step_time, 9 * kMs, 1e-12);
  EXPECT_NEAR(r->ranks[2].compute_busy, 4 * kMs, 1e-12);
  EXPECT_NEAR(r->ranks[2].bubble, 5 * kMs, 1e-12);
  int recv = Find(g, 2, "RECV a2", 0);
  ASSERT_GE(recv, 0);
  EXPECT_NEAR(r->timeline[recv].end, 5 * kMs, 1e-12);
  // Rendezvous p2p changes nothing here: every recv is posted before its send.
  SimOptions rendezvous;
  rendezvous.rendezvous_p2p = true;
  rendezvous.record_timeline = true;
  SimGraph gv;
  auto rv = SimulateModule(Chain(3, 2), &gv, rendezvous);
  ASSERT_TRUE(rv.ok());
  EXPECT_NEAR(rv->step_time, 9 * kMs, 1e-12);
  // A rendezvous send is busy from its transfer's start to its end, as an eager one is:
  // the same pp_send time per rank, and the same timeline ends.
  for (int rank = 0; rank < 3; ++rank) {
    const int pp_send = static_cast<int>(StreamType::kPpSend);
    EXPECT_GE(rv->ranks[rank].busy[pp_send], 0) << rank;
    EXPECT_NEAR(rv->ranks[rank].busy[pp_send], r->ranks[rank].busy[pp_send], 1e-12) << rank;
  }
  for (size_t i = 0; i < gv.instrs.size(); ++i)
    EXPECT_NEAR(rv->timeline[i].end, r->timeline[i].end, 1e-12) << gv.instrs[i].name;
}

TEST(SimulatorPlan, AllReduceWaitsForTheLateMember) {
  // pp = 2; rank 0 computes 3 ms and rank 1 1 ms before an all-reduce over both (1 ms).
  Module m;
  m.name = "late";
  m.mesh.pp = 2;
  m.AddProgram(MakeProgram("s0", "forward", 0, {F32("a", 3), F32("b", 3), F32("r", 5)},
                           {Scale("a", "b"), AllReduce("r", "pp")}));
  m.AddProgram(MakeProgram("s1", "forward", 1, {F32("c", 1), F32("d", 1), F32("r", 5)},
                           {Scale("c", "d"), AllReduce("r", "pp")}));
  PlanTwoStagesOneForwardEach(m);
  SimGraph g;
  auto r = SimulateModule(m, &g);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->step_time, 4 * kMs, 1e-12);
  int ar1 = Find(g, 1, "c_allreduce_sum");
  ASSERT_GE(ar1, 0);
  EXPECT_NEAR(r->timeline[ar1].start, 1 * kMs, 1e-12);   // rank 1 reached it early
  EXPECT_NEAR(r->timeline[ar1].active, 3 * kMs, 1e-12);  // and waited for rank 0
  EXPECT_NEAR(r->ranks[1].exposed_comm, 1 * kMs, 1e-12);
  EXPECT_NEAR(r->ranks[1].bubble, 3 * kMs, 1e-12);
  EXPECT_NEAR(r->path_seconds[static_cast<int>(EstimatePath::kComm)], 2 * kMs, 1e-12);
}

TEST(SimulatorPlan, PeakMemoryFollowsTensorLifetimes) {
  // a -> b -> c -> d, 1 KiB each: at most an input and an output live at once.
  Program p =
      MakeProgram("p", "forward", 0,
                  {F32("a", 256), F32("b", 256), F32("c", 256), F32("d", 256), F32("w", 100, true)},
                  {Scale("a", "b"), Scale("b", "c"), Scale("c", "d"), Scale("w", "w")});
  auto r = SimulateModule(OneRank({p}, {MakeJob(JobKind::kForward, 0, 0, "p")}));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->ranks[0].persistent_bytes, 400);
  EXPECT_EQ(r->ranks[0].peak_bytes, 2048 + 400);
}

TEST(SimulatorPlan, PassesReachItThroughThePassContext) {
  PassContext context(ops::Registry());
  EXPECT_EQ(context.Find<Simulator>(), nullptr);  // a pass must cope without it
  Module m = Chain(2, 2);
  auto estimator = ScaleCostEstimator(m);
  context.Attach(estimator);
  context.Attach(std::make_shared<Simulator>(estimator, ops::Registry()));
  ASSERT_NE(context.Find<Estimator>(), nullptr);
  const Simulator* sim = context.Find<Simulator>();
  ASSERT_NE(sim, nullptr);
  // A pass prices a candidate: here the chain with its micro-batches in order.
  auto r = sim->Run(m);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->step_time, (2 + 0.5 + 2 + 2) * kMs, 1e-12);
}

TEST(SimulatorPlan, BadPlansGiveClearErrors) {
  Program p = MakeProgram("p", "forward", 0, {F32("x", 1), F32("y", 1)}, {Scale("x", "y")});
  Module no_plan;
  no_plan.name = "m";
  no_plan.AddProgram(p);
  auto r = SimulateModule(no_plan);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("has no plan"), std::string::npos) << r.status().message();

  Module bad_stream = OneRank({p}, {MakeJob(JobKind::kForward, 0, 0, "p")});
  bad_stream.programs()[0].ops()[0].stream = "tpu_stream";
  r = SimulateModule(bad_stream);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown stream type 'tpu_stream'"), std::string::npos)
      << r.status().message();

  Module unrecorded = OneRank({p}, {MakeJob(JobKind::kForward, 0, 0, "p")});
  unrecorded.programs()[0].ops()[0].wait_events = {"never"};
  r = SimulateModule(unrecorded);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("event 'never'"), std::string::npos) << r.status().message();

  Module lonely = Chain(2, 1);
  lonely.plan.ranks[1].jobs.erase(lonely.plan.ranks[1].jobs.begin());  // drop RECV_F0
  r = SimulateModule(lonely);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no matching recv"), std::string::npos)
      << r.status().message();

  Module unknown_program = OneRank({p}, {MakeJob(JobKind::kForward, 0, 0, "nope")});
  r = SimulateModule(unknown_program);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no program named 'nope'"), std::string::npos);
}

}  // namespace
}  // namespace pw::cost
