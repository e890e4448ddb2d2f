// What `pipeweave sim` reports: exposed communication by kind and busy time per stream, per
// rank and for the worst rank, in the JSON and the table.

#include "viz/sim_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "sim_test_util.h"

namespace pw::cost {
namespace {

using namespace testing;

int Count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

int Class(CommClass c) { return static_cast<int>(c); }
int Stream(StreamType s) { return static_cast<int>(s); }

// Ranks 0 and 1: a forward job's tensor-parallel all-reduce (1 s) on mp_comm with nothing
// beside it, then a backward job's (1 s) on mp_comm while each rank computes for 2 s.
SimGraph ForwardExposedBackwardHidden() {
  GraphBuilder b(2);
  std::vector<int> forward = b.Collective({0, 1}, 1.0, StreamType::kMpComm, CommClass::kMpForward);
  b.Collective({0, 1}, 1.0, StreamType::kMpComm, CommClass::kMpBackward);
  for (int rank : {0, 1}) b.Compute(rank, 2.0, {forward[rank]});
  return b.graph();
}

TEST(SimReport, ExposedCommunicationByKind) {
  SimGraph g = ForwardExposedBackwardHidden();
  auto r = Simulate(g, TestDevice());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->step_time, 3.0, 1e-12);
  for (const RankResult& rank : r->ranks) {
    EXPECT_NEAR(rank.exposed_by_class[Class(CommClass::kMpForward)], 1.0, 1e-12);
    EXPECT_NEAR(rank.exposed_by_class[Class(CommClass::kMpBackward)], 0.0, 1e-12);
    EXPECT_NEAR(rank.exposed_comm, 1.0, 1e-12);
    EXPECT_NEAR(rank.busy[Stream(StreamType::kMpComm)], 2.0, 1e-12);
    EXPECT_NEAR(rank.busy[Stream(StreamType::kCompute)], 2.0, 1e-12);
  }
  EXPECT_NEAR(r->exposed_by_class[Class(CommClass::kMpForward)], 1.0, 1e-12);
  EXPECT_NEAR(r->exposed_by_class[Class(CommClass::kMpBackward)], 0.0, 1e-12);
  EXPECT_NEAR(r->busy_by_stream[Stream(StreamType::kMpComm)], 2.0, 1e-12);
}

TEST(SimReport, JsonHasEveryKindAndStreamAtTheTopAndPerRank) {
  SimGraph g = ForwardExposedBackwardHidden();
  auto r = Simulate(g, TestDevice());
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::string json = SimResultToJson(*r, g);
  const std::string exposed =
      "\"exposed_comm_ms\": {\"mp_forward\": 1000, \"mp_backward\": 0, \"pp_send\": 0, "
      "\"pp_recv\": 0, \"dp\": 0, \"sp_forward\": 0, \"sp_backward\": 0, \"total\": 1000}";
  const std::string busy =
      "\"busy_ms_by_stream\": {\"compute\": 2000, \"mp_comm\": 2000, \"pp_send\": 0, "
      "\"pp_recv\": 0, \"dp_comm\": 0, \"mp_fwd_comm\": 0}";
  EXPECT_EQ(Count(json, exposed), 3) << json;  // the top level and both ranks
  EXPECT_EQ(Count(json, busy), 3) << json;
  EXPECT_LT(json.find(exposed), json.find("\"ranks\"")) << json;
  EXPECT_LT(json.find(busy), json.find("\"ranks\"")) << json;
  // The keys that were there before stay.
  for (const char* key : {"\"step_time_ms\"", "\"bubble_rate\"", "\"coverage\"",
                          "\"compute_busy_ms\"", "\"bubble_ms\"", "\"busy_ms\": {"})
    EXPECT_NE(json.find(key), std::string::npos) << key;
}

// The whitespace-separated words of the first line after `header` that starts with `first`.
std::vector<std::string> RowAfter(const std::string& text, const std::string& header,
                                  const std::string& first) {
  std::istringstream lines(text.substr(std::min(text.find(header), text.size())));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> row;
    for (std::string w; words >> w;) row.push_back(w);
    if (!row.empty() && row[0] == first) return row;
  }
  return {};
}

TEST(SimReport, TableShowsExposedByKindPerRank) {
  SimGraph g = ForwardExposedBackwardHidden();
  auto r = Simulate(g, TestDevice());
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::string table = SimResultToTable(*r, g);
  EXPECT_NE(table.find("mp_forward 1000.000, mp_backward 0.000"), std::string::npos) << table;
  const std::string section = "exposed communication by kind";
  EXPECT_EQ(RowAfter(table, section, "rank"),
            (std::vector<std::string>{"rank", "mp_forward", "mp_backward", "pp_send", "pp_recv",
                                      "dp", "sp_forward", "sp_backward", "total"}))
      << table;
  EXPECT_EQ(RowAfter(table, section, "1"),
            (std::vector<std::string>{"1", "1000.000", "0.000", "0.000", "0.000", "0.000", "0.000",
                                      "0.000", "1000.000"}))
      << table;
}

}  // namespace
}  // namespace pw::cost
