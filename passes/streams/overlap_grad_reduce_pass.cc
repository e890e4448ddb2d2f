// overlap-grad-reduce: a data-parallel plan's gradient all-reduces start during the
// backward. Each gradient sum is all-reduced over its dp group on the dp_comm stream as
// soon as the rank has accumulated its last micro-batch, so the reductions of the later
// layers run under the backward of the earlier ones instead of all after it. Nothing else
// moves and the same all-reduce sums the same values: bit-identical training.

#include "ir/grad_reduce.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

class OverlapGradReducePass : public Pass {
 public:
  std::string_view name() const override { return "overlap-grad-reduce"; }
  std::string_view description() const override {
    return "On a planned module with dp > 1: each gradient sum's all-reduce over dp runs on "
           "the dp_comm stream as soon as the rank has accumulated the gradient's last "
           "micro-batch (under the rest of the backward) instead of at the step's end before "
           "the optimizer. The scale by 1/(micro-batches x dp) stays before the optimizer. "
           "Bit-identical; changes nothing at dp 1.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.plan.empty())
      return FailedPrecondition(
          "overlap-grad-reduce needs a plan: run it after split-program and schedule");
    if (module.mesh.dp < 2) return false;
    if (module.metadata.GetString(kMetaGradReduce) == kGradReduceInBackward) return false;
    module.metadata.Set(kMetaGradReduce, std::string(kGradReduceInBackward));
    context.AddStatistic("dp-reductions-in-backward");
    return true;
  }
};

}  // namespace

PW_REGISTER_PASS(OverlapGradReducePass)

}  // namespace pw
