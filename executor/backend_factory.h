#pragma once
// Chooses a backend by name ("cpu" or "cuda") for the training loop, the command line and
// the embedding API, with the communicators that go with it: Gloo for the CPU, NCCL for
// CUDA. The CUDA backend is compiled when the toolkit was found at configure time and
// loaded only when asked for (executor/cuda_plugin.h); asking for it otherwise, or on a
// machine without a GPU, is a clear error, never a crash.

#include <memory>
#include <string>
#include <string_view>

#include "executor/backend.h"
#include "executor/comm/gloo_comm.h"
#include "executor/comm/kv_store.h"
#include "executor/comm/stream_comm.h"
#include "ir/module.h"

namespace pw {

enum class BackendKind { kCpu, kCuda };

StatusOr<BackendKind> ParseBackendKind(std::string_view name);  // "cpu" | "cuda"
const char* BackendKindName(BackendKind kind);

struct BackendConfig {
  BackendKind kind = BackendKind::kCpu;
  int rank = 0;                      // global rank (names threads, picks the GPU)
  CommFactory* comm = nullptr;       // not owned; null for a world of one
  std::string thread_prefix = "pw";  // cpu: worker threads are named PREFIX-STREAM
  int device = -1;                   // cuda: -1 takes rank % visible devices
};

// Ok when `kind` can run in this process; otherwise why not ("no CUDA device: ...",
// "this build has no CUDA backend ...", "cannot load pipeweave's module ...").
Status CheckBackendAvailable(BackendKind kind);

StatusOr<std::unique_ptr<Backend>> MakeBackend(const BackendConfig& config);

// The communicators between rank processes `kind` uses, rendezvousing through `store`.
StatusOr<std::unique_ptr<CommFactory>> MakeCommFactory(BackendKind kind, KvStore& store,
                                                       const Mesh& mesh, int rank,
                                                       const GlooOptions& gloo);

}  // namespace pw
