#pragma once
// The rank side of `profile --comm`'s measuring run: every stream's communicator wrapped
// with a clock around each operation, recorded once measuring starts and reported after
// the run in the lines tools/comm_bench_report.h pairs up across ranks. Recording takes no
// lock and builds no string while the run goes on: stream threads contending for a lock on
// cores the ranks share each lose a scheduler's turn, and recording lines under one made
// the measured steps three times the run's (21.8 against 7.4 ms on the demo's plan).

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "executor/comm/stream_comm.h"
#include "executor/cpu/caught_spins.h"

namespace pw::tools {

struct StreamLog;  // what one stream's communicator recorded

class CommRecorder {
 public:
  // Measuring starts (the first measured step begins).
  void Start() { measuring_ = true; }
  bool measuring() const { return measuring_.load(std::memory_order_relaxed); }
  // A log for the communicator of one stream, written by that stream's thread alone.
  std::shared_ptr<StreamLog> NewLog(StreamType stream);
  // The report: one line per recorded operation, each stream's in its order, a line per
  // measured step with its time, the waits its stream threads caught spinning, then
  // "c PROCESS_CPU STEPS" (tools/comm_bench_report.h).
  std::string Report(double process_cpu, const std::vector<double>& step_seconds,
                     const cpu::CaughtSpins& caught = {}) const;

 private:
  std::atomic<bool> measuring_{false};
  mutable std::mutex mu_;  // guards logs_ (not the logs' records)
  std::vector<std::shared_ptr<StreamLog>> logs_;
};

// Creates `inner`'s communicators, each wrapped to record into `recorder`.
class TimedCommFactory final : public CommFactory {
 public:
  TimedCommFactory(CommFactory& inner, CommRecorder& recorder)
      : inner_(inner), recorder_(recorder) {}
  StatusOr<std::unique_ptr<StreamComm>> Create(StreamType stream) override;

 private:
  CommFactory& inner_;
  CommRecorder& recorder_;
};

}  // namespace pw::tools
