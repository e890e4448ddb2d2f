#pragma once
// How far back a rank's compute last touched the memory each instruction reads or writes. An
// op whose inputs were written long ago finds them out of the core's nearest caches:
// fthenb's backward reads every activation after all the forwards, 1f1b's right after its
// own. On a CPU the executor's small ops pay for that (benchmarks/schedule_kernel_costs.sh:
// ~10 % a step on one core without a pipeline), so the bytes found beyond a cache show where
// a schedule's order moves its ops' costs, and price it (PriceStaleBytes).
//
// Memory is counted in blocks, as an allocator hands them out: a slot takes the block of its
// size its rank freed last (free lists hand back the most recent), else new memory, and keeps
// it until its last use; a parameter or accumulator holds its own. The distance is the LRU
// stack distance in distinct bytes: what the rank's compute touched since the block's last
// touch. Writing into a block gone cold costs as reading it (a CPU fetches the line first),
// so an allocation counts too: under fthenb the activations of later micro-batches go into
// blocks freed a step ago. Each rank's order is replayed twice and the second pass reported,
// so that a step sees the step before.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cost_model/op_cost_table.h"
#include "cost_model/stale_price.h"
#include "simulator/sim_graph.h"

namespace pw::cost {

// Per instruction of `g` (0 for all but compute), the bytes of the blocks it reads and of
// those it allocates and writes that its rank's compute touched more than `capacity`
// distinct bytes ago (or never: new memory).
struct StaleBytes {
  std::vector<int64_t> reads;
  std::vector<int64_t> writes;
};
StaleBytes CountStaleBytes(const SimGraph& g, int64_t capacity);
// The same for each of `capacities`, from one replay of the order.
std::vector<StaleBytes> CountStaleBytes(const SimGraph& g, const std::vector<int64_t>& capacities);

// Per capacity, by signature key (the compute instructions that have one): what a run of it
// finds beyond that cache (reads and writes) and its runs a step, over every rank of a graph.
std::vector<std::map<std::string, StaleCounts::Count>> StaleBytesBySignature(
    const SimGraph& g, const std::vector<int64_t>& capacities);

// Whether `table` prices memory beyond a cache (OpCostTable.stale_price and _capacity).
bool HasStalePrice(const OpCostTable& table);

// Per instruction of `g`, the seconds `table`'s price adds (negative: takes off) to a compute
// instruction it prices from a measured entry of an in-run profile, for what it finds beyond
// the table's cache (`stale`: g's counts at that cache) above (below) the entry's mean; empty
// for a table without a price.
std::vector<double> StaleSeconds(const OpCostTable& table, const SimGraph& g,
                                 const StaleBytes& stale);

// Reprices the compute instructions of `g` that `table` prices from a measured entry of an
// in-run profile (OpCostEntry.stale_bytes): one that finds more bytes beyond the table's
// cache (OpCostTable.stale_capacity) than the runs that measured its entry did on average
// pays table.stale_price for each byte more, one that finds fewer is that much cheaper (down
// to nothing). Nothing changes for a table without a price. `g` must be priced by `table`
// (the table a plan of its schedule is priced with: OpCostTable::ForSchedule).
void PriceStaleBytes(const OpCostTable& table, SimGraph& g);

}  // namespace pw::cost
