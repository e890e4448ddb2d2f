#pragma once
// The CPU the stream threads spend on event waits they end spinning: a thread that spins
// for another stream's event on cores every rank's threads keep busy takes the turns it
// yields back and forth from the others, and each such wait costs the node CPU whether the
// spin catches the event or not (5-9 us of 80-100 us a wait in the small GPT's overlap plans
// on 4 processes sharing 2 cores here, ~600 a step: a fifth of the cores). A wait
// that blocks is priced whole elsewhere (DeviceSpec.wait_cpu); the caught ones are counted
// here, while counting is on (`profile --comm`'s measuring run: the count reads the
// thread's CPU clock twice a wait), for DeviceSpec.spin_cpu_share.

#include <cstdint>

#include "ir/stream_spin.h"

namespace pw::cpu {

using pw::CaughtSpins;

// Counting starts (true) or stops; the tally is kept.
void CountCaughtSpins(bool on);
bool CountingCaughtSpins();
// One wait ended by its spin, which took `cpu_nanos` of its thread's CPU in `wall_nanos`.
void AddCaughtSpin(int64_t cpu_nanos, int64_t wall_nanos);
// The tally so far (every thread of the process).
CaughtSpins CaughtSpinsSoFar();

}  // namespace pw::cpu
