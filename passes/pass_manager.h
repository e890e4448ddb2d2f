#pragma once
// Runs a pipeline of passes over a module (as MLIR's PassManager):
//
//   PassManager pm;  // verifies with ops::Registry()
//   PW_RETURN_IF_ERROR(pm.AddPipeline("append-backward{optimizer=adam},dce"));
//   pm.EnableTiming(std::cerr);
//   PW_ASSIGN_OR_RETURN(bool changed, pm.Run(module));
//
// Verification is on by default: the input module is verified before the first pass and
// the module again after every pass that changed it, so a broken rewrite is reported with
// the name of the pass that broke it. Errors are one line:
//   pass 'dce' failed: ...
//   verification failed after pass 'append-backward': program 'main', op 12 (sum): ...

#include <iosfwd>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"
#include "ir/op_def.h"
#include "ir/status.h"
#include "ops/registry.h"
#include "passes/pass.h"
#include "passes/pass_context.h"
#include "passes/pass_instrumentation.h"
#include "passes/pipeline_parser.h"

namespace pw {

class PassManager {
 public:
  // `ops` gives the verifier and the passes their op definitions; it must outlive the
  // manager.
  explicit PassManager(const OpRegistry& ops = ops::Registry()) : ops_(ops) {}

  void AddPass(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  // Parses `text` (see pipeline_parser.h) and appends its passes.
  Status AddPipeline(std::string_view text, const PassRegistry& registry = PassRegistry::Global());
  const PassList& passes() const { return passes_; }

  // Verification of the input and after each pass (default on).
  void EnableVerifier(bool enabled) { verify_ = enabled; }
  // `--print-after`: `pass_names` are pass names or "all".
  void EnablePrintAfter(std::set<std::string> pass_names, std::ostream& out);
  // `--time-passes`.
  void EnableTiming(std::ostream& out);
  // `--stats`.
  void EnableStatistics(std::ostream& out);
  void AddInstrumentation(std::unique_ptr<PassInstrumentation> instrumentation);

  // Runs every pass in order; true when some pass changed the module. Stops at the first
  // error. The second form lets the caller attach services to the context and read the
  // statistics afterwards.
  StatusOr<bool> Run(Module& module);
  StatusOr<bool> Run(Module& module, PassContext& context);

 private:
  Status Verify(const Module& module, const Pass* after);
  StatusOr<bool> RunPipeline(Module& module, PassContext& context);

  const OpRegistry& ops_;
  PassList passes_;
  bool verify_ = true;
  std::vector<std::unique_ptr<PassInstrumentation>> instrumentations_;
};

}  // namespace pw
