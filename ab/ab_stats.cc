#include "ab/ab_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "ir/status.h"

namespace pw::ab {
namespace {

// SplitMix64: a small generator whose sequence is the same on every platform (the
// standard distributions are not), so a seed gives the same interval everywhere.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (Lemire's multiply-shift; the bias is below 2^-40 for our n).
  size_t Below(size_t n) {
    return static_cast<size_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

// Draws `rounds` (given as indices) and then each one's steps, with replacement, into `out`.
void DrawSteps(const RoundSteps& steps, const std::vector<size_t>& rounds, SplitMix64& rng,
               std::vector<double>& out) {
  out.clear();
  for (size_t r : rounds) {
    const std::vector<double>& round = steps[r];
    for (size_t k = 0; k < round.size(); ++k) out.push_back(round[rng.Below(round.size())]);
  }
}

std::vector<double> AllSteps(const RoundSteps& rounds) {
  std::vector<double> all;
  for (const std::vector<double>& r : rounds) all.insert(all.end(), r.begin(), r.end());
  return all;
}

// The q-quantile of sorted values, interpolating between neighbours.
double Quantile(const std::vector<double>& sorted, double q) {
  double pos = q * (sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

std::string Format(const char* fmt, double a, double b, double c) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c);
  return buf;
}

}  // namespace

double Median(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

RatioInterval BootstrapMedianRatio(const RoundSteps& a, const RoundSteps& b,
                                   const BootstrapOptions& options) {
  RatioInterval out;
  const std::vector<double> all_a = AllSteps(a), all_b = AllSteps(b);
  out.ratio = Median(all_b) / Median(all_a);
  out.samples = std::min(all_a.size(), all_b.size());
  SplitMix64 rng(options.seed);
  const bool paired = a.size() == b.size();
  // The rounds of one resample: all of them where there is one (nothing to draw).
  auto draw_rounds = [&](size_t count, std::vector<size_t>& picked) {
    picked.resize(count);
    for (size_t i = 0; i < count; ++i) picked[i] = count == 1 ? 0 : rng.Below(count);
  };
  std::vector<double> ratios, drawn_a, drawn_b;
  std::vector<size_t> rounds_a, rounds_b;
  ratios.reserve(options.resamples);
  for (int i = 0; i < options.resamples && !a.empty() && !b.empty(); ++i) {
    draw_rounds(a.size(), rounds_a);
    if (paired)
      rounds_b = rounds_a;
    else
      draw_rounds(b.size(), rounds_b);
    DrawSteps(a, rounds_a, rng, drawn_a);
    DrawSteps(b, rounds_b, rng, drawn_b);
    ratios.push_back(Median(drawn_b) / Median(drawn_a));
  }
  if (ratios.empty()) {
    out.low = out.high = out.ratio;
    return out;
  }
  std::sort(ratios.begin(), ratios.end());
  double tail = (1 - options.confidence) / 2;
  out.low = Quantile(ratios, tail);
  out.high = Quantile(ratios, 1 - tail);
  return out;
}

std::string Verdict(const RatioInterval& r) {
  if (r.samples < kMinSamplesForVerdict)
    return StrCat("no verdict from ", r.samples, " timed steps per plan (", kMinSamplesForVerdict,
                  " needed)");
  if (r.high < 1)
    return Format("B faster by %.1f %% [%.1f, %.1f]", 100 * (1 - r.ratio), 100 * (1 - r.high),
                  100 * (1 - r.low));
  if (r.low > 1)
    return Format("B slower by %.1f %% [%.1f, %.1f]", 100 * (r.ratio - 1), 100 * (r.low - 1),
                  100 * (r.high - 1));
  return Format("no difference found (B/A %.3f [%.3f, %.3f])", r.ratio, r.low, r.high);
}

}  // namespace pw::ab
