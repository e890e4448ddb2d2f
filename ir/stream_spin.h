#pragma once
// How the CPU executor's stream threads wait for another stream's event, chosen for a
// process by PW_STREAM_SPIN (as OMP_WAIT_POLICY does for OpenMP's threads):
//   adaptive  spin long enough to catch events that keep coming soon, else briefly (default)
//   short     always the brief spin, then block
//   block     block at once
// The executor waits that way (executor/cpu/spin_wait.h), and `pipeweave profile` records
// it in the CPU spec, so that the simulator prices the waits the run will make.

#include "ir/status.h"

namespace pw {

enum class StreamSpin { kAdaptive, kShort, kBlock };

// PW_STREAM_SPIN's value; adaptive when unset. An unknown value is an error that names the
// three.
StatusOr<StreamSpin> StreamSpinFromEnv();

// The process's setting: PW_STREAM_SPIN read once, adaptive where it is not valid (the
// commands refuse such a value at their start with StreamSpinFromEnv).
StreamSpin ProcessStreamSpin();

}  // namespace pw
