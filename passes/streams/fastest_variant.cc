#include "passes/streams/fastest_variant.h"

namespace pw {

StatusOr<size_t> FastestVariant(const Module& module, const cost::Simulator& simulator,
                                size_t count, const std::function<void(Module&, size_t)>& make) {
  size_t best = 0;
  double best_time = 0;
  for (size_t i = 0; i < count; ++i) {
    Module trial = module;
    make(trial, i);
    PW_ASSIGN_OR_RETURN(cost::SimResult result, simulator.Run(trial));
    if (i == 0 || result.step_time < best_time * (1 - 1e-9)) {
      best = i;
      best_time = result.step_time;
    }
  }
  return best;
}

}  // namespace pw
