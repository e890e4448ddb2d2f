// What each instruction finds beyond a cache: LRU stack distances in distinct bytes over a
// rank's memory blocks, in the steady state (the order replayed twice), and the price the
// simulator puts on them.

#include "simulator/stale_bytes.h"

#include <gtest/gtest.h>

namespace pw::cost {
namespace {

// One rank's compute: each instruction touches `uses`, of which it allocates `allocs`.
struct Touch {
  std::vector<int> uses;
  std::vector<int> allocs;
};

SimGraph Graph(const std::vector<int64_t>& slot_bytes, const std::vector<Touch>& order) {
  SimGraph g;
  g.world_size = 1;
  g.rank_order.resize(1);
  for (int64_t bytes : slot_bytes) {
    SimSlot slot;
    slot.bytes = bytes;
    g.slots.push_back(slot);
  }
  for (const Touch& t : order) {
    SimInstr instr;
    instr.uses = t.uses;
    instr.allocs = t.allocs;
    for (int slot : t.uses) ++g.slots[slot].uses;
    g.rank_order[0].push_back(static_cast<int>(g.instrs.size()));
    g.instrs.push_back(instr);
  }
  return g;
}

int64_t Sum(const std::vector<int64_t>& v) {
  int64_t sum = 0;
  for (int64_t b : v) sum += b;
  return sum;
}

TEST(StaleBytes, CountsReadsOfBlocksTouchedMoreThanTheCapacityAgo) {
  // Persistent p (100 B), q (1000 B), r (100 B): p, then q, then p and r.
  SimGraph g = Graph({100, 1000, 100}, {{{0}, {}}, {{1}, {}}, {{0, 2}, {}}});
  for (SimSlot& s : g.slots) s.persistent = true;
  // The third instruction's p: q (1000 B) since; its r: p and q since the step before
  // (1100 B). The first's p: r alone since the step before's third.
  EXPECT_EQ(CountStaleBytes(g, 500).reads, (std::vector<int64_t>{0, 0, 200}));
  EXPECT_EQ(CountStaleBytes(g, 1000).reads, (std::vector<int64_t>{0, 0, 100}));
  EXPECT_EQ(Sum(CountStaleBytes(g, 1100).reads), 0);
  EXPECT_EQ(Sum(CountStaleBytes(g, 0).writes), 0);  // nothing allocated
}

TEST(StaleBytes, TheStepBeforeIsWhatAStepsFirstReadsFind) {
  // w (400 B, persistent) read first in a step, after the step's activations (2 x 300 B).
  SimGraph g = Graph({400, 300, 300}, {{{0, 1}, {1}}, {{1, 2}, {2}}});
  g.slots[0].persistent = true;
  // w's read: a (300) and b (300) touched since the last step's read of w.
  EXPECT_EQ(CountStaleBytes(g, 500).reads[0], 400);
  EXPECT_EQ(CountStaleBytes(g, 600).reads[0], 0);
  // a takes the block b freed last (at the end of the step before): w (400) since.
  EXPECT_EQ(CountStaleBytes(g, 500).writes[0], 0);
  EXPECT_EQ(CountStaleBytes(g, 300).writes[0], 300);
}

TEST(StaleBytes, ABackwardLongAfterItsForwardFindsItsActivationsFurther) {
  // Two micro-batches' activations a0, a1 (1000 B each) and weights w (500 B). 1f1b's order
  // (F0 B0 F1 B1) reads a0 right after writing it, and a1 goes into a0's block; fthenb's
  // (F0 F1 B1 B0) reads a0 after a1 and w, and F1 writes into the block B1 freed a step ago.
  const std::vector<int64_t> bytes = {500, 1000, 1000};
  const Touch f0{{0, 1}, {1}}, f1{{0, 2}, {2}}, b0{{0, 1}, {}}, b1{{0, 2}, {}};
  auto graph = [&](const std::vector<Touch>& order) {
    SimGraph g = Graph(bytes, order);
    g.slots[0].persistent = true;
    return g;
  };
  const StaleBytes one_f_one_b = CountStaleBytes(graph({f0, b0, f1, b1}), 1200);
  EXPECT_EQ(Sum(one_f_one_b.reads) + Sum(one_f_one_b.writes), 0);
  const StaleBytes f_then_b = CountStaleBytes(graph({f0, f1, b1, b0}), 1200);
  EXPECT_EQ(f_then_b.reads, (std::vector<int64_t>{0, 0, 0, 1000}));
  EXPECT_EQ(f_then_b.writes, (std::vector<int64_t>{0, 1000, 0, 0}));
}

TEST(StaleBytes, CommunicationTouchesOnlyWhatItReceives) {
  // x (100 B) written; y (1000 B, persistent) summed by a collective; x read.
  SimGraph g = Graph({100, 1000}, {{{0}, {0}}, {{1}, {}}, {{0}, {}}});
  g.slots[1].persistent = true;
  g.instrs[1].kind = InstrKind::kCollective;
  EXPECT_EQ(CountStaleBytes(g, 500).reads, (std::vector<int64_t>{0, 0, 0}));
  // A recv's y is written where it lands: x's read then finds 1000 B since.
  SimGraph recv = Graph({100, 1000}, {{{0}, {0}}, {{1}, {1}}, {{0, 1}, {}}});
  recv.instrs[1].kind = InstrKind::kRecv;
  EXPECT_EQ(CountStaleBytes(recv, 500).reads, (std::vector<int64_t>{0, 0, 100}));
}

TEST(StaleBytes, BySignatureGivesTheMeanARunFindsAndTheRunsAStep) {
  const std::vector<int64_t> bytes = {500, 1000, 1000};
  SimGraph g = Graph(bytes, {{{0, 1}, {1}}, {{0, 2}, {2}}, {{0, 2}, {}}, {{0, 1}, {}}});
  g.slots[0].persistent = true;
  g.signatures = {"f", "b"};
  for (int i : {0, 1}) g.instrs[i].signature = 0;
  for (int i : {2, 3}) g.instrs[i].signature = 1;
  const auto by = StaleBytesBySignature(g, {1200}).front();
  ASSERT_EQ(by.size(), 2u);
  EXPECT_DOUBLE_EQ(by.at("f").bytes, 500);  // one write of 1000 over two runs
  EXPECT_DOUBLE_EQ(by.at("f").runs, 2);
  EXPECT_DOUBLE_EQ(by.at("b").bytes, 500);
}

TEST(StaleBytes, ThePriceMovesTableCostsByWhatEachRunFindsAboveTheProfiledMean) {
  // fthenb's order: B0 finds 1000 B beyond 1200, B1 none; the table's runs found 400.
  const std::vector<int64_t> bytes = {500, 1000, 1000};
  SimGraph g = Graph(bytes, {{{0, 1}, {1}}, {{0, 2}, {2}}, {{0, 2}, {}}, {{0, 1}, {}}});
  g.slots[0].persistent = true;
  g.signatures = {"b"};
  for (int i : {2, 3}) {
    g.instrs[i].signature = 0;
    g.instrs[i].seconds = 1e-6;
    g.instrs[i].path = EstimatePath::kTable;
  }
  OpCostTable table;
  OpCostEntry entry;
  entry.set_key("b");
  entry.set_op_type("b");
  entry.set_median(1e-6);
  entry.set_repeats(1);
  entry.set_stale_bytes(400);
  table.Add(entry);
  table.mutable_proto().set_stale_capacity(1200);
  SimGraph unpriced = g;
  PriceStaleBytes(table, unpriced);  // no price: nothing moves
  EXPECT_DOUBLE_EQ(unpriced.instrs[3].seconds, 1e-6);
  EXPECT_TRUE(StaleSeconds(table, g, CountStaleBytes(g, 1200)).empty());
  table.mutable_proto().set_stale_price(1e-9);
  const std::vector<double> added = StaleSeconds(table, g, CountStaleBytes(g, 1200));
  ASSERT_EQ(added.size(), 4u);
  EXPECT_DOUBLE_EQ(added[0], 0);  // no signature
  EXPECT_DOUBLE_EQ(added[3], 600e-9);
  SimGraph priced = g;
  PriceStaleBytes(table, priced);
  EXPECT_DOUBLE_EQ(priced.instrs[3].seconds, 1e-6 + 600e-9);  // 1000 found, 400 measured
  EXPECT_DOUBLE_EQ(priced.instrs[2].seconds, 1e-6 - 400e-9);  // none found
  // Not priced from the table's entry (interpolated, say): as estimated.
  g.instrs[3].path = EstimatePath::kInterpolated;
  PriceStaleBytes(table, g);
  EXPECT_DOUBLE_EQ(g.instrs[3].seconds, 1e-6);
  // Never below nothing.
  table.mutable_proto().set_stale_price(1e-8);
  SimGraph cheap = priced;
  cheap.instrs[2].seconds = 1e-6;
  PriceStaleBytes(table, cheap);
  EXPECT_DOUBLE_EQ(cheap.instrs[2].seconds, 0);
}

}  // namespace
}  // namespace pw::cost
