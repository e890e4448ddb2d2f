#pragma once
// How far back a rank's compute last touched what each instruction reads. An op whose
// inputs were written long ago finds them out of the core's nearest caches: fthenb's
// backward reads every activation after all the forwards, 1f1b's right after its own. On a
// CPU the executor's small ops pay for that (benchmarks/schedule_kernel_costs.sh: ~10 % a
// step on one core without a pipeline), so the reads beyond a cache show where a schedule's
// order moves its ops' costs.
//
// The distance is the LRU stack distance in distinct bytes: what the rank's compute
// touched (read or wrote) since the slot's last touch. Each rank's order is replayed twice
// and the second pass reported, so that a step's first reads see the step before.

#include <cstdint>
#include <vector>

#include "simulator/sim_graph.h"

namespace pw::cost {

// Per instruction of `g` (0 for all but compute), the bytes of the slots it reads (not those
// it allocates) that its rank's compute touched more than `capacity` distinct bytes ago.
std::vector<int64_t> StaleReadBytes(const SimGraph& g, int64_t capacity);

}  // namespace pw::cost
