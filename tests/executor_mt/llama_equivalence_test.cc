// The invariant on the Llama (tests/small_llama.h): its layouts compute what its one-rank
// program computes. The one-rank executor gives the reference runner's bits and trains;
// mp 2 x pp 2 under every schedule kind matches one rank within rounding (mp splits matmul
// reductions), with the kv heads split over mp or a single one replicated; pp alone is
// bit-identical. The passes that only reorder (streams, overlaps with their row splits,
// recomputation) give the bits of the plan without them. Ranks run as threads;
// tests/executor_mt/launcher_test.cc repeats mp 2 x pp 2 over Gloo processes.

#include <gtest/gtest.h>

#include "cost_model/device_spec.h"
#include "cost_model/estimator.h"
#include "equivalence_util.h"
#include "executor/plan_check.h"
#include "executor/reference_runner.h"
#include "ops/kernel.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "tests/small_llama.h"

namespace pw::testing {
namespace {

constexpr int kSteps = 2;
constexpr int kMicroBatches = 4;
constexpr uint64_t kSeed = 1;
constexpr const char* kTraining = "append-backward{optimizer=sgd,lr=0.1}";

struct Layout {
  int mp = 1, pp = 1, vpp = 1;
  int kv_heads = 2;
  const char* kind = "";  // "": unplanned (one program)
  bool split_backward = false;
  models::ChunkPlacement placement = models::ChunkPlacement::kLoop;
  int seq = 16;  // 64: 128-row GEMMs, which row splits cut into blocks of 64
};

void PrintTo(const Layout& l, std::ostream* out) {
  *out << l.kind << " mp=" << l.mp << " pp=" << l.pp << " kv_heads=" << l.kv_heads;
}

Module Llama(const Layout& l, const std::string& after_backward = "") {
  models::LlamaConfig c = SmallLlamaConfig(l.mp, l.pp, l.vpp, l.placement);
  c.kv_heads = l.kv_heads;
  c.layers = 4 * l.vpp;
  c.seq = l.seq;
  auto built = models::BuildLlama(c);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  std::string pipeline = StrCat(kTraining, after_backward);
  if (*l.kind)
    pipeline += StrCat(",split-program", l.split_backward ? "{split-backward=true}" : "",
                       ",schedule{kind=", l.kind, ",micro-batches=", kMicroBatches, "},insert-p2p");
  auto planned = WithPasses(std::move(built).value(), pipeline);
  EXPECT_TRUE(planned.ok()) << pipeline << ": " << planned.status().ToString();
  return planned.ok() ? std::move(planned).value() : Module{};
}

ThreadRun Train(const Module& m) {
  auto run = RunAsThreads(m, kSteps, kMicroBatches, kSeed);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return run.ok() ? *run : ThreadRun{};
}

TEST(LlamaEquivalenceTest, OneRankExecutorMatchesTheReferenceRunnerAndTrains) {
  ops::SetKernelThreads(1);
  const Module m = Llama(Layout{});
  ReferenceOptions options;
  options.steps = 3;
  options.micro_batches = kMicroBatches;
  options.data_seed = kSeed;
  auto reference = RunReference(m, options);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  auto run = RunAsThreads(m, 3, kMicroBatches, kSeed);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->losses.size(), reference->losses.size());
  for (size_t s = 0; s < reference->losses.size(); ++s)
    EXPECT_EQ(run->losses[s], reference->losses[s]) << "step " << s;
  EXPECT_LT(run->losses.back(), run->losses.front());  // it trains
}

class LlamaLayoutTest : public ::testing::TestWithParam<Layout> {};

// Pipelining alone keeps every sum's order: bit-identical; mp 2 splits matmul reductions.
TEST_P(LlamaLayoutTest, MatchesOneRank) {
  const Layout& l = GetParam();
  Layout one;
  one.kv_heads = l.kv_heads;
  one.vpp = l.vpp;
  const Module base = Llama(one);
  const Module m = Llama(l);
  ASSERT_FALSE(m.plan.empty());
  LoweringOptions lowering{{"tokens", "labels"}, "loss", false};
  Status check = CheckPlanForAllRanks(m, lowering);
  ASSERT_TRUE(check.ok()) << check.ToString();
  ExpectSameTraining(m, Train(m), base, Train(base),
                     l.mp == 1 ? Match::kBitIdentical : Match::kWithinRounding);
}

constexpr auto kV = models::ChunkPlacement::kV;

INSTANTIATE_TEST_SUITE_P(Schedules, LlamaLayoutTest,
                         ::testing::Values(Layout{2, 2, 1, 2, "1f1b"}, Layout{1, 2, 1, 2, "1f1b"},
                                           Layout{2, 2, 2, 2, "interleaved-1f1b"},
                                           Layout{2, 2, 1, 2, "zb-h1", true},
                                           Layout{2, 2, 2, 2, "zb-v", true, kV},
                                           Layout{2, 2, 2, 2, "dualpipe-v", true, kV},
                                           // One kv head, replicated on both mp ranks.
                                           Layout{2, 2, 1, 1, "fthenb"}),
                         [](const auto& info) {
                           std::string name = StrCat(info.param.kind, "_mp", info.param.mp, "_kv",
                                                     info.param.kv_heads);
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// The passes that only reorder: the plan with them trains the bits of the plan without
// them (the executor adding no event of its own), and says how many linears it rewrote.
struct Rewrite {
  Layout layout;
  const char* common;     // passes after append-backward in both plans (amp)
  const char* recompute;  // the rewritten plan's passes before split-program
  const char* passes;     // the rewritten plan's passes after insert-p2p ("": none)
};

void PrintTo(const Rewrite& r, std::ostream* out) {
  *out << r.layout.kind << r.common << r.recompute << " " << r.passes;
}

class LlamaRewriteTest : public ::testing::TestWithParam<Rewrite> {};

int64_t Statistic(const PassContext& context, const std::string& pass, const std::string& name) {
  int64_t total = 0;
  for (const PassStatistics& s : context.statistics())
    if (s.pass == pass)
      for (const auto& [counter, value] : s.counters)
        if (counter == name) total += value;
  return total;
}

int CountOutputs(const Module& m, const std::string& type, const std::string& tag) {
  int n = 0;
  for (const Program& p : m.programs())
    for (const Op& op : p.ops())
      if (type.empty() || op.type == type)
        op.ForEachOutput([&](const std::string& v) { n += v.find(tag) != std::string::npos; });
  return n;
}

TEST_P(LlamaRewriteTest, TrainsTheBitsOfThePlanWithoutIt) {
  const Rewrite& r = GetParam();
  const Module plain = Llama(r.layout, r.common);
  Module rewritten = Llama(r.layout, StrCat(r.common, r.recompute));
  ASSERT_FALSE(plain.plan.empty());
  const std::string passes = r.passes;
  if (!passes.empty()) {
    PassContext context(ops::Registry());
    auto estimator = cost::Estimator::Create(*cost::BuiltinDeviceSpec("h100"), cost::OpCostTable{});
    ASSERT_TRUE(estimator.ok());
    AttachCostModel(*estimator, context);
    PassManager pm;
    ASSERT_TRUE(pm.AddPipeline(passes).ok());
    Status ran = pm.Run(rewritten, context).status();
    ASSERT_TRUE(ran.ok()) << ran.ToString();
    // Per layer q, k and v share one all-reduce (q alone when the kv head is replicated),
    // gate and up another; the LM head's input gradient is one more. (A split backward's
    // input-gradient program has no weight gradient to move: nothing to rewrite there.)
    const int64_t linears =
        Statistic(context, "overlap-column-parallel-backward", "linears-rewritten");
    const int64_t all_reduces =
        Statistic(context, "overlap-column-parallel-backward", "all-reduces-overlapped");
    const int per_layer = r.layout.kv_heads >= r.layout.mp ? 5 : 3;
    EXPECT_EQ(all_reduces > 0, !r.layout.split_backward);
    EXPECT_EQ(linears, all_reduces / 2 * per_layer + all_reduces % 2) << all_reduces;
    LoweringOptions strict{ModuleInputs(plain), ModuleLoss(plain), true};
    Status check = CheckPlanForAllRanks(rewritten, strict);
    ASSERT_TRUE(check.ok()) << check.ToString();
  }
  // The input gradients' sums cut into row blocks where every matmul is cut.
  if (passes.find("split-ops=all") != std::string::npos)
    EXPECT_GT(CountOutputs(rewritten, "sum", "@ROWS"), 0);
  if (*r.recompute) EXPECT_GT(CountOutputs(rewritten, "", "@RECOMPUTE"), 0);
  ExpectSameTraining(rewritten, Train(rewritten), plain, Train(plain), Match::kBitIdentical);
}

constexpr const char* kOverlap = "assign-streams,overlap-column-parallel-backward,insert-events";

INSTANTIATE_TEST_SUITE_P(
    Passes, LlamaRewriteTest,
    ::testing::Values(
        Rewrite{Layout{2, 2, 1, 2, "1f1b", false, models::ChunkPlacement::kLoop, 64}, "", "",
                "assign-streams,overlap-column-parallel-backward,overlap-1f1b{split-ops=all},"
                "insert-events"},
        Rewrite{Layout{2, 2, 1, 2, "zb-h1", true, models::ChunkPlacement::kLoop, 64}, "", "",
                "assign-streams,overlap-column-parallel-backward,overlap-row-split{split-ops=all},"
                "insert-events"},
        // bf16: the matmuls read the weights' bf16 copies; one kv head, replicated.
        Rewrite{Layout{2, 2, 1, 1, "1f1b"}, ",amp{dtype=bf16}", "", kOverlap},
        Rewrite{Layout{2, 2, 1, 2, "1f1b"}, "", ",recompute{policy=selective}", kOverlap},
        Rewrite{Layout{2, 2, 2, 2, "interleaved-1f1b"}, ",amp{dtype=bf16}",
                ",recompute{policy=full}", ""}),
    [](const auto& info) {
      std::string name = StrCat(info.param.layout.kind, "_", info.index);
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

}  // namespace
}  // namespace pw::testing
