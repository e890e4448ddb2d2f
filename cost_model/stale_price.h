#pragma once
// The price of a byte an op finds beyond a cache, measured. On a CPU the order of a rank's
// jobs moves what its ops cost: an activation read long after it was written comes from
// further away (fthenb's backward reads every one after all the forwards). A table profiled
// in runs of several schedules has each signature's cost in each order, and the plans say
// what each signature's runs found beyond a cache in each (simulator/stale_bytes.h). Which
// cache: the candidate (a core's L2, doubled up to the L3) whose counts explain best how the
// signatures' costs moved between the orders, the least-squares fit over signatures, as a
// virtual machine's share of a shared L3 is not what it reports. The price: what a step's
// compute moved from one order to another over what it found beyond that cache. The
// simulator then prices a plan of any order by its own counts.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cost_model/op_cost_table.h"

namespace pw::cost {

// What the profiled plans' runs of each signature found beyond each candidate cache.
class StaleCounts {
 public:
  explicit StaleCounts(std::vector<int64_t> capacities);
  // The caches from `l2` doubling up to `l3`.
  static std::vector<int64_t> Candidates(int64_t l2, int64_t l3);

  // One plan of `schedule`: per candidate (in order), per signature key, the bytes a run
  // found beyond it and the runs a step.
  struct Count {
    double bytes = 0;
    double runs = 0;
  };
  void AddPlan(const std::string& schedule,
               const std::vector<std::map<std::string, Count>>& per_capacity);

  const std::vector<int64_t>& capacities() const { return capacities_; }
  // The mean bytes a run of `key` found beyond candidate `c`, over every plan (`schedule`
  // empty) or over `schedule`'s; none when no such plan runs it.
  std::optional<double> Mean(size_t c, const std::string& schedule, const std::string& key) const;
  // Each signature's runs a step, the mean over the plans.
  std::map<std::string, double> RunsPerStep() const;

 private:
  std::vector<int64_t> capacities_;
  int plans_ = 0;
  // Per candidate, per (schedule, key) ("" schedule: every plan): bytes and runs, summed.
  std::vector<std::map<std::pair<std::string, std::string>, Count>> sums_;
};

struct StaleFit {
  struct Order {
    std::string schedule;
    double seconds = 0;  // a step's compute over the signatures every schedule measured
    double bytes = 0;    // what those found beyond the cache a step
  };
  bool fitted = false;           // false: fewer than two orders, or no cache tells them apart
  int64_t capacity = 0;          // the cache chosen
  double price = 0;              // seconds per byte (a negative slope, noise, prices nothing)
  double r_squared = 0;          // of the signatures' cost changes, at that cache
  int signatures = 0;            // measured in every schedule
  std::vector<Order> orders;     // at that cache, one per schedule of the table
  std::string Describe() const;  // one line for profile's report
};

// Fits over `table`'s schedules' own entries (OpCostTable::FindOwn), each signature weighted
// by its runs a step.
StaleFit FitStalePrice(const OpCostTable& table, const StaleCounts& counts);

}  // namespace pw::cost
