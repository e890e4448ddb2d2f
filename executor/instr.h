#pragma once
// One lowered instruction: what a stream runs. The interpreter lowers a rank's plan into a
// flat list of these, once; every step replays the list. All lookups (slots, events,
// kernels, communicators) are resolved at lowering time, so dispatching an instruction is
// a queue push.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/memory_tracker.h"
#include "executor/value_slot.h"
#include "ir/stream_type.h"
#include "ops/kernel.h"

namespace pw {

class StreamComm;

struct Instr {
  enum class Kind : uint8_t {
    kKernel,  // run op's kernel on `inputs` into `outputs`
    kSend,    // send `value` to `peer`
    kRecv,    // receive `value` from `peer`
    kFetch,   // copy the scalar `value` to `*fetch_to`
  };
  Kind kind = Kind::kKernel;
  StreamType stream = StreamType::kCompute;
  std::string where;  // "op 3 (matmul) of program 'fwd0' for micro-batch 2", for errors
  // The plan's job it does (LoweredPlan::job_names: "0F2", "1SEND_B3", "0OPT"); -1 for
  // step-level work. Traces name it, as the simulator's do.
  int job = -1;

  std::vector<Event*> waits;     // before running
  std::vector<Event*> records;   // after running
  std::vector<ValueSlot*> uses;  // distinct slots read or written, released after running

  // kKernel. `context` points into the slots' tensors, which never move.
  const Op* op = nullptr;
  CpuKernel kernel = nullptr;  // set by the backend's Prepare
  bool zero_outputs = true;    // false when the kernel writes every element of its outputs
  std::optional<KernelContext> context;
  std::vector<ValueSlot*> outputs;  // allocated before the kernel when still empty
  // A split{view}: instead of a kernel, each output becomes a view of this slot's tensor
  // at its offset (bytes), so nothing is copied.
  ValueSlot* view_source = nullptr;
  std::vector<int64_t> view_offsets;

  // kSend / kRecv / kFetch
  ValueSlot* value = nullptr;
  int peer = -1;  // global rank
  uint64_t tag = 0;
  double* fetch_to = nullptr;

  StreamComm* comm = nullptr;  // the stream's communicator, when it has one
  MemoryTracker* memory = nullptr;

  // Host side, before queueing: inputs fed from outside bind these slots.
  struct Feed {
    ValueSlot* slot;
    std::string var;
  };
  std::vector<Feed> feeds;
  int micro_batch = -1;  // of the job (-1 for step-level work)

  // When the step is traced (Stream::SetTracing): steady-clock nanoseconds at which the
  // stream took it up (then waited for its events), began its work and finished it. Written
  // by the stream's thread, read by the host after Synchronize.
  struct Times {
    int64_t taken = 0, began = 0, ended = 0;
    int64_t cpu = 0;  // CPU nanoseconds of the stream's thread from began to ended
  };
  mutable Times times;

  void BindViews() const {
    // A parameter held in shards holds only the rows its split cuts out.
    const int64_t held = view_source->HoldsRows() ? view_source->held_offset : 0;
    for (size_t k = 0; k < outputs.size(); ++k)
      outputs[k]->tensor = view_source->tensor.View(view_offsets[k] - held, outputs[k]->shape);
  }

  void ReleaseUses() const {
    for (ValueSlot* slot : uses) slot->Release(*memory);
  }
};

}  // namespace pw
