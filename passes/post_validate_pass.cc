// post-validate: a module's loss scaling checked a step late, as amp{post-validate=true}
// plans it, for a module amp already rewrote (one `tune` searches): the stage ops are
// rebuilt post-validated (passes/loss_scaling.h). Before split-program; nothing to do with
// pp = 1 or when the check is post-validated already.

#include "passes/loss_scaling.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

class PostValidatePass : public Pass {
 public:
  std::string_view name() const override { return "post-validate"; }
  std::string_view description() const override {
    return "Checks loss scaling's overflow flag a step late on a module amp already rewrote "
           "(what amp{post-validate=true} plans): each rank updates unless its own gradients "
           "overflowed, after copying the state it changes, the flags' max over pp is reduced "
           "at the next step's start, and the executor redoes a step after one that "
           "overflowed anywhere. Before split-program; no change with pp = 1.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.programs().size() != 1 || !module.main_program().info().kind.empty())
      return FailedPrecondition(
          "post-validate runs on the unsplit module: put it before split-program");
    if (!HasLossScaling(module))
      return FailedPrecondition(
          "post-validate checks loss scaling's overflow flag a step late, and the module has "
          "no loss scaling: run amp{dtype=fp16} (or loss-scaling=dynamic) first");
    if (module.mesh.pp <= 1 || IsPostValidated(module)) return false;
    PW_RETURN_IF_ERROR(RestageLossScaling(module, /*post_validate=*/true));
    context.AddStatistic("post-validated");
    return true;
  }
};

}  // namespace

PW_REGISTER_PASS(PostValidatePass)

}  // namespace pw
