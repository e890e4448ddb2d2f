#include "tools/in_run_rounds.h"

#include <algorithm>
#include <cstdio>

#include "cost_model/profiler.h"
#include "ir/status.h"

namespace pw::tools {
namespace {

// What both notes advise where the machine moved under a measurement.
constexpr char kProfileAgain[] =
    "profile again when the machine is steadier (benchmarks/machine_steadiness.py measures it)";

// The indices of `values` within `factor` of the smallest, in their order.
std::vector<size_t> NearFastest(const std::vector<double>& values, double factor) {
  std::vector<size_t> near;
  if (values.empty()) return near;
  const double fastest = *std::min_element(values.begin(), values.end());
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] <= factor * fastest) near.push_back(i);
  return near;
}

}  // namespace

double RoundOpTime(const std::map<std::string, std::vector<double>>& seconds) {
  double total = 0;
  for (const auto& [key, times] : seconds)
    if (!times.empty()) total += cost::Summarize(times).median;
  return total;
}

std::vector<size_t> SteadyRounds(const std::vector<double>& round_times) {
  return NearFastest(round_times, kUnsteadyRounds);
}

bool WantsAnotherRound(const std::vector<double>& round_times, size_t wanted) {
  return SteadyRounds(round_times).size() < wanted;
}

std::string UnsteadyRoundsNote(const std::string& plan, const std::vector<double>& round_times,
                               size_t wanted) {
  if (round_times.size() < 2) return "";
  const auto [fastest, slowest] = std::minmax_element(round_times.begin(), round_times.end());
  if (*fastest <= 0 || *slowest <= kUnsteadyRounds * *fastest) return "";
  const size_t steady = SteadyRounds(round_times).size();
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2fx", *slowest / *fastest);
  return StrCat("the machine's speed moved while ", plan, "'s ops were timed: its in-run rounds' ",
                "op times (each signature's median, summed) ran from ",
                static_cast<int>(*fastest * 1e6 + 0.5), " to ",
                static_cast<int>(*slowest * 1e6 + 0.5), " us, ", ratio, "; the table prices its ",
                "ops from the ", steady, " of ", round_times.size(), " rounds within ",
                kUnsteadyRounds, "x of the fastest",
                steady < wanted ? StrCat(" (", wanted, " wanted: ", kProfileAgain, ")") : "");
}

bool BeyondReach(double measured, double with_all) {
  return with_all > 0 && measured > kBeyondReach * with_all;
}

bool FastestConfirmed(const std::vector<double>& steps) {
  return steps.size() < 2 || NearFastest(steps, kBeyondReach).size() >= 2;
}

size_t KeptRun(const std::vector<double>& steps) {
  if (steps.empty()) return 0;
  std::vector<size_t> near = NearFastest(steps, kBeyondReach);
  std::sort(near.begin(), near.end(), [&](size_t a, size_t b) { return steps[a] < steps[b]; });
  return near[near.size() / 2];
}

std::string SlowMeasuringRunNote(double measured, double with_all) {
  if (!BeyondReach(measured, with_all)) return "";
  char figures[128];
  std::snprintf(figures, sizeof figures, "%.3f ms, %.2fx the %.3f ms", measured * 1e3,
                measured / with_all, with_all * 1e3);
  return StrCat("the measuring run stepped ", figures,
                " the simulation reaches with all of its measured straggle: the machine was ",
                "slower during it than while the ops were timed (a spell: ", kProfileAgain,
                "), or the plan spends time the model does not see (compare its traces: run ",
                "--trace, sim --trace, scripts/compare_traces.py)");
}

}  // namespace pw::tools
