#pragma once
// The CPU backend: one worker thread per stream type in use, CpuEvents, kernels from
// ops/ (oneDNN for matmul) and, for streams that communicate, a StreamComm from the
// CommFactory (Gloo between processes, or in-process for ranks that are threads).

#include <array>
#include <map>
#include <memory>
#include <string>

#include "executor/backend.h"
#include "executor/comm/stream_comm.h"
#include "ops/kernel.h"

namespace pw::cpu {

class CpuStream;

struct CpuBackendOptions {
  // Not owned; may be null (a single rank: collectives are the identity, no p2p).
  CommFactory* comm = nullptr;
  // Kernels that take precedence over ops/ (tests and benchmarks register their own).
  std::map<std::string, CpuKernel, std::less<>> extra_kernels;
  std::string thread_prefix = "pw";  // worker threads are named PREFIX-STREAM
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(CpuBackendOptions options = {});
  ~CpuBackend() override;

  std::string_view name() const override { return "cpu"; }
  StatusOr<Stream*> GetStream(StreamType type) override;
  std::unique_ptr<Event> CreateEvent() override;
  Status Prepare(Instr& instr) override;
  Status Connect() override;

 private:
  CpuBackendOptions options_;
  std::array<std::unique_ptr<StreamComm>, kNumStreamTypes> comms_;
  std::array<bool, kNumStreamTypes> comm_created_{};
  std::array<std::unique_ptr<CpuStream>, kNumStreamTypes> streams_;
};

}  // namespace pw::cpu
