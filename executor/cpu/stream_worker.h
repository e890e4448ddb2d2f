#pragma once
// A thread that runs the instructions queued to one stream, in order. The host pushes
// without waiting; the worker takes everything queued at once, so under load a push costs
// one uncontended lock and the worker one lock per batch.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "executor/cpu/spin_wait.h"

namespace pw {
struct Instr;
}

namespace pw::cpu {

class StreamWorker {
 public:
  using RunFn = std::function<void(const Instr*)>;
  // Starts the thread; `run` executes one instruction on it. `spin`: how it waits for
  // work (spin_wait.h).
  StreamWorker(std::string name, RunFn run, SpinPolicy spin = SpinPolicy::kSpinFirst);
  ~StreamWorker();
  StreamWorker(const StreamWorker&) = delete;
  StreamWorker& operator=(const StreamWorker&) = delete;

  void Push(const Instr* instr);
  // Blocks until every pushed instruction has run.
  void Drain();

 private:
  void Loop();
  bool WaitForWork();  // false: stop

  std::string name_;
  RunFn run_;
  SpinPolicy spin_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::vector<const Instr*> queue_;  // guarded by mu_
  bool sleeping_ = false;            // guarded by mu_
  bool stop_ = false;                // guarded by mu_
  uint64_t completed_ = 0;           // guarded by mu_
  std::atomic<uint64_t> pushed_{0};  // also read without the lock while spinning
  uint64_t taken_ = 0;               // worker thread only
  std::thread thread_;
};

}  // namespace pw::cpu
