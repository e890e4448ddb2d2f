// GPT with dropout (p 0.1 on the embeddings, attention probabilities and both residual
// branches): every layout draws the single-rank program's masks, so the invariant holds as
// without dropout. Pipeline schedules and recomputation bit for bit, sequence parallelism
// bit for bit against its plain mp plan, mp 2 (head-sharded probabilities) and dp 2 within
// the equivalence tests' rounding; Megatron's fused bias epilogues (bias_gelu,
// bias_dropout_add) bit for bit against the unfused ops in every layout. Ranks run as threads.

#include <gtest/gtest.h>

#include "equivalence_util.h"
#include "executor/reference_runner.h"
#include "ops/kernel.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

constexpr int kSteps = 2;
constexpr int kMicroBatches = 4;
constexpr uint64_t kSeed = 5;
constexpr const char* kTraining = "append-backward{optimizer=sgd,lr=0.1}";

struct Layout {
  int mp = 1, pp = 1, vpp = 1, dp = 1;
  double dropout = 0.1;
  bool bias_fusion = false;
};

StatusOr<Module> Planned(const Layout& l, const std::string& before, const std::string& after,
                         const std::string& schedule = "1f1b", bool split_backward = false) {
  models::GptConfig c = SmallGptConfig(l.mp, l.pp, l.vpp);
  c.dp = l.dp;
  c.unfused_attention = true;
  c.dropout = l.dropout;
  c.bias_fusion = l.bias_fusion;
  PW_ASSIGN_OR_RETURN(Module m, models::BuildGpt(c));
  std::string pipeline = before + kTraining + after;
  if (l.pp > 1)
    pipeline += StrCat(",split-program", split_backward ? "{split-backward=true}" : "",
                       ",schedule{kind=", schedule, ",micro-batches=", kMicroBatches / l.dp,
                       "},insert-p2p");
  return WithPasses(std::move(m), pipeline);
}

StatusOr<ThreadRun> Train(const Module& m) {
  return RunAsThreads(m, kSteps, kMicroBatches / m.mesh.dp, kSeed);
}

int CountOps(const Module& m, const std::string& type) {
  int n = 0;
  for (const Program& p : m.programs())
    for (const Op& op : p.ops()) n += op.type == type;
  return n;
}

class DropoutEquivalence : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ops::SetKernelThreads(1); }
};

