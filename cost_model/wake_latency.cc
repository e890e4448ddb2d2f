#include "cost_model/wake_latency.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "ir/stream_spin.h"
#include "ir/thread_cpu_clock.h"

namespace pw::cost {
namespace {

// Seconds per hand-off of a token between two threads that sleep while waiting.
double PingPong(int hops) {
  std::mutex mu;
  std::condition_variable cv;
  int turn = 0;  // whose move: 0 or 1
  int moves = 0;
  auto player = [&](int me) {
    std::unique_lock<std::mutex> lock(mu);
    while (moves < hops) {
      cv.wait(lock, [&] { return turn == me || moves >= hops; });
      if (moves >= hops) break;
      turn = 1 - me;
      ++moves;
      cv.notify_all();
    }
  };
  auto start = std::chrono::steady_clock::now();
  std::thread a(player, 0), b(player, 1);
  a.join();
  b.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / hops;
}

// Seconds per hand-off of a token between two threads that spin for it with the
// executor's spin (SpinUntil), as its streams do while their events come soon.
double SpinPingPong(int hops) {
  std::atomic<int> moves{0};
  auto player = [&](int me) {
    for (;;) {
      int m = 0;
      SpinUntil(
          [&] {
            m = moves.load(std::memory_order_acquire);
            return m >= hops || m % 2 == me;
          },
          std::chrono::seconds(1));
      if (m >= hops) break;
      if (m % 2 == me) moves.store(m + 1, std::memory_order_release);
    }
  };
  auto start = std::chrono::steady_clock::now();
  std::thread a(player, 0), b(player, 1);
  a.join();
  b.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / hops;
}

// Seconds from an event to the thread that waits for it, both on the first CPU this
// process may use, each other one busy: the recording thread computes on for `period`
// between its records, as a rank's compute stream runs on past the events its
// communication streams wait for. The waiter spins for each record with the executor's
// spin, or blocks on a condition variable and, woken, computes for `work` (a collective's
// CPU) before it waits again. The mean over every record, those the waiter saw late
// included.
double HeldCoreHandOff(int records, std::chrono::microseconds period, bool spin,
                       std::chrono::microseconds work) {
  std::vector<int> others = AllowedCpus();
  const int shared = others.empty() ? 0 : others.front();
  if (!others.empty()) others.erase(others.begin());
  BusyThreads busy(others);
  using Clock = std::chrono::steady_clock;
  auto compute_until = [](Clock::time_point until) {
    while (Clock::now() < until) BurnCpu(100);
  };
  std::vector<Clock::time_point> recorded(records);
  std::atomic<int> count{0};
  std::mutex mu;
  std::condition_variable cv;
  double waited = 0;
  std::thread waiter([&] {
    PinThisThread(shared);
    for (int seen = 0; seen < records;) {
      int now_count = 0;
      auto ready = [&] { return (now_count = count.load(std::memory_order_acquire)) > seen; };
      if (spin) {
        SpinUntil(ready, std::chrono::seconds(1));
      } else {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, ready);
      }
      const Clock::time_point now = Clock::now();
      for (; seen < now_count; ++seen)
        waited += std::chrono::duration<double>(now - recorded[seen]).count();
      if (!spin) compute_until(Clock::now() + work);
    }
  });
  std::thread holder([&] {
    PinThisThread(shared);
    for (int k = 0; k < records; ++k) {
      compute_until(Clock::now() + period);
      {
        std::lock_guard<std::mutex> lock(mu);
        recorded[k] = Clock::now();
        count.store(k + 1, std::memory_order_release);
      }
      cv.notify_one();
    }
  });
  holder.join();
  waiter.join();
  return waited / records;
}

}  // namespace

void BurnCpu(int iterations) {
  volatile double x = 1.0;
  for (int i = 0; i < iterations; ++i) x = x * 1.0000001 + 1e-9;
}

BusyThreads::BusyThreads(const std::vector<int>& cpus) {
  for (int cpu : cpus)
    threads_.emplace_back([this, cpu] {
      if (cpu >= 0) PinThisThread(cpu);
      while (!stop_.load(std::memory_order_relaxed)) BurnCpu(1000);
    });
}

BusyThreads::~BusyThreads() {
  stop_ = true;
  for (std::thread& t : threads_) t.join();
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

void PinThisThread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

WakeLatency MeasureWakeLatency(int cores, int hops) {
  WakeLatency w;
  w.idle = PingPong(hops);
  w.spin = SpinPingPong(hops * 10);
  {
    BusyThreads busy(std::vector<int>(cores, -1));
    w.busy = PingPong(std::max(10, hops / 10));  // slow hops: fewer of them
  }
  using std::chrono::microseconds;
  // A typical op of the small models' plans between records.
  w.held_spin = HeldCoreHandOff(hops * 10, microseconds(50), true, microseconds(0));
  // Half of each millisecond in the woken thread's own work.
  constexpr microseconds kWork(500);
  w.held_wake_factor = HeldCoreHandOff(hops * 5, microseconds(1000), false, kWork) /
                       std::chrono::duration<double>(kWork).count();
  return w;
}

namespace {

// CPU seconds per wall second each of k spinning threads gets over one window. The
// threads spin for a while before the window opens: new threads start on their parent's
// core and only the load balancer spreads them, which a run's long-lived threads never see.
double ThreadRateOnce(int k, double seconds) {
  std::vector<double> rate(k, 0);
  std::vector<std::thread> threads;
  const auto open = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  for (int t = 0; t < k; ++t)
    threads.emplace_back([&rate, seconds, t, open] {
      while (std::chrono::steady_clock::now() < open) BurnCpu(10000);
      const double cpu0 = ThreadCpuSeconds();
      auto start = std::chrono::steady_clock::now();
      double wall = 0;
      while (wall < seconds) {
        BurnCpu(10000);
        wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
      const double cpu = ThreadCpuSeconds() - cpu0;
      rate[t] = std::min(1.0, cpu / wall);
    });
  for (std::thread& t : threads) t.join();
  double mean = 0;
  for (double r : rate) mean += r;
  return mean / k;
}

}  // namespace

std::vector<double> MeasureThreadRates(int max_threads, double seconds) {
  // Other users' load comes in bursts: the median of several short windows per count,
  // the counts interleaved so a burst does not land on one count only.
  constexpr int kWindows = 5;
  std::vector<std::vector<double>> windows(max_threads);
  for (int w = 0; w < kWindows; ++w)
    for (int k = 1; k <= max_threads; ++k)
      windows[k - 1].push_back(ThreadRateOnce(k, seconds / kWindows));
  std::vector<double> rates;
  for (std::vector<double>& v : windows) {
    std::sort(v.begin(), v.end());
    rates.push_back(v[v.size() / 2]);
  }
  return rates;
}

}  // namespace pw::cost
