// build-model's unfused attention (separate regroup, q.k^T, softmax and times-v ops) computes
// the fused attention op's function: the same training within rounding (other kernels, other
// summation orders), one rank and mp 2 x pp 2 on threads.

#include <gtest/gtest.h>

#include <cmath>

#include "equivalence_util.h"
#include "models/gpt.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

Module Gpt(bool unfused, int mp, int pp, const std::string& plan) {
  models::GptConfig c = SmallGptConfig(mp, pp);
  c.unfused_attention = unfused;
  auto built = models::BuildGpt(c);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  auto planned =
      WithPasses(std::move(built).value(), "append-backward{optimizer=adam,lr=0.01}" + plan);
  EXPECT_TRUE(planned.ok()) << planned.status().ToString();
  return planned.ok() ? std::move(planned).value() : Module{};
}

TEST(UnfusedAttentionTest, TrainsAsTheFusedOpWithinRounding) {
  auto fused = RunAsThreads(Gpt(false, 1, 1, ""), 3, 4, 1);
  ASSERT_TRUE(fused.ok()) << fused.status().ToString();
  for (auto [mp, pp] : {std::pair{1, 1}, std::pair{2, 2}}) {
    const std::string plan =
        pp > 1 ? ",split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p" : "";
    Module m = Gpt(true, mp, pp, plan);
    int softmaxes = 0;
    for (const Program& p : m.programs())
      for (const Op& op : p.ops()) softmaxes += op.type == "softmax";
    EXPECT_GT(softmaxes, 0) << "the attention was not unfused";
    auto run = RunAsThreads(m, 3, 4, 1);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ASSERT_EQ(run->losses.size(), fused->losses.size());
    for (size_t s = 0; s < fused->losses.size(); ++s)
      EXPECT_NEAR(run->losses[s], fused->losses[s], 1e-5 * std::fabs(fused->losses[s]))
          << "mp " << mp << " pp " << pp << " step " << s;
  }
}

}  // namespace
}  // namespace pw::testing
