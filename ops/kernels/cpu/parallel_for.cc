#include "ops/kernels/cpu/parallel_for.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace pw::ops::cpu {
namespace {

void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

inline constexpr std::chrono::microseconds kSpin{20};

// A loop's ranges wait to be claimed in `state_`: the loop's generation in the high 32
// bits, the next unclaimed range in the low ones. A claim is a compare-and-swap that
// fails once the generation moved on, so a thread never runs a range of another loop.
class Pool {
 public:
  void SetThreads(int threads) {
    std::lock_guard<std::mutex> run(run_mu_);
    threads_.store(std::max(1, threads), std::memory_order_relaxed);
  }
  int threads() const { return threads_.load(std::memory_order_relaxed); }
  // Whether a started pool thread sleeps (past its spin): the next loop must wake it.
  bool asleep() const { return sleeping_.load(std::memory_order_relaxed) > 0; }

  void Run(int64_t n, int parts, RangeFn fn, void* body) {
    std::unique_lock<std::mutex> run(run_mu_, std::try_to_lock);
    if (!run.owns_lock()) {  // another stream's loop holds the pool
      fn(body, 0, n);
      return;
    }
    StartWorkers(parts - 1);
    Job job{fn, body, n, parts};
    uint32_t generation;
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = job;
      generation = ++generation_;
      remaining_.store(parts, std::memory_order_relaxed);
      state_.store(uint64_t{generation} << 32, std::memory_order_release);
    }
    cv_.notify_all();
    Work(generation, job);
    // Only ranges other threads are running now remain: spin briefly, then sleep, so that
    // a pool thread preempted in mid-range gets the core back instead of a spinning caller.
    const auto deadline = std::chrono::steady_clock::now() + kSpin;
    for (int i = 1; remaining_.load(std::memory_order_acquire) != 0; ++i) {
      Pause();
      if ((i & 63) == 0 && std::chrono::steady_clock::now() > deadline) {
        std::unique_lock<std::mutex> lock(mu_);
        done_cv_.wait(lock, [&] { return remaining_.load(std::memory_order_acquire) == 0; });
        break;
      }
    }
  }

 private:
  struct Job {
    RangeFn fn = nullptr;
    void* body = nullptr;
    int64_t n = 0;
    int parts = 0;
  };

  // Claims and runs ranges of loop `generation` until none is left.
  void Work(uint32_t generation, const Job& job) {
    uint64_t s = state_.load(std::memory_order_acquire);
    for (;;) {
      const int part = static_cast<int>(s & 0xffffffffu);
      if ((s >> 32) != generation || part >= job.parts) return;
      if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
      job.fn(job.body, job.n * part / job.parts, job.n * (part + 1) / job.parts);
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // the caller checks under it before sleeping
        done_cv_.notify_all();
      }
      s = state_.load(std::memory_order_acquire);
    }
  }

  // Called with run_mu_ held.
  void StartWorkers(int wanted) {
    while (static_cast<int>(workers_.size()) < wanted) {
      workers_.emplace_back([this] { WorkerLoop(); });
      pthread_setname_np(workers_.back().native_handle(), "pw-kernel");
    }
  }

  void WorkerLoop() {
    uint32_t seen = 0;
    for (;;) {
      // Loops come in bursts between GEMMs: a short spin catches the next one without a
      // sleep and a wake-up; past it the thread sleeps and leaves the core to others.
      const auto deadline = std::chrono::steady_clock::now() + kSpin;
      for (int i = 1; (state_.load(std::memory_order_acquire) >> 32) == seen; ++i) {
        Pause();
        if ((i & 63) == 0 && std::chrono::steady_clock::now() > deadline) break;
      }
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (generation_ == seen) {
          sleeping_.fetch_add(1, std::memory_order_relaxed);
          cv_.wait(lock, [&] { return generation_ != seen; });
          sleeping_.fetch_sub(1, std::memory_order_relaxed);
        }
        seen = generation_;
        job = job_;
      }
      Work(seen, job);
    }
  }

  std::atomic<int> threads_{1};
  std::mutex run_mu_;                // held by the loop on the pool
  std::mutex mu_;                    // guards job_ and generation_
  std::condition_variable cv_;       // a loop started
  std::condition_variable done_cv_;  // the last range of a loop finished
  Job job_;
  uint32_t generation_ = 0;
  std::atomic<uint64_t> state_{0};
  std::atomic<int> remaining_{0};     // ranges of the current loop not yet finished
  std::atomic<int> sleeping_{0};      // pool threads waiting on cv_
  std::vector<std::thread> workers_;  // never stopped: the pool lives as long as the process
};

std::atomic<bool> wake_aware_cuts{true};  // SetWakeAwareCuts

Pool& ThePool() {
  static Pool* pool = new Pool;  // never destroyed: its threads may outlive static destructors
  return *pool;
}

}  // namespace

void RunRanges(int64_t n, int parts, RangeFn fn, void* body) { ThePool().Run(n, parts, fn, body); }

int KernelThreads() { return ThePool().threads(); }

void SetWakeAwareCuts(bool on) { wake_aware_cuts.store(on, std::memory_order_relaxed); }

int RangesFor(int64_t n, int64_t grain) {
  const Pool& pool = ThePool();
  const int threads = pool.threads();
  if (threads == 1) return 1;
  grain = std::max<int64_t>(grain, 1);
  if (pool.asleep() && wake_aware_cuts.load(std::memory_order_relaxed)) grain *= kAsleepGrainFactor;
  return static_cast<int>(std::clamp<int64_t>(n / grain, 1, threads));
}

void SetPoolThreads(int threads) { ThePool().SetThreads(threads); }

}  // namespace pw::ops::cpu
