#pragma once
// How the CPU executor's stream threads wait for another stream's event, chosen for a
// process by PW_STREAM_SPIN (as OMP_WAIT_POLICY does for OpenMP's threads):
//   adaptive  spin long enough to catch events that keep coming soon, else briefly (default)
//   short     always the brief spin, then block
//   block     block at once
// The executor waits that way (executor/cpu/spin_wait.h says why), `pipeweave profile`
// times the same spin and records the budgets in the CPU spec, and the simulator replays
// the same rule (SpinHistory), so that it prices the waits the run will make.

#include <bit>
#include <chrono>
#include <cstdint>
#include <thread>

#include "ir/status.h"
#include "ir/stream_type.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace pw {

enum class StreamSpin { kAdaptive, kShort, kBlock };

// PW_STREAM_SPIN's value; adaptive when unset. An unknown value is an error that names the
// three.
StatusOr<StreamSpin> StreamSpinFromEnv();

// The process's setting: PW_STREAM_SPIN read once, adaptive where it is not valid (the
// commands refuse such a value at their start with StreamSpinFromEnv).
StreamSpin ProcessStreamSpin();

// The brief spin, and the long one of a stream whose waits mostly end within it.
inline constexpr std::chrono::microseconds kSpinBudget{20};
inline constexpr std::chrono::microseconds kLongSpinBudget{200};

// Pipeline transfer streams block at once; the others spin first.
inline bool StreamSpinsOnEvents(StreamType type) {
  return type != StreamType::kPpSend && type != StreamType::kPpRecv;
}

// Whether a stream's thread spins long: at least kShortNeeded of its last 8 waits that had
// to wait ended within kLongSpinBudget.
class SpinHistory {
 public:
  static constexpr int kShortNeeded = 6;
  bool spins_long() const { return std::popcount(short_waits_) >= kShortNeeded; }
  void Observe(bool ended_within_long_budget) {
    short_waits_ = static_cast<uint8_t>((short_waits_ << 1) | (ended_within_long_budget ? 1 : 0));
  }

 private:
  uint8_t short_waits_ = 0;  // bit k: the wait k waits back ended within the long budget
};

// Waits for another stream's event that threads ended spinning (executor/cpu/caught_spins.h),
// summed over threads and ranks.
struct CaughtSpins {
  int64_t waits = 0;
  double cpu_seconds = 0;  // the waiting threads' CPU time in those waits
  // Those whose thread shared its core (its CPU time at most half the wait's): what a
  // spinner takes from busy cores. A spin that kept its core all along ran where no other
  // thread wanted one (3-16 % of the waits in the small GPT's runs, at 0.55-0.9 of a core).
  int64_t shared_waits = 0;
  double shared_cpu_seconds = 0;
  double shared_seconds = 0;

  void Add(const CaughtSpins& o) {
    waits += o.waits;
    cpu_seconds += o.cpu_seconds;
    shared_waits += o.shared_waits;
    shared_cpu_seconds += o.shared_cpu_seconds;
    shared_seconds += o.shared_seconds;
  }
  // The share of a core a spinner took where it shared one (DeviceSpec.spin_cpu_share).
  double CoreShare() const { return shared_seconds > 0 ? shared_cpu_seconds / shared_seconds : 0; }
};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until ready() or `budget` runs out; returns ready(). A zero budget checks once.
template <typename Ready>
bool SpinUntil(Ready ready, std::chrono::nanoseconds budget) {
  if (ready()) return true;
  if (budget <= std::chrono::nanoseconds::zero()) return false;
  auto deadline = std::chrono::steady_clock::now() + budget;
  for (int i = 1;; ++i) {
    CpuRelax();
    if (ready()) return true;
    if ((i & 63) == 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();  // let the thread we wait for run on a busy core
    }
  }
}

}  // namespace pw
