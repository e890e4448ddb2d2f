#include "tests/passes/test_passes.h"

namespace pw::testing {

StatusOr<bool> BreakPass::Run(Module& module, PassContext&) {
  Op op;
  op.type = "scale";
  op.SetInput("X", {"no_such_var"}).SetOutput("Out", {"broken"});
  module.main_program().AddOp(std::move(op));
  return true;
}

const PassRegistry& TestPassRegistry() {
  static const PassRegistry* registry = [] {
    auto* r = new PassRegistry();
    r->Register<OptionsPass>();
    r->Register<NoopPass>();
    r->Register<RenamePass>();
    r->Register<BreakPass>();
    r->Register<FailPass>();
    return r;
  }();
  return *registry;
}

}  // namespace pw::testing
