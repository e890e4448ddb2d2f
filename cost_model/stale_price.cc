#include "cost_model/stale_price.h"

#include <algorithm>
#include <cstdio>

#include "cost_model/estimator.h"

namespace pw::cost {
namespace {

// Orders whose counts differ by less than this (bytes a step, or a fraction of them) cannot
// tell the price from the noise of the costs.
constexpr double kMinSpreadBytes = 64 << 10;
constexpr double kMinSpreadFraction = 0.01;
// Below this share of the signatures' cost changes explained, no cache's counts follow
// what the order did to the costs: the order is left unpriced.
constexpr double kMinRSquared = 0.1;

// One signature's cost and count in one order, less their mean over the orders (each times
// its runs a step).
struct Change {
  double cost, bytes;
};

// The least-squares slope of the cost changes over the count changes, and the share of the
// cost changes it explains; false when either side does not change.
bool FitThroughOrigin(const std::vector<Change>& changes, double* slope, double* r_squared) {
  double cross = 0, spread = 0, total = 0, unexplained = 0;
  for (const Change& ch : changes) {
    cross += ch.cost * ch.bytes;
    spread += ch.bytes * ch.bytes;
    total += ch.cost * ch.cost;
  }
  if (spread <= 0 || total <= 0) return false;
  *slope = cross / spread;
  for (const Change& ch : changes) {
    const double left = ch.cost - *slope * ch.bytes;
    unexplained += left * left;
  }
  *r_squared = 1 - unexplained / total;
  return true;
}

struct Candidate {
  bool usable = false;
  double r_squared = 0;
  double price = 0;
  int signatures = 0;
  std::vector<StaleFit::Order> orders;
};

Candidate FitAt(const OpCostTable& table, const StaleCounts& counts, size_t c,
                const std::map<std::string, double>& runs_per_step) {
  Candidate out;
  const auto& schedules = table.proto().in_run_schedules();
  for (const std::string& s : schedules) out.orders.push_back({s, 0, 0});
  const size_t n = out.orders.size();
  std::vector<double> cost(n), bytes(n);
  std::vector<Change> changes;
  for (const auto& [key, runs] : runs_per_step) {
    size_t s = 0;
    for (; s < n; ++s) {
      const OpCostEntry* e = table.FindOwn(key, schedules[static_cast<int>(s)]);
      std::optional<double> mean = counts.Mean(c, schedules[static_cast<int>(s)], key);
      if (!e || !mean) break;
      cost[s] = runs * MeasuredSeconds(*e);
      bytes[s] = runs * *mean;
    }
    if (s < n) continue;
    ++out.signatures;
    double mean_cost = 0, mean_bytes = 0;
    for (s = 0; s < n; ++s) {
      out.orders[s].seconds += cost[s];
      out.orders[s].bytes += bytes[s];
      mean_cost += cost[s] / n;
      mean_bytes += bytes[s] / n;
    }
    for (s = 0; s < n; ++s) changes.push_back({cost[s] - mean_cost, bytes[s] - mean_bytes});
  }
  double slope = 0;
  if (!FitThroughOrigin(changes, &slope, &out.r_squared)) return out;
  // The price from the step totals: the figure that makes each profiled order's step what
  // its runs measured.
  double lowest = out.orders[0].bytes, highest = lowest, seconds_mean = 0, bytes_mean = 0;
  for (const StaleFit::Order& o : out.orders) {
    lowest = std::min(lowest, o.bytes);
    highest = std::max(highest, o.bytes);
    seconds_mean += o.seconds / n;
    bytes_mean += o.bytes / n;
  }
  double covariance = 0, variance = 0;
  for (const StaleFit::Order& o : out.orders) {
    covariance += (o.bytes - bytes_mean) * (o.seconds - seconds_mean);
    variance += (o.bytes - bytes_mean) * (o.bytes - bytes_mean);
  }
  out.usable =
      slope > 0 && highest - lowest >= std::max(kMinSpreadBytes, kMinSpreadFraction * bytes_mean);
  out.price = variance > 0 ? std::max(0.0, covariance / variance) : 0;
  return out;
}

}  // namespace

StaleCounts::StaleCounts(std::vector<int64_t> capacities)
    : capacities_(std::move(capacities)), sums_(capacities_.size()) {}

std::vector<int64_t> StaleCounts::Candidates(int64_t l2, int64_t l3) {
  if (l2 <= 0) return {};  // no cache read: nothing to count against
  std::vector<int64_t> out{l2};
  while (out.back() * 2 <= l3) out.push_back(out.back() * 2);
  return out;
}

void StaleCounts::AddPlan(const std::string& schedule,
                          const std::vector<std::map<std::string, Count>>& per_capacity) {
  ++plans_;
  for (size_t c = 0; c < per_capacity.size() && c < sums_.size(); ++c)
    for (const auto& [key, count] : per_capacity[c])
      for (const std::string& s : {std::string(), schedule}) {
        Count& sum = sums_[c][{s, key}];
        sum.bytes += count.bytes * count.runs;
        sum.runs += count.runs;
      }
}

std::optional<double> StaleCounts::Mean(size_t c, const std::string& schedule,
                                        const std::string& key) const {
  if (c >= sums_.size()) return std::nullopt;
  auto it = sums_[c].find({schedule, key});
  if (it == sums_[c].end() || it->second.runs == 0) return std::nullopt;
  return it->second.bytes / it->second.runs;
}

std::map<std::string, double> StaleCounts::RunsPerStep() const {
  std::map<std::string, double> out;
  if (sums_.empty() || plans_ == 0) return out;
  for (const auto& [at, count] : sums_[0])
    if (at.first.empty()) out[at.second] = count.runs / plans_;
  return out;
}

StaleFit FitStalePrice(const OpCostTable& table, const StaleCounts& counts) {
  StaleFit fit;
  if (counts.capacities().empty()) return fit;
  fit.capacity = counts.capacities().front();
  if (table.proto().in_run_schedules_size() < 2) return fit;
  const std::map<std::string, double> runs = counts.RunsPerStep();
  Candidate best;
  size_t chosen = 0;
  for (size_t c = 0; c < counts.capacities().size(); ++c) {
    Candidate candidate = FitAt(table, counts, c, runs);
    if (c == 0 || (candidate.usable && (!best.usable || candidate.r_squared > best.r_squared))) {
      best = std::move(candidate);
      chosen = c;
    }
  }
  fit.capacity = counts.capacities()[chosen];
  fit.r_squared = best.r_squared;
  fit.signatures = best.signatures;
  fit.orders = best.orders;
  fit.fitted = best.usable && best.r_squared >= kMinRSquared;
  if (fit.fitted) fit.price = best.price;
  return fit;
}

std::string StaleFit::Describe() const {
  if (orders.size() < 2) return "";
  char buf[240];
  std::string out;
  if (fitted)
    std::snprintf(buf, sizeof buf,
                  "memory beyond a %lld KiB cache priced at %.3f ns a byte (the cache whose "
                  "counts explain most of the signatures' cost changes between the orders: "
                  "%.0f %%)",
                  static_cast<long long>(capacity >> 10), price * 1e9, 100 * r_squared);
  else
    std::snprintf(buf, sizeof buf,
                  "memory beyond the caches left unpriced: no cache's counts follow how the "
                  "orders moved the signatures' costs (best: %lld KiB, %.0f %% explained)",
                  static_cast<long long>(capacity >> 10), 100 * r_squared);
  out = buf;
  for (size_t s = 0; s < orders.size(); ++s) {
    std::snprintf(buf, sizeof buf, "%s%s %.3f ms of compute a step, %.2f MiB beyond",
                  s ? "; " : ": ", orders[s].schedule.c_str(), orders[s].seconds * 1e3,
                  orders[s].bytes / 1048576.0);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, " (%d signatures)", signatures);
  return out + buf;
}

}  // namespace pw::cost
