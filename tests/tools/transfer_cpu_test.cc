// The transfer probe: busy threads losing work while messages pass over a TcpLink.

#include "tools/transfer_cpu.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pw::tools {
namespace {

TEST(TransferCpu, MeasuresTheWorkBusyThreadsLoseOrSaysTheCoresWereShared) {
  // Short phases: this checks the probe's mechanics (links joined, messages passed,
  // threads stopped), not the figure, which needs the machine to itself.
  StatusOr<TransferCpu> t = MeasureTransferCpu(2, 8192, 3, 0.05);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_GE(t->worst_drift, 0);
  EXPECT_GT(t->lowest_share, 0);
  if (t->measured()) {
    EXPECT_GE(t->rounds, 3);
    EXPECT_GT(t->transfers, 3 * 10);  // a transfer every ~300 us of a 50 ms phase
    EXPECT_TRUE(std::isfinite(t->seconds) && t->seconds >= 0 && t->seconds < 0.01);
    EXPECT_LE(t->low, t->high);
  } else {
    EXPECT_EQ(t->seconds, 0);
    EXPECT_EQ(t->rounds, 0);
  }
}

TEST(TransferCpu, OneBusyThreadWorksToo) {
  StatusOr<TransferCpu> t = MeasureTransferCpu(1, 100, 3, 0.03);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_TRUE(std::isfinite(t->seconds));
}

TEST(TransferCpu, RefusesEmptyProbes) {
  EXPECT_FALSE(MeasureTransferCpu(0).ok());
  EXPECT_FALSE(MeasureTransferCpu(2, 0).ok());
  EXPECT_FALSE(MeasureTransferCpu(2, 8192, 0).ok());
  EXPECT_FALSE(MeasureTransferCpu(2, 8192, 3, 0).ok());
}

}  // namespace
}  // namespace pw::tools
