// The simulated timeline drawing: one lane per stream of a rank, boxes at their simulated
// times, narrow ones merged, and one rank drawn on a given time scale.

#include "viz/sim_svg.h"

#include <gtest/gtest.h>

#include <optional>
#include <regex>

#include "sim_test_util.h"

namespace pw::cost {
namespace {

using namespace testing;

struct DrawnBox {
  double x = 0, width = 0;
  std::string fill, tip;
};

// The boxes of the lane of `rank` and `stream`, left to right as drawn; nullopt when the
// drawing has no such lane.
std::optional<std::vector<DrawnBox>> Lane(const std::string& svg, int rank,
                                          const std::string& stream) {
  const std::string open = "<g class=\"lane\" data-rank=\"" + std::to_string(rank) +
                           "\" data-stream=\"" + stream + "\">";
  size_t begin = svg.find(open);
  if (begin == std::string::npos) return std::nullopt;
  size_t end = std::min(svg.find("<g class=\"lane\"", begin + 1), svg.find("<line", begin));
  std::string lane = svg.substr(begin, end - begin);
  if (lane.find(">" + stream + "</text>") == std::string::npos) return std::nullopt;  // label
  static const std::regex box(
      "<title>([^<]*)</title><rect class=\"op\" x=\"([0-9.]+)\" y=\"[0-9.]+\" "
      "width=\"([0-9.]+)\" height=\"[0-9.]+\" fill=\"(#[0-9a-f]+)\"");
  std::vector<DrawnBox> boxes;
  for (std::sregex_iterator it(lane.begin(), lane.end(), box), done; it != done; ++it)
    boxes.push_back({std::stod((*it)[2]), std::stod((*it)[3]), (*it)[4], (*it)[1]});
  return boxes;
}

// mp = 2, one pipeline stage, one forward job: a (2 ms) then c (3 ms) on compute, and the
// all-reduce of a's output (1 ms) on mp_comm beside c.
Module ForwardWithAnMpAllReduce() {
  Module m = OneRank(
      {MakeProgram("fwd", "forward", 0, {F32("a", 2), F32("b", 2), F32("c", 3), F32("d", 3)},
                   {Scale("a", "b"), AllReduce("b", "mp", "mp_comm"), Scale("c", "d")})},
      {MakeJob(JobKind::kForward, 0, 0, "fwd")});
  m.mesh.mp = 2;
  return m;
}

// Each test draws ForwardWithAnMpAllReduce's simulation (module_, graph_, result_).
class SimSvg : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(result_.ok()) << result_.status().message(); }

  Module module_ = ForwardWithAnMpAllReduce();
  SimGraph graph_;
  StatusOr<SimResult> result_ = SimulateModule(module_, &graph_);
};

TEST_F(SimSvg, DrawsALanePerStreamOfARank) {
  ASSERT_NEAR(result_->step_time, 5e-3, 1e-12);
  auto svg = SimScheduleSvg(module_, graph_, *result_, "mp2 <forward>");
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_NE(svg->find("mp2 &lt;forward&gt;"), std::string::npos);

  auto compute = Lane(*svg, 0, "compute");
  auto mp_comm = Lane(*svg, 0, "mp_comm");
  ASSERT_TRUE(compute && mp_comm) << *svg;
  ASSERT_EQ(compute->size(), 2u) << *svg;
  ASSERT_EQ(mp_comm->size(), 1u) << *svg;
  const DrawnBox& all_reduce = mp_comm->front();
  EXPECT_NE(all_reduce.tip.find("c_allreduce_sum"), std::string::npos) << all_reduce.tip;
  EXPECT_NE(all_reduce.fill, (*compute)[0].fill);  // communication by kind, compute by job
  // It runs beside the second compute op: same start, a third of its width.
  EXPECT_NEAR(all_reduce.x, (*compute)[1].x, 0.01);
  EXPECT_NEAR(all_reduce.width * 3, (*compute)[1].width, 0.05);
  // Unused streams get no lane; the second mp replica is left out.
  EXPECT_FALSE(Lane(*svg, 0, "pp_send"));
  EXPECT_FALSE(Lane(*svg, 1, "compute"));
}

TEST_F(SimSvg, MergesOpsTooNarrowToSee) {
  // 100 chained 1 ms ops in one job.
  std::vector<Var> vars;
  std::vector<Op> ops;
  for (int k = 0; k <= 100; ++k) vars.push_back(F32("v" + std::to_string(k), 1));
  for (int k = 0; k < 100; ++k)
    ops.push_back(Scale("v" + std::to_string(k), "v" + std::to_string(k + 1)));
  Module chain = OneRank({MakeProgram("fwd", "forward", 0, vars, ops)},
                         {MakeJob(JobKind::kForward, 0, 0, "fwd")});
  SimGraph chain_graph;
  auto chain_result = SimulateModule(chain, &chain_graph);
  ASSERT_TRUE(chain_result.ok()) << chain_result.status().message();

  auto wide = SimRankLanesSvg(chain, chain_graph, *chain_result, 0, "");
  ASSERT_TRUE(wide.ok()) << wide.status().message();
  EXPECT_EQ(Lane(*wide, 0, "compute")->size(), 100u);  // 14 px each: drawn one by one
  auto narrow = SimRankLanesSvg(chain, chain_graph, *chain_result, 0, "", 1000.0);
  ASSERT_TRUE(narrow.ok()) << narrow.status().message();
  auto merged = Lane(*narrow, 0, "compute");
  ASSERT_EQ(merged->size(), 1u) << *narrow;
  EXPECT_NE(merged->front().tip.find("100 ops"), std::string::npos) << merged->front().tip;
}

TEST_F(SimSvg, OneRankOnAGivenTimeScale) {
  auto own = SimRankLanesSvg(module_, graph_, *result_, 1, "rank 1");
  auto twice = SimRankLanesSvg(module_, graph_, *result_, 1, "rank 1", 2 * result_->step_time);
  ASSERT_TRUE(own.ok() && twice.ok());
  auto a = Lane(*own, 1, "compute"), b = Lane(*twice, 1, "compute");
  ASSERT_TRUE(a && b && a->size() == 2 && b->size() == 2) << *twice;
  EXPECT_NEAR((*b)[1].width * 2, (*a)[1].width, 0.05);  // the same plan at half the scale
  EXPECT_TRUE(Lane(*twice, 1, "mp_comm"));
  EXPECT_FALSE(Lane(*twice, 0, "compute"));  // only the rank asked for
}

TEST_F(SimSvg, Errors) {
  auto bad_rank = SimRankLanesSvg(module_, graph_, *result_, 2, "");
  ASSERT_FALSE(bad_rank.ok());
  EXPECT_NE(bad_rank.status().message().find("rank 2 is not one of the plan's 2 ranks"),
            std::string::npos)
      << bad_rank.status().message();
  SimOptions no_timeline;
  no_timeline.record_timeline = false;
  auto bare = SimulateModule(module_, &graph_, no_timeline);
  ASSERT_TRUE(bare.ok());
  auto svg = SimScheduleSvg(module_, graph_, *bare, "");
  ASSERT_FALSE(svg.ok());
  EXPECT_NE(svg.status().message().find("no timeline"), std::string::npos);
}

}  // namespace
}  // namespace pw::cost
