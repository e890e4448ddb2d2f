#pragma once
// What a backend provides to the interpreter: streams that run instructions in order and
// events that order them across streams. Everything that does not depend on the device
// (lowering the plan, slots and their lifetimes, event keys, dependency checks, gradient
// accumulation, feeds and fetches) stays in the interpreter, so a CUDA backend only maps
// these calls onto cudaStream / cudaEvent / kernel launches and device memory.

#include <memory>
#include <string_view>

#include "ir/status.h"
#include "ir/stream_type.h"
#include "ops/tensor.h"

namespace pw {

struct Instr;

// A one-shot completion marker for one step: recorded once, waited on by any stream.
class Event {
 public:
  virtual ~Event() = default;
  // Back to "not recorded"; the host calls it between steps, when no stream runs.
  virtual void Reset() = 0;
};

// What a traced step records of each instruction (Instr::times): when it was taken up, began
// and ended, and with kTimesAndCpu its stream thread's CPU time in it, which costs two reads
// of the thread's CPU clock (system calls) per instruction.
enum class Tracing : uint8_t { kOff, kTimes, kTimesAndCpu };

class Stream {
 public:
  virtual ~Stream() = default;
  // Queues `instr` (owned by the caller and alive until Synchronize returns). Returns at
  // once; the stream waits for the instruction's events, runs it, records its events and
  // releases its slots, in queue order.
  virtual void Enqueue(const Instr* instr) = 0;
  // Blocks until everything queued has run. Returns the first error since the last
  // Synchronize; after an error the stream still records events and releases slots (so
  // other streams never wait forever) but runs nothing else.
  virtual Status Synchronize() = 0;
  // While on, every instruction run records its Instr::times (a backend that cannot trace
  // leaves them 0); the stream thread's CPU time too with kTimesAndCpu. Set between steps,
  // when no stream runs.
  virtual void SetTracing(Tracing tracing) {}
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // The stream of a type, created on first use.
  virtual StatusOr<Stream*> GetStream(StreamType type) = 0;
  virtual std::unique_ptr<Event> CreateEvent() = 0;
  // Fills in the device-specific part of a lowered instruction (the kernel of a kernel
  // instruction, the communicator of its stream); an error names the op.
  virtual Status Prepare(Instr& instr) = 0;
  // Once every instruction is prepared: makes the connections they will use, so that the
  // first step does not pay for them (StreamComm::Connect). A backend whose streams
  // connect by themselves keeps the default.
  virtual Status Connect() { return OkStatus(); }

  // How the host thread makes and reads values: a zero-filled tensor of a slot's type
  // (gradient sums), a host value made usable by work queued after the call (feeds,
  // parameters) and a host tensor with a value's contents once the streams are idle
  // (parameters read back). The CPU backend's tensors are host tensors: no copies.
  virtual StatusOr<Tensor> NewTensor(DataType dtype, const Shape& shape) {
    return Tensor(dtype, shape);
  }
  virtual StatusOr<Tensor> FromHost(Tensor host) { return host; }
  virtual StatusOr<Tensor> ToHost(const Tensor& value) { return value; }
};

}  // namespace pw
