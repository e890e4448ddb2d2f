// The rank side of the measuring run: what each stream's communicator records comes back
// as report lines the launching side pairs into operations, whatever thread recorded it.

#include "tools/comm_recorder.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tools/comm_bench_report.h"

namespace pw::tools {
namespace {

// A transport that moves nothing and returns at once.
class NullComm final : public StreamComm {
 public:
  Status AllReduceSum(std::string_view, float*, int64_t) override { return OkStatus(); }
  Status AllReduceSumLowPrecision(std::string_view, DataType, void*, int64_t) override {
    return OkStatus();
  }
  Status AllReduceMax(std::string_view, float*, int64_t) override { return OkStatus(); }
  Status AllGather(std::string_view, void*, int64_t) override { return OkStatus(); }
  int GroupRank(std::string_view) const override { return 0; }
  Status Send(int, uint64_t, const Tensor&) override { return OkStatus(); }
  Status Recv(int, uint64_t, Tensor&) override { return OkStatus(); }
  Status Flush() override { return OkStatus(); }
};

class NullFactory final : public CommFactory {
 public:
  StatusOr<std::unique_ptr<StreamComm>> Create(StreamType) override {
    return std::unique_ptr<StreamComm>(std::make_unique<NullComm>());
  }
};

std::vector<std::string> Lines(const std::string& report) {
  std::vector<std::string> lines;
  std::istringstream in(report);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Rank `rank` of two pipeline stages: `steps` steps, each an all-reduce over the pp group
// on its compute stream and a transfer with tag 5 (rank 0 sends, rank 1 receives) on its
// transfer stream, the two streams on threads of their own; measuring from the second.
std::string RankReport(int rank, int steps) {
  NullFactory inner;
  CommRecorder recorder;
  TimedCommFactory timed(inner, recorder);
  std::unique_ptr<StreamComm> compute = std::move(timed.Create(StreamType::kCompute)).value();
  std::unique_ptr<StreamComm> transfer =
      std::move(timed.Create(rank == 0 ? StreamType::kPpSend : StreamType::kPpRecv)).value();
  Tensor activation(DataType::kFloat32, {2, 16});
  for (int step = 0; step < steps; ++step) {
    if (step == 1) recorder.Start();
    std::thread transfers([&] {
      Status s = rank == 0 ? transfer->Send(1, 5, activation) : transfer->Recv(0, 5, activation);
      EXPECT_TRUE(s.ok());
    });
    float grad[8] = {};
    EXPECT_TRUE(compute->AllReduceSum("pp", grad, 8).ok());
    transfers.join();
  }
  return recorder.Report(0.25, std::vector<double>(steps - 1, 2e-3 * (rank + 1)),
                         {.waits = 10 * (rank + 1),
                          .cpu_seconds = 1e-4 * (rank + 1),
                          .shared_waits = 8 * (rank + 1),
                          .shared_cpu_seconds = 5e-5 * (rank + 1),
                          .shared_seconds = 1e-3 * (rank + 1)});
}

TEST(CommRecorder, ItsReportPairsUpAcrossRanks) {
  Mesh mesh;
  mesh.pp = 2;
  const std::vector<std::vector<std::string>> lines = {Lines(RankReport(0, 4)),
                                                       Lines(RankReport(1, 4))};
  // Three measured steps: an all-reduce and a transfer each, their times, the waits caught
  // spinning, then the CPU line.
  ASSERT_EQ(lines[0].size(), 11u);
  EXPECT_EQ(lines[0][6], "t 0.002000000");
  EXPECT_EQ(lines[0][9], "w 10 0.000100000 8 0.000050000 0.001000000");
  EXPECT_EQ(lines[0].back(), "c 0.250000000 3");
  StatusOr<cost::CommRunResult> run = PairCommReports(mesh, lines);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  int all_reduces = 0, transfers = 0;
  for (const cost::MeasuredComm& m : run->ops) {
    if (m.kind == cost::CommKind::kAllReduce) {
      ++all_reduces;
      EXPECT_EQ(m.bytes, 32);
      EXPECT_FALSE(m.on_comm_stream);
    } else {
      ++transfers;
      EXPECT_EQ(m.bytes, 2 * 16 * 4);
    }
    EXPECT_GE(m.seconds, 0);
  }
  EXPECT_EQ(all_reduces, 3);
  EXPECT_EQ(transfers, 3);
  EXPECT_DOUBLE_EQ(run->process_cpu, 0.5);
  EXPECT_EQ(run->measured_steps, 3);
  EXPECT_EQ(run->step_seconds, std::vector<double>(3, 4e-3));  // rank 1's, the slower
  EXPECT_EQ(run->caught.waits, 30);                            // both ranks'
  EXPECT_NEAR(run->caught.cpu_seconds, 3e-4, 1e-12);
  EXPECT_EQ(run->caught.shared_waits, 24);
  EXPECT_NEAR(run->caught.shared_cpu_seconds, 1.5e-4, 1e-12);
  EXPECT_NEAR(run->caught.shared_seconds, 3e-3, 1e-12);
  EXPECT_NEAR(run->caught.CoreShare(), 0.05, 1e-12);
}

TEST(CommRecorder, CountsCollectivesPerKindAndGroupFromTheFirstStep) {
  NullFactory inner;
  CommRecorder recorder;
  TimedCommFactory timed(inner, recorder);
  std::unique_ptr<StreamComm> comm = std::move(timed.Create(StreamType::kMpComm)).value();
  float data[4] = {};
  ASSERT_TRUE(comm->AllReduceSum("mp", data, 4).ok());  // before measuring: counted only
  recorder.Start();
  ASSERT_TRUE(comm->AllReduceSum("mp", data, 4).ok());
  ASSERT_TRUE(comm->AllGather("mp", data, 16).ok());
  ASSERT_TRUE(comm->AllReduceSum("dp", data, 2).ok());
  const std::vector<std::string> lines = Lines(recorder.Report(0, {}));
  ASSERT_EQ(lines.size(), 5u);  // three operations, the waits caught spinning, the CPU line
  EXPECT_EQ(lines[0].rfind("a mp_comm mp 1 16 ", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("g mp_comm mp 0 16 ", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("a mp_comm dp 0 8 ", 0), 0u) << lines[2];
}

}  // namespace
}  // namespace pw::tools
