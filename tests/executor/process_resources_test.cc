// The threads a training process computes with: --threads first, then the environment,
// then the machine's cores shared among its processes.

#include "executor/process_resources.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

namespace pw {
namespace {

class ComputeThreadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("OPENBLAS_NUM_THREADS");
    unsetenv("OMP_NUM_THREADS");
  }
  void TearDown() override { SetUp(); }
};

TEST_F(ComputeThreadsTest, RequestedWins) {
  setenv("OPENBLAS_NUM_THREADS", "3", 1);
  EXPECT_EQ(ComputeThreads(5, 4), 5);
}

TEST_F(ComputeThreadsTest, EnvironmentBeforeCores) {
  setenv("OMP_NUM_THREADS", "6", 1);
  EXPECT_EQ(ComputeThreads(0, 1), 6);
  setenv("OPENBLAS_NUM_THREADS", "2", 1);  // OpenBLAS's own variable first
  EXPECT_EQ(ComputeThreads(0, 1), 2);
}

TEST_F(ComputeThreadsTest, MalformedEnvironmentIsIgnored) {
  setenv("OPENBLAS_NUM_THREADS", "two", 1);
  setenv("OMP_NUM_THREADS", "0", 1);
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(ComputeThreads(0, 1), std::max(1, cores));
}

TEST_F(ComputeThreadsTest, CoresSharedAmongLocalProcesses) {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_EQ(ComputeThreads(0, 1), cores);
  EXPECT_EQ(ComputeThreads(0, 2), std::max(1, cores / 2));
  EXPECT_EQ(ComputeThreads(0, 4 * cores), 1);  // at least one
}

}  // namespace
}  // namespace pw
