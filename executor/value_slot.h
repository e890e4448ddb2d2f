#pragma once
// Where one value of a step lives: a var of the root scope (parameters, optimizer state,
// gradient accumulators) or of one micro-batch. The host creates every slot once, when it
// lowers the plan; streams fill and empty it every step.
//
// Freeing after last use works by counting: at the start of a step `pending` is set to the
// number of instructions that use the slot in that step; each instruction, once it has
// run, releases it; the release that brings the count to zero frees the tensor. That is
// exact whatever order the streams run in, and nothing the host does is on the hot path.

#include <atomic>
#include <cstdint>
#include <string>

#include "executor/memory_tracker.h"
#include "ir/types.h"
#include "ops/tensor.h"

namespace pw {

struct ValueSlot {
  std::string name;      // var name, for error messages
  int micro_batch = -1;  // -1: the root scope
  DataType dtype = DataType::kFloat32;
  Shape shape;
  bool persistent = false;  // parameters and optimizer state: never freed
  bool view = false;        // a block of another slot's tensor (split{view}): no bytes of its own
  int uses_per_step = 0;    // instructions that use the slot in one step
  // A parameter held in shards between syncs (SeqSlot::held_as): where its own rows lie in
  // the whole tensor (bytes) and their shape. -1: always held whole.
  int64_t held_offset = -1;
  Shape held_shape;

  Tensor tensor;                // empty while the value does not exist
  std::atomic<int> pending{0};  // uses left in the current step

  // Whether it holds only its own rows now (between a step and the next sync).
  bool HoldsRows() const {
    return held_offset >= 0 && tensor.defined() && tensor.shape() == held_shape;
  }
  // Gives the slot a fresh tensor of its declared type, zero-filled unless whoever writes
  // it writes every element.
  Tensor& Allocate(MemoryTracker& memory, bool zeroed = true) {
    tensor = Tensor::Allocated(dtype, shape, zeroed);
    memory.Allocate(tensor.nbytes());
    return tensor;
  }
  // Binds an existing tensor (a fed input), counting its bytes.
  void Bind(Tensor value, MemoryTracker& memory) {
    tensor = std::move(value);
    memory.Allocate(tensor.nbytes());
  }
  // One use is done; the last one frees the tensor.
  void Release(MemoryTracker& memory) {
    if (pending.fetch_sub(1, std::memory_order_acq_rel) != 1 || persistent) return;
    if (tensor.defined() && !view) memory.Free(tensor.nbytes());
    tensor = Tensor();
  }
};

}  // namespace pw
