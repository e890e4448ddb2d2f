// The memory check of sim, tune and ab: GPU ranks against their own device, CPU ranks of a
// node against its shared memory, --mem-limit, and the one-line refusal of absurd sizes.

#include "simulator/memory_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pw::cost {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

SimResult Peaks(std::vector<int64_t> peaks) {
  SimResult r;
  for (size_t i = 0; i < peaks.size(); ++i) {
    RankResult rr;
    rr.rank = static_cast<int>(i);
    rr.peak_bytes = peaks[i];
    r.ranks.push_back(rr);
  }
  return r;
}

TEST(MemoryFitTest, BuiltinGpusKnowTheirMemoryAndTheRuntimesShare) {
  for (const char* name : {"h100", "h200", "a100"}) {
    DeviceSpec spec = *BuiltinDeviceSpec(name);
    EXPECT_GT(spec.memory_capacity(), 79.0 * kGiB) << name;
    EXPECT_GT(spec.memory_reserved(), 0) << name;
    EXPECT_EQ(spec.cores_per_node(), 0) << name;  // a rank owns its device
  }
  EXPECT_GT(BuiltinDeviceSpec("h200")->memory_capacity(), 140.0 * kGiB);
  EXPECT_GT(BuiltinDeviceSpec("cpu")->memory_capacity(), 0);  // this machine's
}

TEST(MemoryFitTest, AGpuRankFitsWhenItsPeakAndTheReservationDo) {
  DeviceSpec spec = *BuiltinDeviceSpec("h100");
  const auto usable = static_cast<int64_t>(spec.memory_capacity() - spec.memory_reserved());
  MemoryFit fit = FitMemory(Peaks({usable, usable + 1, 10 * kGiB}), spec);
  ASSERT_TRUE(fit.checked);
  EXPECT_FALSE(fit.fits);
  EXPECT_TRUE(fit.ranks[0].fits);
  EXPECT_FALSE(fit.ranks[1].fits);
  EXPECT_TRUE(fit.ranks[2].fits);
  EXPECT_EQ(fit.Tightest()->rank, 1);
  EXPECT_THAT(fit.Summary(), HasSubstr("DOES NOT FIT: rank 1 need"));
}

TEST(MemoryFitTest, SummaryNamesRankRangesAndTheExcess) {
  DeviceSpec spec = *BuiltinDeviceSpec("a100");
  spec.set_memory_reserved(0);
  spec.set_memory_capacity(80.0 * kGiB);
  MemoryFit fit = FitMemory(Peaks({90 * kGiB, 91 * kGiB, 92 * kGiB, kGiB, 85 * kGiB}), spec);
  EXPECT_EQ(fit.Summary(),
            "memory: DOES NOT FIT: ranks 0-2, 4 need up to 92.0 GiB of 80.0 GiB per a100-80gb "
            "(12.0 GiB over); recompute activations, use more pipeline or tensor parallelism, "
            "or fewer micro-batches in flight");
  MemoryFit ok = FitMemory(Peaks({kGiB, 2 * kGiB}), spec);
  EXPECT_TRUE(ok.fits);
  EXPECT_EQ(ok.Summary(),
            "memory: every rank fits (the most: rank 1, 2.0 GiB of 80.0 GiB per a100-80gb)");
}

TEST(MemoryFitTest, RanksOfACpuNodeShareItsMemory) {
  DeviceSpec spec = *BuiltinDeviceSpec("cpu");
  spec.set_memory_capacity(10.0 * kGiB);
  spec.set_memory_reserved(0);
  spec.set_ranks_per_node(2);
  // Ranks 0 and 1 share a node (6 + 5 GiB: over), ranks 2 and 3 another (4 + 4: fits).
  MemoryFit fit = FitMemory(Peaks({6 * kGiB, 5 * kGiB, 4 * kGiB, 4 * kGiB}), spec);
  EXPECT_TRUE(fit.shared_node);
  EXPECT_FALSE(fit.ranks[0].fits);
  EXPECT_FALSE(fit.ranks[1].fits);
  EXPECT_EQ(fit.ranks[0].need, 11 * kGiB);
  EXPECT_TRUE(fit.ranks[2].fits);
  EXPECT_EQ(fit.ranks[3].need, 8 * kGiB);
  EXPECT_THAT(fit.Summary(), HasSubstr("shared by the node's ranks"));
}

TEST(MemoryFitTest, ALimitReplacesTheCapacityAndUnknownMemoryIsNotChecked) {
  DeviceSpec spec = *BuiltinDeviceSpec("h100");
  spec.set_memory_reserved(0);
  EXPECT_TRUE(FitMemory(Peaks({40 * kGiB}), spec).fits);
  MemoryFit limited = FitMemory(Peaks({40 * kGiB}), spec, 32 * kGiB);
  EXPECT_FALSE(limited.fits);
  EXPECT_THAT(limited.Summary(),
              HasSubstr("of 32.0 GiB per rank, a limit given in place of h100-sxm's memory"));
  spec.set_memory_capacity(0);
  MemoryFit unknown = FitMemory(Peaks({1000 * kGiB}), spec);
  EXPECT_FALSE(unknown.checked);
  EXPECT_TRUE(unknown.fits);
  EXPECT_THAT(unknown.Summary(), HasSubstr("not checked"));
}

TEST(MemoryFitTest, SizesNoDeviceCouldHoldAreRefusedInOneLine) {
  DeviceSpec spec = *BuiltinDeviceSpec("h100");
  EXPECT_TRUE(CheckRepresentableMemory({80.0 * kGiB, 500.0 * kGiB}, spec).ok());
  Status s = CheckRepresentableMemory({1.0, 96.0 * 1024 * kGiB * 1024}, spec);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 1 holds 96.0 PiB"));
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
}

TEST(MemoryFitTest, FormatBytesPicksAUnit) {
  EXPECT_EQ(FormatBytes(512.0 * 1024 * 1024), "512.0 MiB");
  EXPECT_EQ(FormatBytes(1.5 * kGiB), "1.5 GiB");
  EXPECT_EQ(FormatBytes(2048.0 * kGiB), "2.0 TiB");
}

}  // namespace
}  // namespace pw::cost
