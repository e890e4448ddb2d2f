#pragma once
// A union of half-open time intervals, for the simulator's busy and overlap figures.

#include <algorithm>
#include <utility>
#include <vector>

namespace pw::cost {

class IntervalSet {
 public:
  void Add(double begin, double end) {
    if (end > begin) raw_.push_back({begin, end});
    merged_ = false;
  }
  // Total length of the union.
  double Length() const {
    double total = 0;
    for (const auto& [b, e] : Merged()) total += e - b;
    return total;
  }
  // Length of the intersection of the two unions.
  double OverlapWith(const IntervalSet& other) const {
    const auto& a = Merged();
    const auto& b = other.Merged();
    double total = 0;
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
      double lo = std::max(a[i].first, b[j].first);
      double hi = std::min(a[i].second, b[j].second);
      if (hi > lo) total += hi - lo;
      (a[i].second < b[j].second ? i : j)++;
    }
    return total;
  }

 private:
  const std::vector<std::pair<double, double>>& Merged() const {
    if (merged_) return raw_;
    std::sort(raw_.begin(), raw_.end());
    std::vector<std::pair<double, double>> out;
    for (const auto& iv : raw_) {
      if (!out.empty() && iv.first <= out.back().second) {
        out.back().second = std::max(out.back().second, iv.second);
      } else {
        out.push_back(iv);
      }
    }
    raw_ = std::move(out);
    merged_ = true;
    return raw_;
  }
  mutable std::vector<std::pair<double, double>> raw_;
  mutable bool merged_ = true;
};

}  // namespace pw::cost
