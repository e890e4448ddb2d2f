#pragma once
// Whether the machine held still while `profile --in-run` timed a plan. Its ops are timed in
// a few short rounds spread over the profile (a round is a couple of steps); a shared VM's
// speed moves in spells of seconds (the slowest second of single-threaded work 1.3-1.5x the
// fastest on one of this project's VMs), and a round taken in a slow spell prices every op
// of the plan slower together. The table pools the rounds, so it prices ops at whatever mix
// of speeds they met: the profile says so when its rounds disagree.

#include <map>
#include <string>
#include <vector>

namespace pw::tools {

// A round's op time: the sum over its signatures of each one's median time (seconds).
double RoundOpTime(const std::map<std::string, std::vector<double>>& seconds);

// Rounds whose slowest op time is more than this over their fastest are reported.
inline constexpr double kUnsteadyRounds = 1.15;

// One line saying how far the op time of `plan`'s rounds moved and what it means, when the
// slowest is more than kUnsteadyRounds over the fastest; "" otherwise (and for one round).
std::string UnsteadyRoundsNote(const std::string& plan, const std::vector<double>& round_times);

}  // namespace pw::tools
