#include "simulator/core_turns.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace pw::cost {

double TurnSlice(int cores) {
  constexpr double kBaseSlice = 0.75e-3;
  const int scaled = std::clamp(cores, 1, 8);
  return kBaseSlice * (1 + std::floor(std::log2(static_cast<double>(scaled))));
}

CoreTurns::CoreTurns(int threads, int cores)
    : slice_(TurnSlice(cores)),
      held_since_(threads, kNone),
      queued_since_(threads, kNone),
      claimed_in_(threads, 0) {}

std::vector<double> CoreTurns::Grant(double now, const std::vector<double>& free,
                                     const std::vector<Claim>& claims) {
  ++grants_;
  std::vector<double> wanted(free.size(), 0);  // per node: the threads its claims keep busy
  for (const Claim& c : claims) {
    claimed_in_[c.thread] = grants_;
    wanted[c.node] += c.threads;
    if (held_since_[c.thread] == kNone && queued_since_[c.thread] == kNone)
      queued_since_[c.thread] = c.ready;
  }
  // Only threads that claimed last time hold a turn or a place to lose (not every thread).
  for (int t : last_claims_)
    if (claimed_in_[t] != grants_) held_since_[t] = queued_since_[t] = kNone;
  last_claims_.clear();
  for (const Claim& c : claims) last_claims_.push_back(c.thread);
  auto short_of_cores = [&](int node) { return wanted[node] > free[node] * (1 + 1e-9); };
  // A turn that outlasted its slice while another waits ends: the thread queues again.
  for (const Claim& c : claims) {
    const double since = held_since_[c.thread];
    if (since != kNone && short_of_cores(c.node) && now >= since + slice_ * (1 - 1e-9)) {
      held_since_[c.thread] = kNone;
      queued_since_[c.thread] = now;
    }
  }
  // Passing CPU first, then turns held (in the order they began), then the queue in its order.
  std::vector<size_t> order(claims.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](size_t i) {
    const int r = claims[i].thread;
    const bool holds = held_since_[r] != kNone;
    return std::make_tuple(!claims[i].passing, !holds, holds ? held_since_[r] : queued_since_[r],
                           r);
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  std::vector<double> left = free;
  std::vector<double> granted(claims.size(), 0);
  for (size_t i : order) {
    const Claim& c = claims[i];
    double& cores = left[c.node];
    granted[i] = std::max(0.0, std::min(c.threads, cores));
    cores -= granted[i];
    const int r = c.thread;
    if (granted[i] > 0 && held_since_[r] == kNone) {
      held_since_[r] = now;
      queued_since_[r] = kNone;
    } else if (granted[i] == 0 && held_since_[r] != kNone) {
      // Fewer cores than turns (communication took them): back to the head of the queue.
      queued_since_[r] = held_since_[r];
      held_since_[r] = kNone;
    }
  }
  next_turn_end_ = std::numeric_limits<double>::infinity();
  for (const Claim& c : claims)
    if (held_since_[c.thread] != kNone && short_of_cores(c.node))
      next_turn_end_ = std::min(next_turn_end_, held_since_[c.thread] + slice_);
  return granted;
}

}  // namespace pw::cost
