// The price of a byte found beyond a cache, fitted over the entries a table measured in runs
// of several schedules: the cache whose counts follow the signatures' cost changes, and the
// price that makes each order's step what its runs measured.

#include "cost_model/stale_price.h"

#include <gtest/gtest.h>

namespace pw::cost {
namespace {

constexpr double kPrice = 1e-12;  // seconds a byte

OpCostEntry Entry(const std::string& key, const std::string& schedule, double seconds) {
  OpCostEntry e;
  e.set_key(key);
  e.set_op_type("op");
  e.set_schedule(schedule);
  e.set_median(seconds);
  e.set_repeats(10);
  return e;
}

// Schedules a and b: k1 and k2 cost more under b by kPrice for each byte they find beyond
// the larger cache there; beyond the smaller one only k3 (whose cost b leaves alone) finds
// anything.
struct Profiled {
  OpCostTable table;
  StaleCounts counts{{1 << 20, 2 << 20}};
};
Profiled TwoOrders() {
  Profiled p;
  for (const char* s : {"a", "b"}) p.table.mutable_proto().add_in_run_schedules(s);
  const std::map<std::string, double> extra = {{"k1", 1e6}, {"k2", 2e6}, {"k3", 0}};
  for (const auto& [key, bytes] : extra) {
    p.table.Add(Entry(key, "", 1e-6));
    p.table.Add(Entry(key, "a", 1e-6));
    p.table.Add(Entry(key, "b", 1e-6 + kPrice * bytes));
  }
  using Count = StaleCounts::Count;
  p.counts.AddPlan("a", {{{"k1", Count{0, 1}}, {"k2", Count{0, 1}}, {"k3", Count{0, 1}}},
                         {{"k1", Count{0, 1}}, {"k2", Count{0, 1}}, {"k3", Count{0, 1}}}});
  p.counts.AddPlan("b", {{{"k1", Count{0, 1}}, {"k2", Count{0, 1}}, {"k3", Count{3e6, 1}}},
                         {{"k1", Count{1e6, 1}}, {"k2", Count{2e6, 1}}, {"k3", Count{0, 1}}}});
  return p;
}

TEST(StalePrice, CandidatesDoubleFromL2UpToL3) {
  EXPECT_EQ(StaleCounts::Candidates(1 << 20, 32 << 20),
            (std::vector<int64_t>{1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20}));
  EXPECT_EQ(StaleCounts::Candidates(1 << 20, 1 << 20), (std::vector<int64_t>{1 << 20}));
  EXPECT_TRUE(StaleCounts::Candidates(0, 32 << 20).empty());  // no L2 read: nothing counted
}

TEST(StalePrice, CountsAverageOverPlansPooledAndPerSchedule) {
  const Profiled p = TwoOrders();
  EXPECT_DOUBLE_EQ(*p.counts.Mean(1, "b", "k2"), 2e6);
  EXPECT_DOUBLE_EQ(*p.counts.Mean(1, "", "k2"), 1e6);  // a's 0 and b's 2e6
  EXPECT_FALSE(p.counts.Mean(1, "c", "k2").has_value());
  EXPECT_FALSE(p.counts.Mean(2, "a", "k2").has_value());  // no such candidate
  EXPECT_DOUBLE_EQ(p.counts.RunsPerStep().at("k1"), 1);
}

TEST(StalePrice, ChoosesTheCacheWhoseCountsFollowTheCostChanges) {
  const Profiled p = TwoOrders();
  const StaleFit fit = FitStalePrice(p.table, p.counts);
  ASSERT_TRUE(fit.fitted) << fit.Describe();
  EXPECT_EQ(fit.capacity, 2 << 20);
  EXPECT_NEAR(fit.price, kPrice, 1e-15);
  EXPECT_NEAR(fit.r_squared, 1, 1e-9);
  EXPECT_EQ(fit.signatures, 3);
  ASSERT_EQ(fit.orders.size(), 2u);
  EXPECT_DOUBLE_EQ(fit.orders[1].bytes, 3e6);
  EXPECT_NE(fit.Describe().find("2048 KiB cache priced at 0.001 ns a byte"), std::string::npos)
      << fit.Describe();
}

TEST(StalePrice, NothingToFitFromOneOrderOrOrdersThatFindAlike) {
  Profiled one = TwoOrders();
  one.table.mutable_proto().clear_in_run_schedules();
  one.table.mutable_proto().add_in_run_schedules("a");
  StaleFit fit = FitStalePrice(one.table, one.counts);
  EXPECT_FALSE(fit.fitted);
  EXPECT_EQ(fit.capacity, 1 << 20);  // the counts recorded beside the entries: L2's
  EXPECT_EQ(fit.Describe(), "");

  // b finds 30 KiB more than a: below what the costs' noise lets a fit tell apart.
  Profiled alike;
  for (const char* s : {"a", "b"}) alike.table.mutable_proto().add_in_run_schedules(s);
  alike.table.Add(Entry("k", "a", 1e-6));
  alike.table.Add(Entry("k", "b", 2e-6));
  alike.counts = StaleCounts({1 << 20});
  alike.counts.AddPlan("a", {{{"k", StaleCounts::Count{0, 1}}}});
  alike.counts.AddPlan("b", {{{"k", StaleCounts::Count{30 << 10, 1}}}});
  fit = FitStalePrice(alike.table, alike.counts);
  EXPECT_FALSE(fit.fitted);
  EXPECT_NE(fit.Describe().find("left unpriced"), std::string::npos) << fit.Describe();
}

TEST(StalePrice, TablesOfDifferentCachesDoNotMerge) {
  OpCostTable a, b;
  a.mutable_proto().set_stale_capacity(1 << 20);
  a.mutable_proto().set_stale_price(1e-10);
  b.mutable_proto().set_stale_capacity(4 << 20);
  const Status refused = a.Merge(b);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("1024 KiB"), std::string::npos) << refused.message();
  // The same cache: prices average, and a table without one takes the other's.
  b.mutable_proto().set_stale_capacity(1 << 20);
  b.mutable_proto().set_stale_price(3e-10);
  ASSERT_TRUE(a.Merge(b).ok());
  EXPECT_DOUBLE_EQ(a.proto().stale_price(), 2e-10);
  OpCostTable c;
  ASSERT_TRUE(c.Merge(a).ok());
  EXPECT_EQ(c.proto().stale_capacity(), 1 << 20);
  EXPECT_DOUBLE_EQ(c.proto().stale_price(), 2e-10);
}

}  // namespace
}  // namespace pw::cost
