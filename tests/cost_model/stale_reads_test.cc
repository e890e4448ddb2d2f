// What each instruction reads from beyond a cache: LRU stack distances in distinct bytes
// over a rank's compute, in the steady state (the order replayed twice).

#include "simulator/stale_reads.h"

#include <gtest/gtest.h>

namespace pw::cost {
namespace {

// One rank's compute: each instruction touches `uses`, of which `allocs` it writes new.
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
    g.rank_order[0].push_back(static_cast<int>(g.instrs.size()));
    g.instrs.push_back(instr);
  }
  return g;
}

TEST(StaleReads, CountsReadsWhoseSlotWasTouchedMoreThanTheCapacityAgo) {
  // x (100 B) written, y (1000 B) written, x read beside z (100 B) written.
  SimGraph g = Graph({100, 1000, 100}, {{{0}, {0}}, {{1}, {1}}, {{0, 2}, {2}}});
  // x's read comes after y: 1000 distinct bytes since x was written.
  EXPECT_EQ(StaleReadBytes(g, 500), (std::vector<int64_t>{0, 0, 100}));
  EXPECT_EQ(StaleReadBytes(g, 1000), (std::vector<int64_t>{0, 0, 0}));
}

TEST(StaleReads, TheStepBeforeIsWhatAStepsFirstReadsFind) {
  // w (400 B, persistent) read first in a step, after the step's activations (2 x 300 B).
  SimGraph g = Graph({400, 300, 300}, {{{0, 1}, {1}}, {{1, 2}, {2}}});
  g.slots[0].persistent = true;
  // w's read: a (300) and b (300) touched since the last step's read of w.
  EXPECT_EQ(StaleReadBytes(g, 500)[0], 400);
  EXPECT_EQ(StaleReadBytes(g, 600)[0], 0);
}

TEST(StaleReads, ABackwardLongAfterItsForwardReadsFromFurther) {
  // Two micro-batches' activations a0, a1 (1000 B each) and weights w (500 B): fthenb's
  // order (F0 F1 B1 B0) reads a0 two jobs after writing it, 1f1b's (F0 B0 F1 B1) right after.
  const std::vector<int64_t> bytes = {500, 1000, 1000};
  const Touch f0{{0, 1}, {1}}, f1{{0, 2}, {2}}, b0{{0, 1}, {}}, b1{{0, 2}, {}};
  auto total = [](const std::vector<int64_t>& v) {
    int64_t sum = 0;
    for (int64_t b : v) sum += b;
    return sum;
  };
  const int64_t one_f_one_b = total(StaleReadBytes(Graph(bytes, {f0, b0, f1, b1}), 1200));
  const int64_t f_then_b = total(StaleReadBytes(Graph(bytes, {f0, f1, b1, b0}), 1200));
  EXPECT_EQ(one_f_one_b, 0);
  EXPECT_EQ(f_then_b, 1000);  // b0's read of a0: w and a1 since
}

TEST(StaleReads, CountsComputeOnly) {
  SimGraph g = Graph({100, 1000}, {{{0}, {0}}, {{1}, {1}}, {{0}, {}}});
  g.instrs[1].kind = InstrKind::kCollective;  // its touch does not count
  EXPECT_EQ(StaleReadBytes(g, 500), (std::vector<int64_t>{0, 0, 0}));
}

}  // namespace
}  // namespace pw::cost
