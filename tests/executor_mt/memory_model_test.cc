// The simulator's memory model against the executor: for every schedule kind, with and
// without recomputation, f32 and bf16, each rank's predicted peak (parameters, gradients,
// optimizer state, activations held across jobs, transient tensors, received buffers) is
// within 10 % of the peak the executor's allocator tracked on that rank.
// benchmarks/memory_model.sh prints the whole table on a larger GPT.

#include <gtest/gtest.h>

#include <cmath>

#include "equivalence_util.h"
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

  auto estimator = MakeEstimator("cpu", "");
  ASSERT_TRUE(estimator.ok());
  cost::SimOptions options;
  options.record_timeline = false;
  auto sim = cost::Simulator(*estimator, ops::Registry(), options).Run(*planned);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  auto run = RunAsThreads(*planned, 2, kMicroBatches, 1);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->peak_bytes.size(), sim->ranks.size());
  for (size_t r = 0; r < sim->ranks.size(); ++r) {
    const double predicted = static_cast<double>(sim->ranks[r].peak_bytes);
    const double measured = static_cast<double>(run->peak_bytes[r]);
    EXPECT_LE(std::fabs(predicted - measured), 0.10 * measured)
        << "rank " << r << ": predicted " << predicted << " B, measured " << measured << " B";
  }
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

}  // namespace
}  // namespace pw::testing
