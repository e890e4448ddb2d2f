#include <gtest/gtest.h>

#include "planning_test_util.h"
#include "simulator/action_simulator.h"
#include "viz/chrome_trace.h"
#include "viz/schedule_svg.h"

namespace pw {
namespace {

TEST(ChromeTrace, WritesCompleteEventsAndMetadata) {
  ChromeTraceWriter trace;
  trace.SetProcessName(0, "rank \"0\"");
  trace.SetThreadName(0, 2, "mp_comm");
  trace.AddComplete("0F1", "forward", 0, 2, 10, 5, "{\"mb\":1}");
  trace.AddFlow("p2p", 7, 0, 2, 15, 1, 0, 16);
  std::string json = trace.Finish();
  EXPECT_NE(json.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(json.find("{\"ph\":\"X\",\"name\":\"0F1\",\"pid\":0,\"tid\":2,\"cat\":\"forward\","
                      "\"ts\":10,\"dur\":5,\"args\":{\"mb\":1}}"),
            std::string::npos);
  EXPECT_NE(json.find("rank \\\"0\\\""), std::string::npos);
  EXPECT_EQ(trace.num_events(), 5u);
  EXPECT_EQ(json.find("otherData"), std::string::npos);  // none set
}

TEST(ChromeTrace, OtherDataClosesTheDocument) {
  ChromeTraceWriter trace;
  trace.SetProcessName(0, "rank 0");
  trace.AddOtherData("clock", "\"steady\"");
  trace.AddOtherData("step \"began\" us", "12.5");
  const std::string json = trace.Finish();
  EXPECT_NE(json.find("\"displayTimeUnit\":\"ms\",\"otherData\":{\"clock\":\"steady\","
                      "\"step \\\"began\\\" us\":12.5}}"),
            std::string::npos)
      << json;
  EXPECT_EQ(trace.num_events(), 1u);  // other data is not an event
}

TEST(ScheduleSvg, DrawsOneBlockPerComputeAction) {
  using namespace pipeline;
  ActionSchedule s = testing::Generate(testing::Spec(ScheduleKind::kZbH1, 2, 2));
  SimulationOptions options;
  options.record_timeline = true;
  StatusOr<TimedResult> r = SimulateTimed(s, options);
  ASSERT_TRUE(r.ok());
  std::string svg = ScheduleToSvg(s, r->timeline, {"zb-h1"});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  size_t blocks = 0;
  for (size_t at = svg.find("<title>"); at != std::string::npos; at = svg.find("<title>", at + 1))
    ++blocks;
  EXPECT_EQ(blocks, s.num_actions());
  EXPECT_NE(svg.find("#59a14f"), std::string::npos);  // I blocks are green
}

}  // namespace
}  // namespace pw
