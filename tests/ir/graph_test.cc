#include "ir/graph.h"

#include <gtest/gtest.h>

#include <random>

namespace pw {
namespace {

Op Unary(const std::string& in, const std::string& out) {
  Op op;
  op.type = "unary";
  op.SetInput("X", {in}).SetOutput("Out", {out});
  return op;
}

bool HasEdge(const DepGraph& g, OpIndex a, OpIndex b, DepKind kind) {
  auto [e, found] = boost::edge(a, b, g);
  return found && (g[e].kinds & static_cast<uint8_t>(kind));
}

TEST(GraphTest, RawWarWawEdges) {
  Program p("main");
  p.AddOp(Unary("x", "a"));  // 0: writes a
  p.AddOp(Unary("a", "b"));  // 1: reads a (RAW on 0)
  p.AddOp(Unary("x", "a"));  // 2: rewrites a (WAR on 1, WAW on 0)
  p.AddOp(Unary("a", "c"));  // 3: RAW on 2 only
  DepGraph g = BuildDependencyGraph(p);
  EXPECT_TRUE(HasEdge(g, 0, 1, DepKind::kRaw));
  EXPECT_TRUE(HasEdge(g, 1, 2, DepKind::kWar));
  EXPECT_TRUE(HasEdge(g, 0, 2, DepKind::kWaw));
  EXPECT_TRUE(HasEdge(g, 2, 3, DepKind::kRaw));
  EXPECT_FALSE(boost::edge(0, 3, g).second);
  EXPECT_EQ(boost::num_edges(g), 4u);
}

TEST(GraphTest, ParallelEdgesMerge) {
  Program p("main");
  p.AddOp(Unary("x", "a"));
  Op two;
  two.type = "ew";
  two.SetInput("X", {"a"}).SetInput("Y", {"a"}).SetOutput("Out", {"b"});
  p.AddOp(two);
  EXPECT_EQ(boost::num_edges(BuildDependencyGraph(p)), 1u);
}

// A chain plus shortcuts: 0->1->2->3 and 0->2, 0->3, 1->3 via shared reads.
Program Diamondish() {
  Program p("main");
  Op a;
  a.type = "gen";
  a.SetOutput("Out", {"a"});
  p.AddOp(a);
  Op b = Unary("a", "b");
  p.AddOp(b);
  Op c;
  c.type = "ew";
  c.SetInput("X", {"a"}).SetInput("Y", {"b"}).SetOutput("Out", {"c"});
  p.AddOp(c);
  Op d;
  d.type = "sum";
  d.SetInput("X", {"a", "b", "c"}).SetOutput("Out", {"d"});
  p.AddOp(d);
  return p;
}

TEST(GraphTest, TopologicalOrderRespectsEdges) {
  DepGraph g = BuildDependencyGraph(Diamondish());
  auto order = TopologicalOrder(g);
  std::vector<size_t> pos(order.size());
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
  for (auto [e, end] = boost::edges(g); e != end; ++e)
    EXPECT_LT(pos[boost::source(*e, g)], pos[boost::target(*e, g)]);
}

TEST(GraphTest, ReachabilityAndTransitiveReduction) {
  DepGraph g = BuildDependencyGraph(Diamondish());
  EXPECT_EQ(boost::num_edges(g), 6u);
  EXPECT_TRUE(IsReachable(g, 0, 3));
  EXPECT_FALSE(IsReachable(g, 3, 0));
  ReachabilityIndex index(g);
  DepGraph r = TransitiveReduction(g);
  EXPECT_EQ(boost::num_edges(r), 3u);  // only the chain remains
  for (OpIndex u = 0; u < 4; ++u)
    for (OpIndex v = 0; v < 4; ++v) {
      EXPECT_EQ(index.Reaches(u, v), IsReachable(g, u, v));
      EXPECT_EQ(IsReachable(r, u, v), IsReachable(g, u, v));
    }
}

TEST(GraphTest, TransitiveReductionPreservesReachabilityOnRandomPrograms) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    Program p("main");
    int n = 40;
    for (int i = 0; i < n; ++i) {
      Op op;
      op.type = "sum";
      std::vector<std::string> ins;
      for (int k = 0; k < 3 && i > 0; ++k) ins.push_back("v" + std::to_string(rng() % i));
      op.SetInput("X", ins).SetOutput("Out", {"v" + std::to_string(i)});
      p.AddOp(op);
    }
    DepGraph g = BuildDependencyGraph(p);
    DepGraph r = TransitiveReduction(g);
    ReachabilityIndex before(g), after(r);
    for (int u = 0; u < n; ++u)
      for (int v = 0; v < n; ++v) ASSERT_EQ(before.Reaches(u, v), after.Reaches(u, v));
    // Minimal: removing any kept edge changes reachability (for DAGs the reduction is unique).
    for (auto [e, end] = boost::edges(r); e != end; ++e) {
      OpIndex s = boost::source(*e, r), t = boost::target(*e, r);
      DepGraph copy = r;
      boost::remove_edge(s, t, copy);
      EXPECT_FALSE(IsReachable(copy, s, t));
    }
  }
}

TEST(GraphTest, LongestWeightedPath) {
  DepGraph g = BuildDependencyGraph(Diamondish());
  CriticalPath cp = LongestWeightedPath(g, {1, 5, 1, 2});
  EXPECT_DOUBLE_EQ(cp.length, 9);
  EXPECT_EQ(cp.ops, (std::vector<OpIndex>{0, 1, 2, 3}));
  cp = LongestWeightedPath(g, {1, 0, 0, 0});
  EXPECT_DOUBLE_EQ(cp.length, 1);
}

TEST(GraphTest, DefUseCycleIgnoresInPlaceUpdates) {
  Program p("main");
  p.AddOp(Unary("w", "a"));  // reads parameter w
  Op upd;
  upd.type = "update";
  upd.SetInput("P", {"w"}).SetInput("G", {"a"}).SetOutput("POut", {"w"});
  p.AddOp(upd);  // writes w in place: no cycle
  EXPECT_FALSE(FindDefUseCycle(p).has_value());
  Program c("main");
  c.AddOp(Unary("c", "a"));
  c.AddOp(Unary("a", "b"));
  c.AddOp(Unary("b", "c"));
  auto cycle = FindDefUseCycle(c);
  ASSERT_TRUE(cycle.has_value());
  EXPECT_EQ(cycle->size(), 3u);
}

}  // namespace
}  // namespace pw
