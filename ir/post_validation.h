#pragma once
// Post-validated loss scaling (passes/loss_scaling.h): the names its pass gives the vars
// the executor reads to redo a step, and the attribute that issues the flag's reduction
// at the next step's start.
//
// Each rank updates as soon as its own gradients are checked, keeping a copy of the state
// it changes (var + kBackupSuffix); its flag of the step (kLastOverflowVar) is reduced over
// the pipeline at the start of the next step (kLastOverflowPpVar), where the ranks no
// longer wait for each other. When that says the last step overflowed somewhere, the
// executor puts the copies back, applies the skipped step's loss-scale update and runs the
// current step again: the results are those of the synchronous check, bit for bit.

#include <string_view>

namespace pw {

inline constexpr const char* kLossScaleVar = "amp.loss_scale";
inline constexpr const char* kGoodStepsVar = "amp.good_steps";
inline constexpr const char* kSkippedStepsVar = "amp.skipped_steps";

inline constexpr const char* kLastOverflowVar = "amp.found_inf.last";
inline constexpr const char* kLastOverflowPpVar = "amp.found_inf.last@pp";
inline constexpr const char* kBackupSuffix = "@BACKUP";
// An optimizer op with this attribute set (c_allreduce_max) is issued first in the step,
// on dp_comm, instead of in its optimizer job.
inline constexpr const char* kAtStepStartAttr = "at_step_start";

// The flags and copies: validated state holds nothing in them (the flags are 0 and the
// next step copies afresh), so checkpoints leave them out.
inline bool IsPostValidationVar(std::string_view name) {
  return name == kLastOverflowVar || name == kLastOverflowPpVar || name.ends_with(kBackupSuffix);
}

}  // namespace pw
