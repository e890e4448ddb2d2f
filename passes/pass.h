#pragma once
// A pass rewrites a Module in place. Like MLIR's Pass: a stable name used in pipeline
// text, a one-paragraph description, options declared as members, and a Run that says
// whether it changed anything. A pass is stateless between runs apart from its options;
// the PassRegistry creates a fresh instance for every occurrence in a pipeline.
//
//   class DcePass : public Pass {
//    public:
//     std::string_view name() const override { return "dce"; }
//     std::string_view description() const override { return "Removes dead ops."; }
//     StatusOr<bool> Run(Module& module, PassContext& context) override;
//   };
//   PW_REGISTER_PASS(DcePass)  // see pass_registry.h

#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"
#include "ir/status.h"
#include "passes/pass_context.h"
#include "passes/pass_option.h"

namespace pw {

class Pass {
 public:
  Pass(const Pass&) = delete;  // options point back at their pass
  Pass& operator=(const Pass&) = delete;
  virtual ~Pass() = default;

  // The name in pipeline text: lower-case words joined by '-', e.g. "append-backward".
  virtual std::string_view name() const = 0;
  // What the pass does and what it expects of the module, for `--list-passes`.
  virtual std::string_view description() const = 0;

  // Checks option values that parse but make no sense together or are out of range
  // (e.g. a negative learning rate). Called by the pipeline parser after setting options.
  virtual Status ValidateOptions() const { return OkStatus(); }

  // Rewrites `module`. Returns true when it changed the module, false when it left it as
  // it was, or an error whose one-line message names what is wrong; on error the module
  // may be partly rewritten and must be discarded.
  virtual StatusOr<bool> Run(Module& module, PassContext& context) = 0;

  // Options in declaration order.
  const std::vector<PassOptionBase*>& options() const { return options_; }
  PassOptionBase* FindOption(std::string_view name) const;
  // "append-backward{optimizer=adam,lr=0.1}": the name and the options set explicitly,
  // in a form the pipeline parser reads back.
  std::string PipelineText() const;

 protected:
  Pass() = default;

 private:
  friend class PassOptionBase;
  std::vector<PassOptionBase*> options_;
};

}  // namespace pw
