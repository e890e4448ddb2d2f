#include "tools/global_batch_flag.h"

#include "ir/limits.h"
#include "ir/number.h"

namespace pw::tools {

StatusOr<std::optional<int>> ReadGlobalBatchFlag(const Flags& flags, const Module& module,
                                                 int replicas) {
  if (!flags.Has("global-batch")) return std::optional<int>();
  if (flags.Has("micro-batches"))
    return InvalidArgument("give --global-batch or --micro-batches, not both");
  PW_ASSIGN_OR_RETURN(const int64_t global, flags.GetInt("global-batch", 0, 1, kInt64Max));
  const int64_t b = module.metadata.GetInt("micro_batch_size", 0);
  if (b < 1)
    return InvalidArgument("flag --global-batch: module '", module.name,
                           "' records no micro-batch size (build it with pipeweave build-model, "
                           "or give --micro-batches per replica)");
  const int64_t per_step = int64_t{replicas} * b;
  if (global % per_step != 0)
    return InvalidArgument("flag --global-batch ", global, " is not a multiple of dp ", replicas,
                           " x micro-batch size ", b, " (", per_step,
                           "): the replicas must share the batch evenly");
  const int64_t micro_batches = global / per_step;
  if (micro_batches > kMaxMicroBatches)
    return InvalidArgument("flag --global-batch ", global, " gives ", micro_batches,
                           " micro-batches per replica, more than ", kMaxMicroBatches);
  if (!module.plan.empty() && micro_batches != module.plan.num_micro_batches)
    return InvalidArgument("flag --global-batch ", global, " is ", micro_batches,
                           " micro-batches per replica (dp ", replicas, " x micro-batch size ", b,
                           "), but the plan schedules ", module.plan.num_micro_batches,
                           ": plan it with schedule{micro-batches=", micro_batches, "}");
  return std::optional<int>(static_cast<int>(micro_batches));
}

}  // namespace pw::tools
