#pragma once
// Dynamic loss scaling of an unsplit training program (fp16 needs it: small gradients
// underflow its range): the backward starts from loss@GRAD = S instead of 1, and per
// virtual stage the optimizer first unscales that stage's gradients by S and flags an inf
// or NaN among them (check_finite_and_unscale); the flag's max over the mp and the pp group
// (gradients are already summed over dp) makes every rank see any overflow; every update
// is skipped when it is set (SkipUpdate); update_loss_scaling then lowers S after an
// overflow and raises it after growth_interval good steps.
//
// State (persistable f32 scalars on every rank): amp.loss_scale, amp.good_steps,
// amp.skipped_steps. The per-stage ops have no origin (they belong to a stage, not to a
// forward op): a pass that moves optimizer ops between stages rebuilds them with
// RestageLossScaling. A rank has one check, one flag and one scale update whatever its
// number of model chunks (vpp > 1: the check covers every chunk's gradients, placed with its
// first chunk), so that one flag per rank meets the others in the pp group.
//
// post_validate (with pp > 1): the flag's max over the pipeline, which holds every rank
// until the slowest has finished its backward, moves to the next step's start, as in the
// Zero Bubble paper's optimizer post-validation: each rank updates unless its own flag (max
// over mp) is set, after copying the state it changes (copy_unless), and keeps its flag for
// the next step; there the flags' max over pp (c_allreduce_max, at_step_start) is issued
// first, and an overflow it reports leaves the copies and the updates alone for the executor
// to redo the step (ir/post_validation.h).

#include <cstdint>
#include <optional>

#include "ir/module.h"
#include "ir/post_validation.h"
#include "ir/status.h"

namespace pw {

struct LossScalingOptions {
  double init_scale = 65536;
  int64_t growth_interval = 2000;
  double growth_factor = 2;
  double backoff_factor = 0.5;
  bool post_validate = false;
};

// Errors name what is missing: no loss@GRAD seed, no optimizer update.
Status AddLossScaling(Module& module, const LossScalingOptions& options);

bool HasLossScaling(const Module& module);
bool IsPostValidated(const Module& module);
// Removes the per-stage ops and adds them again for the optimizer ops' current stages,
// with the same options (post-validated or not as `post_validate` says, when given).
Status RestageLossScaling(Module& module, std::optional<bool> post_validate = std::nullopt);

}  // namespace pw
