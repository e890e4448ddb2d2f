#pragma once
// Whether the machine held still while `profile --in-run` timed a plan. Its ops are timed in
// a few short rounds spread over the profile (a round is a couple of steps); a shared VM's
// speed moves in spells of about a second (the small GPT's step 1.4-1.5x slower in them on
// one of this project's VMs), and a round taken in a slow spell prices every op of the plan
// slower together. A spell only ever slows the machine, and a run's median step falls
// outside its spells: the table prices ops from the rounds near the fastest, and a round
// that met a spell is taken again. Likewise `profile --comm`'s measuring run, whose step the
// ranks' turns on the cores are fitted to: taken in a slow spell, it asks more than the
// model can give, so it is taken at least twice and the fit rests on a run near the fastest.

#include <map>
#include <string>
#include <vector>

namespace pw::tools {

// A round's op time: the sum over its signatures of each one's median time (seconds).
double RoundOpTime(const std::map<std::string, std::vector<double>>& seconds);

// Rounds whose slowest op time is more than this over their fastest are reported.
inline constexpr double kUnsteadyRounds = 1.15;

// The rounds to price a plan's ops from: those whose op time is within kUnsteadyRounds of
// the fastest, in their order (all of one round or none).
std::vector<size_t> SteadyRounds(const std::vector<double>& round_times);

// Whether a plan with these rounds wants another: fewer than `wanted` of them are steady.
bool WantsAnotherRound(const std::vector<double>& round_times, size_t wanted);

// One line, when the slowest of `plan`'s rounds is more than kUnsteadyRounds over the
// fastest, saying how far they moved, how many the table prices from, and, when fewer than
// `wanted` are steady, what to do; "" otherwise (and for one round).
std::string UnsteadyRoundsNote(const std::string& plan, const std::vector<double>& round_times,
                               size_t wanted);

// `profile --comm` takes a plan's measuring run --comm-runs times, and up to this many more
// while the fastest is unconfirmed or beyond reach (below).
inline constexpr int kMeasuringRetakes = 2;

// Whether the fastest of a plan's measuring runs (their steps) is confirmed: another came
// within kBeyondReach of it, or there is only one. Two runs far apart met different
// speeds of the machine.
bool FastestConfirmed(const std::vector<double>& steps);

// Which of a plan's measuring runs (their steps) the fit rests on: of those within
// kBeyondReach of the fastest, the median (of an even count, the slower middle one). The
// fastest alone would lean fast: runs outside the spells still spread by a few percent.
size_t KeptRun(const std::vector<double>& steps);

// A measuring run slower than this over the simulation with all of its measured straggle is
// beyond reach (taken again, then reported); measuring runs this close agree.
inline constexpr double kBeyondReach = 1.10;

// Whether a measuring run stepped `measured` beyond the reach of the fit (`with_all`).
bool BeyondReach(double measured, double with_all);

// One line when the measuring run's step (`measured`, seconds; of several plans, summed)
// is more than kBeyondReach over the longest step the fit can simulate (`with_all`): the
// machine was slower during the run than while the ops were timed, or the plan spends time
// the model does not see; "" otherwise.
std::string SlowMeasuringRunNote(double measured, double with_all);

}  // namespace pw::tools
