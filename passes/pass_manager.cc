#include "passes/pass_manager.h"

#include "ir/verifier.h"

namespace pw {

Status PassManager::AddPipeline(std::string_view text, const PassRegistry& registry) {
  PW_ASSIGN_OR_RETURN(PassList passes, ParsePassPipeline(text, registry));
  for (auto& pass : passes) AddPass(std::move(pass));
  return OkStatus();
}

void PassManager::EnablePrintAfter(std::set<std::string> pass_names, std::ostream& out) {
  AddInstrumentation(std::make_unique<PrintIRInstrumentation>(std::move(pass_names), out));
}
void PassManager::EnableTiming(std::ostream& out) {
  AddInstrumentation(std::make_unique<PassTimingInstrumentation>(out));
}
void PassManager::EnableStatistics(std::ostream& out) {
  AddInstrumentation(std::make_unique<PassStatisticsInstrumentation>(out));
}
void PassManager::AddInstrumentation(std::unique_ptr<PassInstrumentation> instrumentation) {
  instrumentations_.push_back(std::move(instrumentation));
}

StatusOr<bool> PassManager::Run(Module& module) {
  PassContext context(ops_);
  return Run(module, context);
}

StatusOr<bool> PassManager::Run(Module& module, PassContext& context) {
  for (auto& i : instrumentations_) i->RunBeforePipeline(module);
  StatusOr<bool> result = RunPipeline(module, context);
  for (auto& i : instrumentations_) i->RunAfterPipeline(module, context);
  return result;
}

StatusOr<bool> PassManager::RunPipeline(Module& module, PassContext& context) {
  if (verify_) {
    Status s = Verify(module, nullptr);
    if (!s.ok()) return s.WithContext("the input module does not verify");
  }
  bool changed = false;
  for (const auto& pass : passes_) {
    for (auto& i : instrumentations_) i->RunBeforePass(*pass, module);
    context.BeginPass(pass->name());
    StatusOr<bool> pass_changed = pass->Run(module, context);
    if (!pass_changed.ok()) {
      for (auto& i : instrumentations_) i->RunAfterPassFailed(*pass, module);
      return pass_changed.status().WithContext(StrCat("pass '", pass->name(), "' failed"));
    }
    for (auto& i : instrumentations_) i->RunAfterPass(*pass, module, *pass_changed);
    changed = changed || *pass_changed;
    // A pass that reports no change promises the module is as it was, hence still valid.
    if (verify_ && *pass_changed) {
      Status s = Verify(module, pass.get());
      if (!s.ok())
        return s.WithContext(StrCat("verification failed after pass '", pass->name(), "'"));
    }
  }
  return changed;
}

Status PassManager::Verify(const Module& module, const Pass* after) {
  for (auto& i : instrumentations_) i->RunBeforeVerifier(after);
  Status s = VerifyModule(module, ops_);
  for (auto& i : instrumentations_) i->RunAfterVerifier(after);
  return s;
}

}  // namespace pw
