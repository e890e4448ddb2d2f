#pragma once
// One CPU stream: a worker thread that, for each queued instruction, waits for its
// events, runs it, records its events and releases its slots.

#include <memory>

#include "executor/backend.h"
#include "executor/comm/stream_comm.h"
#include "executor/cpu/spin_wait.h"
#include "executor/cpu/stream_worker.h"

namespace pw::cpu {

class CpuStream final : public Stream {
 public:
  CpuStream(StreamType type, StreamComm* comm, const std::string& thread_name);

  void Enqueue(const Instr* instr) override { worker_.Push(instr); }
  Status Synchronize() override;
  void SetTracing(Tracing tracing) override { tracing_ = tracing; }

 private:
  void Run(const Instr* instr);

  StreamType type_;
  StreamComm* comm_;                 // may be null
  Status status_;                    // worker thread; read by the host after Drain
  bool poisoned_ = false;            // worker thread: skipping, since work it depends on failed
  Tracing tracing_ = Tracing::kOff;  // set by the host between steps
  AdaptiveSpin wait_spin_;           // worker thread: how long to spin on an event
  StreamWorker worker_;              // last: its thread starts in the constructor
};

// Runs one instruction's action (no events, no release).
Status ExecuteInstr(const Instr& instr);

// While on, the kernels that do not communicate run one at a time across every stream of
// the process, each alone on a core whatever else is queued: `profile --in-run` times ops
// so, as the simulator prices them (it shares the cores among ranks itself). Kernels that
// communicate wait for their peers and keep running as they come. Off unless set.
void SerializeComputeKernels(bool on);

}  // namespace pw::cpu