// The one-rank executor draws the reference runner's masks (both feed dropout_seed), and
// dropout changes the training (it is not the identity).
TEST_F(DropoutEquivalence, OneRankMatchesTheReferenceRunner) {
  auto m = Planned({}, "", "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(CountOps(*m, "dropout"), 1 + 3 * 4);
  EXPECT_EQ(CountOps(*m, "dropout_grad"), 1 + 3 * 4);
  auto run = Train(*m);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ReferenceOptions options;
  options.steps = kSteps;
  options.micro_batches = kMicroBatches;
  options.data_seed = kSeed;
  auto reference = RunReference(*m, options);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  ASSERT_EQ(run->losses.size(), reference->losses.size());
  for (size_t s = 0; s < run->losses.size(); ++s)
    EXPECT_EQ(run->losses[s], reference->losses[s]) << "step " << s;
  auto off = Planned({.dropout = 0}, "", "");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  auto plain = Train(*off);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_NE(plain->losses.front(), run->losses.front());
}

// Pipelining reorders micro-batches, each keeps its seed: bit-identical.
TEST_F(DropoutEquivalence, PipelineSchedulesMatchOneRankBitForBit) {
  auto base = Planned({}, "", "");
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  auto base_run = Train(*base);
  ASSERT_TRUE(base_run.ok()) << base_run.status().ToString();
  struct Schedule {
    const char* kind;
    int vpp;
    bool split_backward;
  };
  for (const Schedule& s : {Schedule{"fthenb", 1, false}, Schedule{"1f1b", 1, false},
                            Schedule{"interleaved-1f1b", 2, false}, Schedule{"zb-h1", 1, true}}) {
    SCOPED_TRACE(s.kind);
    auto m = Planned({.pp = 2, .vpp = s.vpp}, "", "", s.kind, s.split_backward);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto run = Train(*m);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ExpectSameTraining(*m, *run, *base, *base_run, Match::kBitIdentical);
  }
}

// Recomputed forwards draw the masks again from the same seed: bit-identical.
TEST_F(DropoutEquivalence, RecomputeIsBitIdentical) {
  for (Layout l : {Layout{}, Layout{.pp = 2}}) {
    auto base = Planned(l, "", "");
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    auto base_run = Train(*base);
    ASSERT_TRUE(base_run.ok()) << base_run.status().ToString();
    for (const char* policy : {"full", "selective"}) {
      SCOPED_TRACE(StrCat(policy, " pp ", l.pp));
      auto m = Planned(l, "", StrCat(",recompute{policy=", policy, "}"));
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      auto run = Train(*m);
      ASSERT_TRUE(run.ok()) << run.status().ToString();
      ExpectSameTraining(*m, *run, *base, *base_run, Match::kBitIdentical);
    }
  }
}

// mp 2: each rank draws its heads' part of the probabilities' mask and the replicated
// hidden masks whole; mp's split reductions round differently. dp 2: each replica's
// micro-batches keep their global seeds.
TEST_F(DropoutEquivalence, TensorAndDataParallelMatchOneRankWithinRounding) {
  auto base = Planned({}, "", "");
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  auto base_run = Train(*base);
  ASSERT_TRUE(base_run.ok()) << base_run.status().ToString();
  for (Layout l : {Layout{.mp = 2}, Layout{.mp = 2, .pp = 2}, Layout{.dp = 2}}) {
    SCOPED_TRACE(StrCat("mp ", l.mp, " pp ", l.pp, " dp ", l.dp));
    auto m = Planned(l, "", "");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto run = Train(*m);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ExpectSameTraining(*m, *run, *base, *base_run, Match::kWithinRounding);
  }
}

// Sequence shards draw their slice of the whole sequence's masks: bit-identical to the
// plain mp plan, with selective recomputation too.
TEST_F(DropoutEquivalence, SequenceParallelIsBitIdentical) {
  for (Layout l : {Layout{.mp = 2}, Layout{.mp = 2, .pp = 2}}) {
    for (const char* recompute : {"", ",recompute{policy=selective}"}) {
      SCOPED_TRACE(StrCat("pp ", l.pp, recompute));
      auto plain = Planned(l, "", recompute);
      ASSERT_TRUE(plain.ok()) << plain.status().ToString();
      auto sp = Planned(l, "sequence-parallel,", recompute);
      ASSERT_TRUE(sp.ok()) << sp.status().ToString();
      int sharded = 0;
      for (const Program& p : sp->programs())
        for (const Op& op : p.ops())
          sharded += op.type == "dropout" && op.attrs.GetInt("shard_axis", -1) == 1;
      EXPECT_GT(sharded, 0);
      auto base_run = Train(*plain);
      ASSERT_TRUE(base_run.ok()) << base_run.status().ToString();
      auto run = Train(*sp);
      ASSERT_TRUE(run.ok()) << run.status().ToString();
      ExpectSameTraining(*sp, *run, *plain, *base_run, Match::kBitIdentical);
    }
  }
}

// The fused bias epilogues train bit for bit as bias_add, gelu, dropout and add, with and
// without dropout, pipelined (their grads in zero-bubble's B and W), recomputed, and on
// sequence shards (the bias gradients' row-group partial sums).
TEST_F(DropoutEquivalence, BiasFusionIsBitIdentical) {
  struct Case {
    Layout layout;
    const char* before;
    const char* after;
    const char* schedule;
    bool split_backward;
  };
  for (const Case& c :
       {Case{{}, "", "", "1f1b", false}, Case{{.dropout = 0}, "", "", "1f1b", false},
        Case{{.pp = 2}, "", "", "zb-h1", true},
        Case{{.pp = 2}, "", ",recompute{policy=full}", "1f1b", false},
        Case{{.mp = 2}, "sequence-parallel,", ",recompute{policy=selective}", "1f1b", false},
        Case{{.mp = 2, .pp = 2}, "sequence-parallel,", "", "1f1b", false}}) {
    Layout fused = c.layout;
    fused.bias_fusion = true;
    SCOPED_TRACE(StrCat("mp ", fused.mp, " pp ", fused.pp, " dropout ", fused.dropout, " ",
                        c.before, c.after));
    auto plain = Planned(c.layout, c.before, c.after, c.schedule, c.split_backward);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    auto m = Planned(fused, c.before, c.after, c.schedule, c.split_backward);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    // Recomputation replays some forward ops: at least the layers' own.
    EXPECT_GE(CountOps(*m, "bias_gelu"), 4);
    EXPECT_GE(CountOps(*m, "bias_dropout_add"), 2 * 4);
    EXPECT_EQ(CountOps(*m, "bias_gelu_grad"), 4);
    EXPECT_EQ(CountOps(*m, "bias_dropout_add_grad"), 2 * 4);
    EXPECT_EQ(CountOps(*m, "gelu"), 0);
    auto base_run = Train(*plain);
    ASSERT_TRUE(base_run.ok()) << base_run.status().ToString();
    auto run = Train(*m);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ExpectSameTraining(*m, *run, *plain, *base_run, Match::kBitIdentical);
  }
}

}  // namespace
}  // namespace pw::testing
