#pragma once
// What the scheduler of this machine gives a run. How long waking a blocked thread takes,
// idle and with every core kept busy: two threads hand a token back and forth through
// condition variables (as stream workers wait on events), first alone, then beside one
// spinning thread per core; the difference is what a rank's stream pays to resume while
// other ranks compute on all cores. And how fast k busy threads run when other users'
// processes share the cores.

#include <vector>

namespace pw::cost {

struct WakeLatency {
  double idle = 0;  // seconds per hand-off
  double busy = 0;
};

WakeLatency MeasureWakeLatency(int cores, int hops = 200);

// The speed each of k spinning threads gets, for k = 1..max_threads: CPU time over wall
// time across `seconds`. Below 1 when other processes use the cores too.
std::vector<double> MeasureThreadRates(int max_threads, double seconds = 0.5);

}  // namespace pw::cost
