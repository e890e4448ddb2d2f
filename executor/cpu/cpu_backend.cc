#include "executor/cpu/cpu_backend.h"

#include "executor/cpu/cpu_event.h"
#include "executor/cpu/cpu_stream.h"
#include "executor/instr.h"
#include "ir/op_def.h"
#include "ops/defs/defaults.h"
#include "ops/registry.h"

namespace pw::cpu {

CpuBackend::CpuBackend(CpuBackendOptions options) : options_(std::move(options)) {}

// Streams (threads) stop before the communicators they use go away.
CpuBackend::~CpuBackend() {
  for (auto& s : streams_) s.reset();
}

StatusOr<Stream*> CpuBackend::GetStream(StreamType type) {
  int i = StreamIndex(type);
  if (!comm_created_[i] && options_.comm) {
    PW_ASSIGN_OR_RETURN(comms_[i], options_.comm->Create(type));
    comm_created_[i] = true;
  }
  if (!streams_[i])
    streams_[i] = std::make_unique<CpuStream>(type, comms_[i].get(),
                                              options_.thread_prefix + "-" + StreamTypeName(type));
  return static_cast<Stream*>(streams_[i].get());
}

std::unique_ptr<Event> CpuBackend::CreateEvent() { return std::make_unique<CpuEvent>(); }

Status CpuBackend::Prepare(Instr& instr) {
  int i = StreamIndex(instr.stream);
  if (!comm_created_[i] && options_.comm) {
    PW_ASSIGN_OR_RETURN(comms_[i], options_.comm->Create(instr.stream));
    comm_created_[i] = true;
  }
  instr.comm = comms_[i].get();
  if (instr.kind == Instr::Kind::kSend || instr.kind == Instr::Kind::kRecv) {
    if (!instr.comm)
      return FailedPrecondition(instr.where, ": stream ", StreamTypeName(instr.stream),
                                " has no communicator (a single-rank run cannot send)");
    return instr.comm->ExpectTransfer(instr.peer, instr.kind == Instr::Kind::kSend, instr.tag,
                                      instr.where);
  }
  if (instr.kind != Instr::Kind::kKernel) return OkStatus();
  auto extra = options_.extra_kernels.find(instr.op->type);
  instr.kernel =
      extra != options_.extra_kernels.end() ? extra->second : FindCpuKernel(instr.op->type);
  if (!instr.kernel)
    return Unimplemented(instr.where, ": no CPU kernel for op type '", instr.op->type, "'");
  instr.zero_outputs =
      extra != options_.extra_kernels.end() || !CpuKernelWritesEveryOutput(instr.op->type);
  instr.context->comm = instr.comm;
  const OpDef* def = ops::Registry().Find(instr.op->type);
  if (instr.comm && def && def->is_communication) {
    Status s = instr.comm->ExpectCollective(instr.op->attrs.GetString("group", ops::kDefaultGroup));
    if (!s.ok()) return s.WithContext(instr.where);
  }
  return OkStatus();
}

Status CpuBackend::Connect() {
  for (auto& comm : comms_)
    if (comm) PW_RETURN_IF_ERROR(comm->Connect());
  return OkStatus();
}

}  // namespace pw::cpu
