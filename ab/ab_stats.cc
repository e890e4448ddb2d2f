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

double ResampledMedian(const std::vector<double>& values, SplitMix64& rng,
                       std::vector<double>& scratch) {
  scratch.resize(values.size());
  for (double& v : scratch) v = values[rng.Below(values.size())];
  return Median(scratch);
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

RatioInterval BootstrapMedianRatio(const std::vector<double>& a, const std::vector<double>& b,
                                   const BootstrapOptions& options) {
  RatioInterval out;
  out.ratio = Median(b) / Median(a);
  out.samples = std::min(a.size(), b.size());
  SplitMix64 rng(options.seed);
  std::vector<double> ratios, scratch;
  ratios.reserve(options.resamples);
  for (int i = 0; i < options.resamples; ++i) {
    double ma = ResampledMedian(a, rng, scratch);
    double mb = ResampledMedian(b, rng, scratch);
    ratios.push_back(mb / ma);
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
