// The measuring run's report lines paired into operations: every step's transfers count,
// though their tags come again each step.

#include "tools/comm_bench_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace pw::tools {
namespace {

Mesh PipelineOfTwo() {
  Mesh mesh;
  mesh.pp = 2;
  return mesh;
}

std::vector<double> SendRecvSeconds(const cost::CommRunResult& run) {
  std::vector<double> seconds;
  for (const cost::MeasuredComm& m : run.ops)
    if (m.kind == cost::CommKind::kSendRecv) seconds.push_back(m.seconds);
  std::sort(seconds.begin(), seconds.end());
  return seconds;
}

TEST(CommBenchReport, EveryStepsTransferCountsThoughItsTagComesAgain) {
  // Rank 0 sends tag 7 in each of three steps; rank 1 receives it each time.
  const std::vector<std::vector<std::string>> lines = {
      {"s 1 7 8192 1.000", "s 1 7 8192 2.000", "s 1 7 8192 3.000", "c 0.5 3"},
      {"r 0 7 8192 1.000 1.010", "r 0 7 8192 2.005 2.025", "r 0 7 8192 2.990 3.030", "c 0.5 3"}};
  StatusOr<cost::CommRunResult> run = PairCommReports(PipelineOfTwo(), lines);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // From the later of the two posts to the receive's completion.
  const std::vector<double> seconds = SendRecvSeconds(*run);
  ASSERT_EQ(seconds.size(), 3u);
  EXPECT_NEAR(seconds[0], 0.010, 1e-9);
  EXPECT_NEAR(seconds[1], 0.020, 1e-9);
  EXPECT_NEAR(seconds[2], 0.030, 1e-9);
  EXPECT_DOUBLE_EQ(run->process_cpu, 1.0);
  EXPECT_EQ(run->measured_steps, 3);
  for (const cost::MeasuredComm& m : run->ops) EXPECT_EQ(m.bytes, 8192);
}

TEST(CommBenchReport, AStepTakesItsSlowestRanksTime) {
  const std::vector<std::vector<std::string>> lines = {
      {"s 1 7 64 1.000", "t 0.010", "t 0.012", "c 0.1 2"},
      {"r 0 7 64 1.000 1.002", "t 0.011", "t 0.009", "c 0.1 2"}};
  StatusOr<cost::CommRunResult> run = PairCommReports(PipelineOfTwo(), lines);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->step_seconds.size(), 2u);
  EXPECT_DOUBLE_EQ(run->step_seconds[0], 0.011);
  EXPECT_DOUBLE_EQ(run->step_seconds[1], 0.012);
}

TEST(CommBenchReport, WaitsCaughtSpinningSumOverRanks) {
  const std::vector<std::vector<std::string>> lines = {
      {"s 1 7 64 1.000", "w 12 0.000100 10 0.00005 0.001", "c 0.1 2"},
      {"r 0 7 64 1.000 1.002", "w 30 0.000250 29 0.00015 0.003", "c 0.1 2"}};
  StatusOr<cost::CommRunResult> run = PairCommReports(PipelineOfTwo(), lines);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->caught.waits, 42);
  EXPECT_NEAR(run->caught.cpu_seconds, 3.5e-4, 1e-12);
  EXPECT_EQ(run->caught.shared_waits, 39);
  EXPECT_NEAR(run->caught.CoreShare(), 0.05, 1e-12);
}

TEST(CommBenchReport, TransfersPairFromTheLastStepBack) {
  // The sender began measuring a step before its peer: its first send has no receive.
  const std::vector<std::vector<std::string>> lines = {
      {"s 1 7 64 1.000", "s 1 7 64 2.000", "s 1 7 64 3.000", "c 0.1 3"},
      {"r 0 7 64 2.000 2.002", "r 0 7 64 3.000 3.004", "c 0.1 2"}};
  StatusOr<cost::CommRunResult> run = PairCommReports(PipelineOfTwo(), lines);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::vector<double> seconds = SendRecvSeconds(*run);
  ASSERT_EQ(seconds.size(), 2u);
  EXPECT_NEAR(seconds[0], 0.002, 1e-9);
  EXPECT_NEAR(seconds[1], 0.004, 1e-9);
}

TEST(CommBenchReport, CollectivesPairByTheirSequenceAcrossMembers) {
  Mesh mesh;
  mesh.mp = 2;
  // Two all-reduces over the mp group; the second member arrives later at the first.
  const std::vector<std::vector<std::string>> lines = {
      {"a compute mp 0 128 1.000 1.030", "a compute mp 1 128 2.000 2.010", "c 0.2 1"},
      {"a compute mp 0 128 1.020 1.030", "a compute mp 1 128 2.000 2.010", "c 0.2 1"}};
  StatusOr<cost::CommRunResult> run = PairCommReports(mesh, lines);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->ops.size(), 2u);
  EXPECT_EQ(run->ops[0].kind, cost::CommKind::kAllReduce);
  EXPECT_EQ(run->ops[0].group_size, 2);
  EXPECT_NEAR(run->ops[0].seconds, 0.010, 1e-9);   // from the last arrival
  EXPECT_NEAR(run->ops[0].straggle, 0.010, 1e-9);  // last arrival after the mean one
  EXPECT_FALSE(run->ops[0].on_comm_stream);
  EXPECT_NEAR(run->ops[1].seconds, 0.010, 1e-9);
}

TEST(CommBenchReport, ARankThatReportedNothingIsAnError) {
  const std::vector<std::vector<std::string>> lines = {{"s 1 7 64 1.0", "c 0.1 1"}, {}};
  StatusOr<cost::CommRunResult> run = PairCommReports(PipelineOfTwo(), lines);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("a rank reported nothing"), std::string::npos);
}

TEST(CommBenchReport, ReportsForAnotherRankCountAreAnError) {
  StatusOr<cost::CommRunResult> run = PairCommReports(PipelineOfTwo(), {{"c 0.1 1"}});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("1 ranks' reports for 2 ranks"), std::string::npos)
      << run.status().message();
}

}  // namespace
}  // namespace pw::tools
