#pragma once
// The life of one rank process: join the run's store, start the watchdog, connect over
// Gloo (NCCL with the CUDA backend), train, and leave only when every rank is done — or
// stop promptly, naming the rank at fault, when another rank fails. Returns the process
// exit code:
//   0  trained every step
//   1  this rank failed (the others are told)
//   3  stopped because another rank failed

#include <chrono>
#include <functional>
#include <string>

#include "executor/comm/gloo_comm.h"
#include "executor/rank_runner.h"

namespace pw {

inline constexpr int kExitRankFailed = 1;
inline constexpr int kExitPeerFailed = 3;

struct RankProcessOptions {
  RankRunOptions run;
  std::string store;  // a directory or redis://HOST:PORT[/PREFIX]
  GlooOptions gloo;
  std::chrono::milliseconds dead_after{std::chrono::seconds(20)};  // heartbeats; 0: off
  std::string log_prefix = "pipeweave run";
  int threads = 1;  // BLAS threads of this process (executor/process_resources.h)
};

int RunRankProcess(const Module& module, const RankProcessOptions& options);

}  // namespace pw
