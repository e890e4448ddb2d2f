#pragma once
// The statistics of `pipeweave ab --run`: the median step time of each plan, the ratio of
// the medians B/A with a 95 % percentile-bootstrap interval, and the verdict a person
// reads ("B faster by 4.1 % [2.0, 6.3]").

#include <cstdint>
#include <string>
#include <vector>

namespace pw::ab {

// The median of `values` (the mean of the two middle ones for an even count); NaN when
// empty.
double Median(std::vector<double> values);

struct RatioInterval {
  double ratio = 0;  // median(b) / median(a)
  double low = 0;    // the interval's bounds on the ratio
  double high = 0;
  size_t samples = 0;  // the smaller sample's size
};

// Fewer timed steps per plan than this give no verdict: a bootstrap of a handful of values
// is overconfident.
inline constexpr size_t kMinSamplesForVerdict = 6;

struct BootstrapOptions {
  int resamples = 10000;
  double confidence = 0.95;
  // Fixed, so that the same samples always give the same interval.
  uint64_t seed = 0x5eed'ab'5eedULL;
};

// A plan's timed steps, round by round (each round a fresh set of processes).
using RoundSteps = std::vector<std::vector<double>>;

// The ratio of medians median(b) / median(a), over all steps, and its percentile bootstrap
// interval. The rounds are the independent units, not the steps: a round's steps share its
// processes and the machine's moment (on a VM whose speed moves for a second at a time,
// the small GPT's rounds of one plan differed by 1.5x while their steps agreed), and an
// interval from steps drawn as if independent was too narrow by half there. So each
// resample draws the rounds with replacement, A's and B's of one index together (they ran
// one after the other), then each drawn round's steps with replacement, and takes the
// ratio of the medians of the drawn steps; the bounds are the (1 - confidence) / 2 and
// (1 + confidence) / 2 quantiles of the resampled ratios. With one round this is the
// bootstrap of its steps. Every round must be non-empty and the medians positive; rounds
// of unequal counts are drawn apart.
RatioInterval BootstrapMedianRatio(const RoundSteps& a, const RoundSteps& b,
                                   const BootstrapOptions& options = {});

// "B faster by 4.1 % [2.0, 6.3]" when the whole interval lies below 1 (the percentages are
// the time B saves, 1 - ratio), "B slower by 3.0 % [0.5, 5.2]" when it lies above 1 (ratio
// - 1), else "no difference found (B/A 1.004 [0.981, 1.027])"; with fewer than
// kMinSamplesForVerdict samples, "no verdict from 2 timed steps per plan (6 needed)".
std::string Verdict(const RatioInterval& interval);

}  // namespace pw::ab
