#pragma once
// Cores taken in turns (DeviceSpec.cores_in_turns): how the executor's rank processes share
// a node whose compute threads outnumber its cores. Their ops are short beside the
// scheduler's slice, and a rank's compute stream blocks often (a collective, a receive, an
// event of another stream): a thread that holds a core runs its ops at full speed until its
// stream blocks, and a thread made runnable meanwhile waits for a core, in the order the
// threads became runnable. The scheduler ends a turn that outlasts its slice when another
// thread waits. Measured in `run --trace` of the small GPT's mp 2 x pp 2 plans on 4
// processes and 2 cores: never more than 2 ranks inside an op at once, an op's wall time
// its CPU time (scripts/compare_traces.py). Even sharing (every runnable thread at cores /
// threads) kept the ranks of both stages in step instead: all computing at half speed,
// then all in their collectives with the cores idle.

#include <cstdint>
#include <limits>
#include <vector>

namespace pw::cost {

// The longest turn while another thread waits: Linux's EEVDF base slice (0.75 ms) scaled
// as the kernel scales it for a node's CPUs (1 + log2 of up to 8 of them).
double TurnSlice(int cores);

class CoreTurns {
 public:
  // Compute that wants cores now, by the thread that runs it: a rank's ops one thread, the
  // CPU its other threads are charged (wake-ups, transfers) another.
  struct Claim {
    int thread = 0;
    int node = 0;
    double threads = 1;  // the threads its op keeps busy
    double ready = 0;    // when its op was started (became runnable)
    // A moment's CPU of a thread woken for it (a wake-up's, a transfer's: tens of us): the
    // scheduler runs a thread that ran so little before the turns. Queued behind them it
    // waited for turns of milliseconds, and such charges piled up by the hundred.
    bool passing = false;
  };

  CoreTurns(int threads, int cores);

  // The cores (fractions at the margin) each claim gets, in `claims`' order, with `free[n]`
  // cores of node n left by what else runs there. Threads without a claim lose their turn.
  std::vector<double> Grant(double now, const std::vector<double>& free,
                            const std::vector<Claim>& claims);
  // When the earliest turn that another thread waits behind ends (its slice), or infinity.
  double NextTurnEnd() const { return next_turn_end_; }

 private:
  static constexpr double kNone = -1;
  double slice_;
  std::vector<double> held_since_;    // per thread: when its turn began, or kNone
  std::vector<double> queued_since_;  // per thread: since when it waits for a core, or kNone
  std::vector<int64_t> claimed_in_;   // per thread: the last Grant it claimed in
  std::vector<int> last_claims_;      // the threads that claimed in the last Grant
  int64_t grants_ = 0;
  double next_turn_end_ = std::numeric_limits<double>::infinity();
};

}  // namespace pw::cost
