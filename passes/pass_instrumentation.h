#pragma once
// Hooks the PassManager calls around the pipeline, every pass and every verification (as
// in MLIR's PassInstrumentation). The built-in ones implement `--print-after`,
// `--time-passes` and `--stats`; others (e.g. a simulator that scores the module after
// each pass) derive from PassInstrumentation and are added with
// PassManager::AddInstrumentation.

#include <chrono>
#include <iosfwd>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ir/module.h"
#include "passes/pass.h"
#include "passes/pass_context.h"

namespace pw {

class PassInstrumentation {
 public:
  virtual ~PassInstrumentation() = default;
  virtual void RunBeforePipeline(const Module& module) {}
  virtual void RunBeforePass(const Pass& pass, const Module& module) {}
  virtual void RunAfterPass(const Pass& pass, const Module& module, bool changed) {}
  virtual void RunAfterPassFailed(const Pass& pass, const Module& module) {}
  // `after` is the pass whose result is verified; nullptr for the input module.
  virtual void RunBeforeVerifier(const Pass* after) {}
  virtual void RunAfterVerifier(const Pass* after) {}
  // Called once the pipeline finished, whether it succeeded or not.
  virtual void RunAfterPipeline(const Module& module, const PassContext& context) {}
};

// `--print-after=NAME|all`: after each selected pass, a greppable banner
//   // ----- IR after append-backward ----- //
// followed by the module in text form.
class PrintIRInstrumentation : public PassInstrumentation {
 public:
  // `pass_names` holds pass names or "all".
  PrintIRInstrumentation(std::set<std::string> pass_names, std::ostream& out)
      : pass_names_(std::move(pass_names)), out_(out) {}
  void RunAfterPass(const Pass& pass, const Module& module, bool changed) override;

  static std::string Banner(std::string_view pass_name);

 private:
  std::set<std::string> pass_names_;
  std::ostream& out_;
};

// `--time-passes`: a table of the wall time of every pass run and of verification.
class PassTimingInstrumentation : public PassInstrumentation {
 public:
  explicit PassTimingInstrumentation(std::ostream& out) : out_(out) {}
  void RunBeforePipeline(const Module& module) override;
  void RunBeforePass(const Pass& pass, const Module& module) override;
  void RunAfterPass(const Pass& pass, const Module& module, bool changed) override;
  void RunAfterPassFailed(const Pass& pass, const Module& module) override;
  void RunBeforeVerifier(const Pass* after) override;
  void RunAfterVerifier(const Pass* after) override;
  void RunAfterPipeline(const Module& module, const PassContext& context) override;

 private:
  using Clock = std::chrono::steady_clock;
  void StopPass(const Pass& pass);

  std::ostream& out_;
  Clock::time_point pipeline_start_;
  Clock::time_point start_;
  std::vector<std::pair<std::string, double>> pass_seconds_;  // in run order
  double verifier_seconds_ = 0;
};

// `--stats`: the counters every pass recorded in the PassContext.
class PassStatisticsInstrumentation : public PassInstrumentation {
 public:
  explicit PassStatisticsInstrumentation(std::ostream& out) : out_(out) {}
  void RunAfterPipeline(const Module& module, const PassContext& context) override;

 private:
  std::ostream& out_;
};

}  // namespace pw
