#include "executor/cpu/cpu_stream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "executor/cpu/caught_spins.h"
#include "executor/cpu/cpu_event.h"
#include "executor/instr.h"
#include "ir/thread_cpu_clock.h"

namespace pw::cpu {

namespace {

// Pipeline transfer streams block at once: they wait for compute work far longer than a
// spin, and their spin's yields cost them the scheduler's turn (spin_wait.h). Collective
// streams spin first: in the overlap plans their events come in quick succession (a
// column-parallel backward's chunks) and a spin catches most of them; blocking at once made
// the small GPT's overlap-1f1b plan 9-20 % slower on 4 processes here. PW_STREAM_SPIN=block
// blocks every stream at once.
SpinPolicy SpinPolicyOf(StreamType type) {
  return StreamSpinsOnEvents(type) && ProcessStreamSpin() != StreamSpin::kBlock
             ? SpinPolicy::kSpinFirst
             : SpinPolicy::kBlockAtOnce;
}

}  // namespace

CpuStream::CpuStream(StreamType type, StreamComm* comm, const std::string& thread_name)
    : type_(type),
      comm_(comm),
      wait_spin_(SpinPolicyOf(type)),
      worker_(
          thread_name, [this](const Instr* i) { Run(i); }, SpinPolicyOf(type)) {}

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::atomic<bool> g_serialize_compute{false};

std::mutex& ComputeKernelMutex() {
  static std::mutex mu;
  return mu;
}

bool RunsAlone(const Instr& instr) {
  return g_serialize_compute.load(std::memory_order_relaxed) &&
         instr.kind == Instr::Kind::kKernel && instr.context && !instr.context->comm;
}

}  // namespace

void SerializeComputeKernels(bool on) { g_serialize_compute.store(on); }

void CpuStream::Run(const Instr* instr) {
  const bool traced = tracing_ != Tracing::kOff, cpu_time = tracing_ == Tracing::kTimesAndCpu;
  if (traced) instr->times.taken = NowNs();
  bool ok = status_.ok() && !poisoned_;
  for (Event* e : instr->waits) {
    auto* event = static_cast<CpuEvent*>(e);
    if (!event->recorded()) {
      const bool count = CountingCaughtSpins();
      const int64_t cpu_before = count ? ThreadCpuNanos() : 0;
      const auto start = std::chrono::steady_clock::now();
      const bool caught = event->Wait(wait_spin_.budget());
      const auto waited = std::chrono::steady_clock::now() - start;
      wait_spin_.Observe(waited);
      if (count && caught)
        AddCaughtSpin(
            std::max<int64_t>(0, ThreadCpuNanos() - cpu_before - ThreadCpuClockCostNanos()),
            std::chrono::duration_cast<std::chrono::nanoseconds>(waited).count());
    }
    ok = ok && !event->poisoned();  // work this depends on failed: skip, report nothing
  }
  poisoned_ = !ok;  // later work on this stream may depend on this instruction
  std::unique_lock<std::mutex> alone;
  if (ok && RunsAlone(*instr)) alone = std::unique_lock<std::mutex>(ComputeKernelMutex());
  const int64_t cpu_began = cpu_time ? ThreadCpuNanos() : 0;
  if (traced) instr->times.began = NowNs();
  if (ok) {
    Status s = ExecuteInstr(*instr);
    if (!s.ok()) status_ = s.WithContext(instr->where);
    ok = s.ok();
  }
  if (traced) instr->times.ended = NowNs();
  if (cpu_time) {
    const int64_t cpu_ended = ThreadCpuNanos();
    instr->times.cpu = std::max<int64_t>(0, cpu_ended - cpu_began - ThreadCpuClockCostNanos());
  }
  if (alone.owns_lock()) alone.unlock();
  for (Event* e : instr->records) static_cast<CpuEvent*>(e)->Record(!ok);
  instr->ReleaseUses();
}

Status CpuStream::Synchronize() {
  worker_.Drain();
  Status status = std::move(status_);
  status_ = OkStatus();
  if (status.ok() && poisoned_) status = Aborted("skipped: work it depends on failed");
  poisoned_ = false;
  if (comm_ && status.ok()) status = comm_->Flush().WithContext(StreamTypeName(type_));
  return status;
}

Status ExecuteInstr(const Instr& instr) {
  switch (instr.kind) {
    case Instr::Kind::kKernel:
      if (instr.view_source) {
        instr.BindViews();
        return OkStatus();
      }
      for (ValueSlot* out : instr.outputs)
        if (!out->tensor.defined()) out->Allocate(*instr.memory, instr.zero_outputs);
      return instr.kernel(const_cast<KernelContext&>(*instr.context));
    case Instr::Kind::kSend:
      if (!instr.value->tensor.defined()) return Internal("'", instr.value->name, "' has no value");
      return instr.comm->Send(instr.peer, instr.tag, instr.value->tensor);
    case Instr::Kind::kRecv:
      if (!instr.value->tensor.defined()) instr.value->Allocate(*instr.memory, /*zeroed=*/false);
      return instr.comm->Recv(instr.peer, instr.tag, instr.value->tensor);
    case Instr::Kind::kFetch: {
      const Tensor& t = instr.value->tensor;
      if (!t.defined() || t.dtype() != DataType::kFloat32 || t.numel() != 1)
        return Internal("'", instr.value->name, "' is not an f32 scalar");
      *instr.fetch_to = static_cast<double>(t.f32()[0]);
      return OkStatus();
    }
  }
  return Internal("unknown instruction kind");
}

}  // namespace pw::cpu
