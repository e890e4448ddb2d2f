#pragma once
// What the scheduler of this machine gives a run. How long waking a blocked thread takes,
// idle and with every core kept busy: two threads hand a token back and forth through
// condition variables (as stream workers wait on events), first alone, then beside one
// spinning thread per core; the difference is what a rank's stream pays to resume while
// other ranks compute on all cores. And how long a hand-off takes between threads that
// spin for it (as stream workers do while their events come soon), and how long such a
// spinner waits for a turn on a core that a computing thread holds. And how fast k busy threads run
// when other users' processes share the cores.

#include <atomic>
#include <thread>
#include <vector>

namespace pw::cost {

// Arithmetic that keeps the calling thread's core busy for `iterations` multiply-adds
// (~1 ns each here): the stand-in for an op's computation in these measurements.
void BurnCpu(int iterations);

// Threads that keep cores busy with arithmetic until destroyed, standing for ranks that
// compute on every core: one per entry of `cpus`, pinned to that CPU, or unpinned for -1.
class BusyThreads {
 public:
  explicit BusyThreads(const std::vector<int>& cpus);
  ~BusyThreads();
  BusyThreads(const BusyThreads&) = delete;
  BusyThreads& operator=(const BusyThreads&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// Pins the calling thread to one CPU (best effort: an error leaves it where it was).
void PinThisThread(int cpu);

// The CPUs this process may run on.
std::vector<int> AllowedCpus();

struct WakeLatency {
  double idle = 0;  // seconds per hand-off
  double busy = 0;
  double spin = 0;  // between two threads that spin for it instead of sleeping
  // From a thread that records an event and computes on to a thread spinning for it on
  // the same core, every other core busy: the spinner's turn on a core compute holds.
  double held_spin = 0;
  // The same with a waiter that blocks and, woken, computes before it waits again: its
  // mean wait over the CPU it used in between (the scheduler owes a thread that ran less).
  double held_wake_factor = 0;
};

WakeLatency MeasureWakeLatency(int cores, int hops = 200);

// The speed each of k spinning threads gets, for k = 1..max_threads: CPU time over wall
// time across `seconds`. Below 1 when other processes use the cores too.
std::vector<double> MeasureThreadRates(int max_threads, double seconds = 0.5);

}  // namespace pw::cost
