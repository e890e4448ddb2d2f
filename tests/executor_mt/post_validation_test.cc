// Post-validated loss scaling (amp{post-validate=true}) trains what the synchronous check
// trains, bit for bit: each rank updates on its own flag and keeps a copy of what it
// changes, the pipeline's flag of a step arrives at the next step's start, and a step after
// one that overflowed anywhere is undone and run again. fp16 with a loss scale far too large
// overflows in the first steps, so every plan here goes through the redo.

#include "ir/post_validation.h"

#include <gtest/gtest.h>

#include "equivalence_util.h"
#include "models/gpt.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

constexpr int kSteps = 6;
constexpr int kMicroBatches = 8;
constexpr uint64_t kSeed = 1;

struct PlanCase {
  const char* name;
  int mp, pp, vpp, dp;
  std::string schedule;  // after split-program
  friend void PrintTo(const PlanCase& c, std::ostream* os) { *os << c.name; }
};

Module Fp16Gpt(const PlanCase& c, const std::string& amp) {
  models::GptConfig config = SmallGptConfig(c.mp, c.pp, c.vpp);
  config.dp = c.dp;
  auto built = models::BuildGpt(config);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  const std::string pipeline =
      StrCat("append-backward{optimizer=adam,lr=0.01},amp{dtype=fp16,init-scale=1e6", amp, "},",
             c.schedule, ",insert-p2p");
  auto planned = WithPasses(std::move(built).value(), pipeline);
  EXPECT_TRUE(planned.ok()) << pipeline << ": " << planned.status().ToString();
  return planned.ok() ? std::move(planned).value() : Module{};
}

class PostValidationTest : public ::testing::TestWithParam<PlanCase> {};

TEST_P(PostValidationTest, TrainsAsTheSynchronousCheckBitForBit) {
  const PlanCase& c = GetParam();
  Module sync = Fp16Gpt(c, "");
  Module post = Fp16Gpt(c, ",post-validate=true");
  ASSERT_FALSE(post.plan.empty());
  int copies = 0, at_start = 0, pp_reduces_of_the_step = 0;
  for (const Program& p : post.programs())
    for (const Op& op : p.ops()) {
      copies += op.type == "copy_unless";
      at_start += op.attrs.GetBool(kAtStepStartAttr, false);
      pp_reduces_of_the_step += op.type == "c_allreduce_max" &&
                                op.attrs.GetString("group") == "pp" &&
                                !op.attrs.GetBool(kAtStepStartAttr, false);
    }
  EXPECT_EQ(copies, c.pp);  // one per stage
  EXPECT_EQ(at_start, c.pp);
  EXPECT_EQ(pp_reduces_of_the_step, 0);

  auto expected = RunAsThreads(sync, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  RankRunOptions o;
  o.steps = kSteps;
  o.micro_batches = kMicroBatches;
  o.data.data_seed = kSeed;
  auto got = RunLocalRanks(post, o);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->Losses(), expected->losses);
  ASSERT_EQ(got->params.size(), expected->params.size());
  const float skipped = expected->params[0].at(kSkippedStepsVar).f32()[0];
  EXPECT_GE(skipped, 1);       // the first steps overflowed
  EXPECT_LT(skipped, kSteps);  // and training went on
  // Every step after one that overflowed ran again, on every rank (the last step's
  // overflow, if any, is undone by the validation at the run's end).
  const bool last_overflowed = expected->params[0].at(kGoodStepsVar).f32()[0] == 0;
  for (const std::vector<RankStepReport>& steps : got->reports) {
    int redone = 0;
    for (const RankStepReport& step : steps) redone += step.redone;
    EXPECT_EQ(redone, skipped - last_overflowed);
  }
  for (size_t r = 0; r < got->params.size(); ++r) {
    // Every var the synchronous plan has, and no more: the flags and copies are left out
    // of the run's parameters, as out of checkpoints (validated at the run's end).
    EXPECT_EQ(got->params[r].size(), expected->params[r].size()) << "rank " << r;
    for (const auto& [name, value] : got->params[r]) {
      EXPECT_FALSE(IsPostValidationVar(name)) << name;
      auto it = expected->params[r].find(name);
      ASSERT_NE(it, expected->params[r].end()) << "rank " << r << ": " << name;
      EXPECT_TRUE(SameBits(value, it->second)) << "rank " << r << ": " << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Plans, PostValidationTest,
    ::testing::Values(
        PlanCase{"pp2_1f1b", 1, 2, 1, 1,
                 StrCat("split-program,schedule{kind=1f1b,micro-batches=", kMicroBatches, "}")},
        PlanCase{"pp4_zb_h1", 1, 4, 1, 1,
                 StrCat("split-program{split-backward=true},schedule{kind=zb-h1,micro-batches=",
                        kMicroBatches, "}")},
        PlanCase{"pp2_vpp2_interleaved", 1, 2, 2, 1,
                 StrCat("split-program,schedule{kind=interleaved-1f1b,micro-batches=",
                        kMicroBatches, "}")},
        // balance-stages moves layers, and the optimizer ops with them: the stage ops are
        // rebuilt (RestageLossScaling), post-validation included.
        PlanCase{"pp4_balanced_1f1b", 1, 4, 1, 1,
                 StrCat("balance-stages{report=false},split-program,schedule{kind=1f1b,"
                        "micro-batches=",
                        kMicroBatches, "}")},
        PlanCase{"mp2_pp2_1f1b", 2, 2, 1, 1,
                 StrCat("split-program,schedule{kind=1f1b,micro-batches=", kMicroBatches, "}")},
        // Replicas reduce their gradients before the check: each sees the same flags.
        PlanCase{
            "dp2_pp2_1f1b", 1, 2, 1, 2,
            StrCat("split-program,schedule{kind=1f1b,micro-batches=", kMicroBatches / 2, "}")}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace pw::testing
