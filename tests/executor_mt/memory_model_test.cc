// The simulator's memory model against the executor: for every schedule kind, with and
// without recomputation, f32 and bf16, each rank's predicted peak (parameters, gradients,
// optimizer state, activations held across jobs, transient tensors, received buffers) is
// within 10 % of the peak the executor's allocator tracked on that rank.
// benchmarks/memory_model.sh prints the whole table on a larger GPT.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "equivalence_util.h"
#include "ir/rank_sequence.h"
#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "simulator/simulator.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

constexpr int kMicroBatches = 8;

struct MemoryCase {
  const char* kind;
  int vpp;
  bool split_backward;
  const char* recompute;  // "", ",recompute{policy=full}", ...
  const char* amp;        // "" or ",amp{dtype=bf16}"
  models::ChunkPlacement placement = models::ChunkPlacement::kLoop;
};

void PrintTo(const MemoryCase& c, std::ostream* out) {
  *out << c.kind << " vpp=" << c.vpp << c.recompute << c.amp;
}

class MemoryModelTest : public ::testing::TestWithParam<MemoryCase> {};

// Each rank's predicted peak against the one the executor tracked, within 10 %.
void ExpectPeaksAgree(const Module& planned) {
  auto estimator = MakeEstimator("cpu", "");
  ASSERT_TRUE(estimator.ok());
  cost::SimOptions options;
  options.record_timeline = false;
  auto sim = cost::Simulator(*estimator, ops::Registry(), options).Run(planned);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  auto run = RunAsThreads(planned, 2, kMicroBatches, 1);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->peak_bytes.size(), sim->ranks.size());
  for (size_t r = 0; r < sim->ranks.size(); ++r) {
    const double predicted = static_cast<double>(sim->ranks[r].peak_bytes);
    const double measured = static_cast<double>(run->peak_bytes[r]);
    EXPECT_LE(std::fabs(predicted - measured), 0.10 * measured)
        << "rank " << r << ": predicted " << predicted << " B, measured " << measured << " B";
  }
}

TEST_P(MemoryModelTest, PredictedPeakIsWithinTenPercentOfTheExecutors) {
  const MemoryCase& c = GetParam();
  models::GptConfig g = SmallGptConfig(2, 2, c.vpp, c.placement);
  g.layers = 4 * c.vpp;
  g.seq = 64;  // activations large beside the parameters, as in real runs
  auto built = models::BuildGpt(g);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const std::string pipeline =
      StrCat("append-backward{optimizer=adam}", c.amp, c.recompute, ",split-program",
             c.split_backward ? "{split-backward=true}" : "", ",schedule{kind=", c.kind,
             ",micro-batches=", kMicroBatches, "},insert-p2p");
  auto planned = WithPasses(std::move(built).value(), pipeline);
  ASSERT_TRUE(planned.ok()) << pipeline << ": " << planned.status().ToString();

  ExpectPeaksAgree(*planned);
}

constexpr auto kV = models::ChunkPlacement::kV;
constexpr const char* kFull = ",recompute{policy=full}";
constexpr const char* kSelective = ",recompute{policy=selective}";
constexpr const char* kBf16 = ",amp{dtype=bf16}";

INSTANTIATE_TEST_SUITE_P(Plans, MemoryModelTest,
                         ::testing::Values(MemoryCase{"fthenb", 1, false, "", ""},
                                           MemoryCase{"1f1b", 1, false, "", ""},
                                           MemoryCase{"1f1b", 1, false, kFull, ""},
                                           MemoryCase{"1f1b", 1, false, kSelective, kBf16},
                                           MemoryCase{"interleaved-1f1b", 2, false, "", kBf16},
                                           MemoryCase{"interleaved-1f1b", 2, false, kFull, ""},
                                           MemoryCase{"zb-h1", 1, true, "", ""},
                                           MemoryCase{"zb-h1", 1, true, kFull, ""},
                                           MemoryCase{"zb-v", 2, true, "", "", kV},
                                           MemoryCase{"zb-v", 2, true, kSelective, kBf16, kV}));

// Ops that run as views (ir/alias_ops.h): unfused attention's reshapes, c_identity, and at
// mp 1 the all-reduces bind their outputs to their inputs' bytes. Every use of such a view
// reads its source, so the source lives as long as the view, in the executor and in the
// simulator's memory model alike; an all-reduce over two ranks keeps its own bytes.
TEST(MemoryModelViews, ViewsHoldTheirSourcesBytesInBothRuntimes) {
  for (int mp : {1, 2}) {
    SCOPED_TRACE(StrCat("mp ", mp));
    models::GptConfig g = SmallGptConfig(mp, 2);
    g.seq = 64;
    g.unfused_attention = true;
    auto built = models::BuildGpt(g);
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    auto planned = WithPasses(
        std::move(built).value(),
        StrCat("append-backward{optimizer=adam},split-program,schedule{kind=1f1b,micro-batches=",
               kMicroBatches, "},insert-p2p"));
    ASSERT_TRUE(planned.ok()) << planned.status().ToString();
    auto seq = BuildRankSequence(*planned, 0);
    ASSERT_TRUE(seq.ok()) << seq.status().ToString();
    std::map<std::string, int> views;  // by op type
    for (const WorkItem& item : seq->items) {
      if (item.kind != WorkKind::kOp) continue;
      const std::string& type = seq->op(item).type;
      const SeqSlot& out = seq->slots[item.writes.front()];
      if (type == "c_allreduce_sum") EXPECT_EQ(out.alias, mp == 1);
      if (type == "reshape" || type == "c_identity") EXPECT_TRUE(out.alias) << type;
      if (!out.alias) continue;
      ++views[type];
      EXPECT_TRUE(seq->BindsView(item));
      EXPECT_EQ(seq->slots[out.view_of].view_of, -1);  // the root: a view of no other
    }
    for (const WorkItem& item : seq->items)
      for (int s : item.reads)
        if (seq->slots[s].alias)
          EXPECT_THAT(item.reads, ::testing::Contains(seq->slots[s].view_of));
    EXPECT_GT(views["reshape"], 0);
    EXPECT_GT(views["c_identity"], 0);
    EXPECT_EQ(views["c_allreduce_sum"] > 0, mp == 1);
    ExpectPeaksAgree(*planned);
  }
}

}  // namespace
}  // namespace pw::testing
