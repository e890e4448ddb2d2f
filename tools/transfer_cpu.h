#pragma once
// What a pipeline transfer costs the compute of a node whose cores all compute
// (DeviceSpec.transfer_cpu). Measured with the executor's own pieces: one busy thread per
// core computes units of fixed work and counts them; in alternate phases the first of them
// also records a CPU event every other unit, for which a sending thread waits (blocking
// at once, as pp_send streams do) before it sends a message over a TcpLink on loopback to
// a receiving thread, which reads it and records an event, as a pp_recv stream does. The
// units the busy threads lose to that, against the phases around it without transfers,
// over the transfers: the wake-ups, system calls and copies of both sides and what the
// displaced threads lose besides (their turns, their caches), where a thread's own CPU
// clock sees only the first.

#include "ir/status.h"

namespace pw::tools {

struct TransferCpu {
  double seconds = 0;  // compute lost per transfer, the median of the rounds
  double low = 0;      // the rounds' smallest and largest
  double high = 0;
  int transfers = 0;  // over the rounds kept
  int rounds = 0;     // kept: the machine was otherwise idle through them
  // Over every round tried: the largest change of the busy threads' rate between the quiet
  // phases around a round, and the smallest share of their cores they got in one.
  double worst_drift = 0;
  double lowest_share = 1;
  bool measured() const { return rounds > 0; }
};

// `cores`: the busy threads (at most the CPUs this process may use). `bytes`: each
// message. Each round is a phase with transfers between two without (the one after is the
// next round's first); up to twice `rounds` are tried for `rounds` that the machine's other
// work left alone. With fewer than three of those, nothing is measured (rounds 0).
StatusOr<TransferCpu> MeasureTransferCpu(int cores, int bytes = 8192, int rounds = 5,
                                         double phase_seconds = 0.15);

}  // namespace pw::tools
