#pragma once
// A bounded spin before blocking. A hand-off between two busy streams usually completes
// within a few microseconds, far less than a futex sleep and wake-up; past the budget the
// caller blocks on a condition variable, so an idle stream never burns a core.
//
// How long to spin is learnt per stream (`AdaptiveSpin`): a stream whose waits are one
// collective's round trip (the forward all-reduces of a tensor-parallel layer handed
// between the compute stream and mp_comm: 20-100 us on this project's 2-core VMs) spins
// long enough to catch them. Blocking there cost a wake-up on every hand-off, which on a VM
// whose other vCPU had gone idle took ~20 us instead of ~4, and the small GPT's overlap-1f1b
// plan on 4 processes ran 8-13 ms a step instead of 7-8. A stream whose waits run long
// (pipeline bubbles, long kernels on the other stream) keeps the short spin: spinning there
// burns a core that other ranks need.
//
// PW_STREAM_SPIN (ir/stream_spin.h) picks another way for the process: `short` always
// spins briefly (this project's executor before the adaptive spin), `block` never spins.
//
// Pipeline transfer streams do not spin (`SpinPolicy`): they mostly wait for compute work
// that takes far longer than the budget, and on a shared core their spin's yields cost
// more than the spin saves. Linux's EEVDF scheduler moves a yielding thread's
// deadline a slice later, so when the event comes the thread is still queued behind the
// compute thread it yielded to, until that thread's slice ends: on this project's 2-core
// VMs a pipeline send started ~1 ms after its tensor was ready, in most steps.

#include <chrono>

#include "ir/stream_spin.h"

namespace pw::cpu {

using pw::SpinUntil;

enum class SpinPolicy { kSpinFirst, kBlockAtOnce };

// kSpinFirst: the short budget; kBlockAtOnce: checks once.
template <typename Ready>
bool SpinUntil(Ready ready, SpinPolicy policy = SpinPolicy::kSpinFirst) {
  return SpinUntil(ready, policy == SpinPolicy::kBlockAtOnce
                              ? std::chrono::nanoseconds::zero()
                              : std::chrono::nanoseconds(kSpinBudget));
}

// The spin budget of one waiting thread, from how its last waits went (SpinHistory): the
// long budget while they mostly ended within it, else the short one. Not thread-safe: one
// per waiting thread.
class AdaptiveSpin {
 public:
  explicit AdaptiveSpin(SpinPolicy policy = SpinPolicy::kSpinFirst,
                        StreamSpin spin = ProcessStreamSpin())
      : policy_(policy), spin_(spin) {}

  std::chrono::nanoseconds budget() const {
    if (policy_ == SpinPolicy::kBlockAtOnce || spin_ == StreamSpin::kBlock)
      return std::chrono::nanoseconds::zero();
    return spin_ == StreamSpin::kAdaptive && history_.spins_long()
               ? std::chrono::nanoseconds(kLongSpinBudget)
               : std::chrono::nanoseconds(kSpinBudget);
  }
  // How long a wait that did not find its event ready took until it was.
  void Observe(std::chrono::nanoseconds waited) { history_.Observe(waited <= kLongSpinBudget); }

 private:
  SpinPolicy policy_;
  StreamSpin spin_;
  SpinHistory history_;
};

}  // namespace pw::cpu
