#pragma once
// The loss scale's update after a step, in one place: update_loss_scaling's CPU kernel and
// the executor, which replays a skipped step's update when post-validated loss scaling
// finds, a step late, that a step overflowed (its CUDA kernel does the same float math).

#include <cstdint>

#include "ir/attribute.h"

namespace pw::ops {

struct LossScaleRule {
  int64_t growth_interval = 2000;
  float growth_factor = 2;
  float backoff_factor = 0.5f;

  // From update_loss_scaling's attributes.
  static LossScaleRule Of(const AttrList& attrs) {
    return {attrs.GetInt("growth_interval"), static_cast<float>(attrs.GetFloat("growth_factor")),
            static_cast<float>(attrs.GetFloat("backoff_factor"))};
  }
};

// amp.loss_scale, amp.good_steps, amp.skipped_steps.
struct LossScaleState {
  float scale = 0;
  float good_steps = 0;
  float skipped_steps = 0;

  // After an overflow: lower the scale, start counting again, count a skipped step; else
  // count a good step and raise the scale after growth_interval of them.
  void Update(bool overflow, const LossScaleRule& rule) {
    if (overflow) {
      scale *= rule.backoff_factor;
      good_steps = 0;
      skipped_steps += 1;
    } else if (++good_steps >= static_cast<float>(rule.growth_interval)) {
      scale *= rule.growth_factor;
      good_steps = 0;
    }
  }
};

}  // namespace pw::ops
