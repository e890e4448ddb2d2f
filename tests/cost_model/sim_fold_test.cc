// Folding mp/dp peers into one simulated rank (SimGraphOptions::fold_replicas) is exact:
// every figure of the folded simulation equals the whole graph's, bit for bit, on plans
// with tensor-parallel collectives, dp all-reduces, interleaving, rendezvous p2p and
// the overlap passes. Where it would not be exact (a CPU node's shared cores, peers whose
// transfers cross nodes differently) it does not fold.

#include <gtest/gtest.h>

#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "passes/pass_manager.h"
#include "simulator/simulator.h"

namespace pw::cost {
namespace {

struct Case {
  const char* name;
  int mp, pp, dp, vpp;
  const char* pipeline;
  const char* device;
  bool rendezvous;
};

Module Planned(const Case& c) {
  models::GptConfig g;
  g.layers = 4 * c.vpp;
  g.hidden = c.mp == 3 ? 96 : 128;
  g.heads = c.mp == 3 ? 6 : 8;
  g.ffn = 4 * g.hidden;
  g.seq = 32;
  g.vocab = c.mp == 3 ? 288 : 256;
  g.micro_batch_size = 1;
  g.mp = c.mp;
  g.pp = c.pp;
  g.vpp = c.vpp;
  auto built = models::BuildGpt(g);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  Module m = std::move(built).value();
  m.mesh.dp = c.dp;
  PassManager pm;
  EXPECT_TRUE(pm.AddPipeline(c.pipeline).ok());
  auto ran = pm.Run(m);
  EXPECT_TRUE(ran.ok()) << ran.status().ToString();
  return m;
}

void ExpectSameRank(const RankResult& a, const RankResult& b) {
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.busy, b.busy);
  EXPECT_EQ(a.compute_busy, b.compute_busy);
  EXPECT_EQ(a.comm_busy, b.comm_busy);
  EXPECT_EQ(a.exposed_comm, b.exposed_comm);
  EXPECT_EQ(a.exposed_by_class, b.exposed_by_class);
  EXPECT_EQ(a.bubble, b.bubble);
  EXPECT_EQ(a.end, b.end);
  EXPECT_EQ(a.peak_bytes, b.peak_bytes);
  EXPECT_EQ(a.persistent_bytes, b.persistent_bytes);
}

class SimFoldTest : public ::testing::TestWithParam<Case> {};

TEST_P(SimFoldTest, FoldedEqualsWhole) {
  const Case& c = GetParam();
  auto estimator = MakeEstimator(c.device, "");
  ASSERT_TRUE(estimator.ok()) << estimator.status().ToString();
  const Module m = Planned(c);
  SimGraphOptions fold;
  fold.fold_replicas = true;
  auto whole = BuildSimGraph(m, **estimator, ops::Registry());
  auto folded = BuildSimGraph(m, **estimator, ops::Registry(), fold);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  // A CPU node's ranks share its cores; mp 3 on 8-GPU nodes puts some peers' transfers
  // across nodes and others' not: neither folds.
  const bool exact = (*estimator)->device().cores_per_node() <= 0 && c.mp != 3;
  ASSERT_EQ(folded->folded(), exact);
  if (folded->folded()) EXPECT_EQ(folded->instrs.size() * c.mp * c.dp, whole->instrs.size());
  SimOptions options;
  options.rendezvous_p2p = c.rendezvous;
  options.record_timeline = false;
  const DeviceSpec& device = (*estimator)->device();
  auto a = Simulate(*whole, device, options, &(*estimator)->comm());
  auto b = Simulate(*folded, device, options, &(*estimator)->comm());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_GT(a->step_time, 0);
  EXPECT_EQ(a->step_time, b->step_time);
  EXPECT_EQ(a->bubble_rate, b->bubble_rate);
  EXPECT_EQ(a->exposed_comm, b->exposed_comm);
  EXPECT_EQ(a->busy_by_stream, b->busy_by_stream);
  EXPECT_EQ(a->exposed_by_class, b->exposed_by_class);
  EXPECT_EQ(a->path_seconds, b->path_seconds);
  ASSERT_EQ(a->ranks.size(), b->ranks.size());
  for (size_t r = 0; r < a->ranks.size(); ++r) ExpectSameRank(a->ranks[r], b->ranks[r]);
}

constexpr const char* k1f1b =
    "append-backward{optimizer=adam},split-program,schedule{kind=1f1b,micro-batches=6},"
    "insert-p2p";
constexpr const char* kOverlap =
    "append-backward{optimizer=adam},split-program,schedule{kind=1f1b,micro-batches=6},"
    "insert-p2p,assign-streams,overlap-column-parallel-backward,insert-events";
constexpr const char* kInterleaved =
    "append-backward,split-program,schedule{kind=interleaved-1f1b,micro-batches=8},"
    "insert-p2p,assign-streams";
constexpr const char* kZeroBubble =
    "append-backward,split-program{split-backward=true},schedule{kind=zb-h1,micro-batches=6},"
    "insert-p2p,assign-streams,insert-events";

INSTANTIATE_TEST_SUITE_P(
    Plans, SimFoldTest,
    ::testing::Values(Case{"mp4_pp2_1f1b_h100", 4, 2, 1, 1, k1f1b, "h100", false},
                      Case{"mp2_pp2_dp2_overlap_h100", 2, 2, 2, 1, kOverlap, "h100", false},
                      Case{"mp2_pp4_interleaved_rendezvous_a100", 2, 4, 1, 2, kInterleaved, "a100",
                           true},
                      Case{"mp8_pp2_zb_h100_two_nodes", 8, 2, 1, 1, kZeroBubble, "h100", false},
                      Case{"mp2_pp2_dp2_cpu_not_folded", 2, 2, 2, 1, k1f1b, "cpu", false},
                      Case{"mp3_pp4_h100_not_folded", 3, 4, 1, 1, k1f1b, "h100", false}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace pw::cost
