#include "simulator/repeat_steps.h"

#include <limits>

namespace pw::cost {

StatusOr<SimGraph> RepeatSteps(const SimGraph& one, int steps) {
  if (steps < 1) return InvalidArgument("steps must be at least 1, got ", steps);
  if (one.steps != 1) return InvalidArgument("the graph already holds ", one.steps, " steps");
  const size_t n = one.instrs.size();
  if (n * static_cast<size_t>(steps) > static_cast<size_t>(std::numeric_limits<int>::max()))
    return InvalidArgument(steps, " steps of ", n, " instructions are more than the simulator ",
                           "indexes");
  SimGraph out;
  out.world_size = one.world_size;
  out.num_micro_batches = one.num_micro_batches;
  out.steps = steps;
  out.job_names = one.job_names;
  out.signatures = one.signatures;
  out.auto_events = one.auto_events;
  out.replica_of = one.replica_of;
  // Slots: persistent ones keep their index (held across steps); each step gets its own
  // copy of the rest.
  std::vector<int> step_slot(one.slots.size(), -1);
  out.slots = one.slots;
  out.instrs.reserve(n * steps);
  out.collectives.reserve(one.collectives.size() * steps);
  out.rank_order.assign(one.rank_order.size(), {});
  for (int s = 0; s < steps; ++s) {
    const int base = static_cast<int>(n) * s;
    const int collective_base = static_cast<int>(one.collectives.size()) * s;
    for (size_t k = 0; k < one.slots.size(); ++k) {
      if (one.slots[k].persistent || s == 0) {
        step_slot[k] = static_cast<int>(k);
      } else {
        step_slot[k] = static_cast<int>(out.slots.size());
        out.slots.push_back(one.slots[k]);
      }
    }
    for (const SimInstr& in : one.instrs) {
      SimInstr copy = in;
      copy.step = s;
      for (int& d : copy.deps) d += base;
      if (copy.partner >= 0) copy.partner += base;
      if (copy.collective >= 0) copy.collective += collective_base;
      for (int& slot : copy.allocs) slot = step_slot[slot];
      for (int& slot : copy.uses) slot = step_slot[slot];
      out.instrs.push_back(std::move(copy));
    }
    for (const SimCollective& c : one.collectives) {
      SimCollective copy = c;
      for (int& m : copy.members) m += base;
      out.collectives.push_back(std::move(copy));
    }
    for (size_t r = 0; r < one.rank_order.size(); ++r)
      for (int i : one.rank_order[r]) out.rank_order[r].push_back(i + base);
  }
  return out;
}

}  // namespace pw::cost
