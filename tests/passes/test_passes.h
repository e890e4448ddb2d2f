#pragma once
// Test-only passes for the parser, registry and manager tests, registered in a local
// PassRegistry (TestPassRegistry) rather than the global one.

#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw::testing {

// "test-options": one option of every supported type; changes nothing.
class OptionsPass : public Pass {
 public:
  std::string_view name() const override { return "test-options"; }
  std::string_view description() const override { return "Has options of every type."; }
  Option<int> count{this, "count", "a count", 3};
  Option<int64_t> big{this, "big", "a 64-bit integer"};
  Option<double> rate{this, "rate", "a rate", 0.5};
  Option<bool> flag{this, "flag", "a switch", false};
  Option<std::string> mode{this, "mode", "a mode", "fast", {"fast", "slow"}};
  Option<std::string> path{this, "path", "any text"};
  Status ValidateOptions() const override {
    return count.value() < 0 ? InvalidArgument("count must be >= 0") : OkStatus();
  }
  StatusOr<bool> Run(Module&, PassContext&) override { return false; }
};

// "test-noop": no options, changes nothing.
class NoopPass : public Pass {
 public:
  std::string_view name() const override { return "test-noop"; }
  std::string_view description() const override { return "Does nothing."; }
  StatusOr<bool> Run(Module&, PassContext&) override { return false; }
};

// "test-rename": renames the module and records a statistic.
class RenamePass : public Pass {
 public:
  std::string_view name() const override { return "test-rename"; }
  std::string_view description() const override { return "Renames the module."; }
  Option<std::string> to{this, "to", "the new name", "renamed"};
  StatusOr<bool> Run(Module& module, PassContext& context) override {
    module.name = to.value();
    context.AddStatistic("renames");
    context.AddStatistic("renames");
    return true;
  }
};

// "test-break": adds an op that reads an undeclared var, so verification fails.
class BreakPass : public Pass {
 public:
  std::string_view name() const override { return "test-break"; }
  std::string_view description() const override { return "Breaks the module."; }
  StatusOr<bool> Run(Module& module, PassContext&) override;
};

// "test-fail": fails with an error.
class FailPass : public Pass {
 public:
  std::string_view name() const override { return "test-fail"; }
  std::string_view description() const override { return "Always fails."; }
  StatusOr<bool> Run(Module&, PassContext&) override {
    return FailedPrecondition("the module is not ready");
  }
};

// A registry with every test pass above.
const PassRegistry& TestPassRegistry();

}  // namespace pw::testing
