#include "ab/ab_run.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "executor/comm/kv_store.h"
#include "executor/launcher.h"
#include "executor/rank_process.h"
#include "executor/run_report.h"
#include "executor/tensor_file.h"
#include "executor/watchdog.h"

namespace pw::ab {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// One rank's report of one step (a `step ...` line on its report pipe).
struct RankStep {
  bool reported = false;
  int loss_count = 0;
  double loss_sum = 0;
  double ms = 0;
  double cpu_ms = 0;  // NaN: not measured
};

// What the ranks of one round have reported: written on the launcher's thread, read by the
// stall watch.
class RoundState {
 public:
  RoundState(int nproc, int64_t steps)
      : steps_(nproc, std::vector<RankStep>(steps)), done_(nproc, 0), peak_(nproc, 0) {}

  // True when `step` has now been reported by every rank. Malformed lines are ignored.
  bool Record(int rank, const std::string& line) {
    RankStepReport report;
    if (!ParseStepReport(line, &report)) return false;
    const int64_t step = report.step, bytes = report.peak_bytes;
    RankStep s;
    s.loss_count = report.loss_count;
    s.ms = report.step_ms;
    s.cpu_ms = report.MeasuredCpuMs();
    s.loss_sum = report.loss_sum;
    std::lock_guard<std::mutex> lock(mu_);
    if (step < 0 || step >= static_cast<int64_t>(steps_[rank].size())) return false;
    s.reported = true;
    steps_[rank][step] = s;
    ++done_[rank];
    peak_[rank] = std::max(peak_[rank], bytes);
    last_progress_ = Clock::now();
    for (const auto& rank_steps : steps_)
      if (!rank_steps[step].reported) return false;
    return true;
  }

  Clock::time_point last_progress() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_progress_;
  }
  std::vector<int> steps_done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }

  // The round's figures; an error when some rank did not report every step.
  StatusOr<MeasuredRound> Finish() const {
    std::lock_guard<std::mutex> lock(mu_);
    MeasuredRound round;
    round.peak_bytes = peak_;
    const size_t steps = steps_[0].size();
    for (size_t step = 0; step < steps; ++step) {
      double ms = 0, cpu_ms = 0, loss_sum = 0;
      int loss_count = 0;
      // Summed in rank order, so that equal reports give equal bits.
      for (size_t rank = 0; rank < steps_.size(); ++rank) {
        const RankStep& s = steps_[rank][step];
        if (!s.reported) return Internal("rank ", rank, " ended without reporting step ", step + 1);
        ms = std::max(ms, s.ms);
        cpu_ms += s.cpu_ms;
        loss_sum += s.loss_sum;
        loss_count += s.loss_count;
      }
      round.step_ms.push_back(ms);
      round.step_cpu_ms.push_back(cpu_ms);
      round.losses.push_back(loss_count ? loss_sum / loss_count : NAN);
    }
    return round;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::vector<RankStep>> steps_;  // [rank][step]
  std::vector<int> done_;                     // steps reported per rank
  std::vector<int64_t> peak_;
  Clock::time_point last_progress_ = Clock::now();
};

// "rank 2" or "ranks 0, 1, 3".
std::string RankList(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += StrCat(i ? ", " : "", ranks[i]);
  return out;
}

// Stops a round in which no rank finishes a step for `timeout`: publishes the abort notice
// in the round's store, which every rank's watchdog obeys (the launcher then reaps them).
class StallWatch {
 public:
  StallWatch(const RoundState& state, KvStore& store, std::chrono::seconds timeout, int64_t steps)
      : state_(state), store_(store), timeout_(timeout), steps_(steps) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~StallWatch() { Stop(); }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // Why the round was stopped, once it was.
  std::optional<std::string> stalled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }

 private:
  // Names the ranks holding the round up: those that never joined its store (a rank
  // process that hangs before training), else those with the fewest steps done.
  std::string Describe() {
    std::vector<int> absent;
    for (int r = 0; r < static_cast<int>(state_.steps_done().size()); ++r) {
      StatusOr<std::optional<std::string>> pid = store_.TryGet(StrCat("pid/", r));
      if (pid.ok() && !pid->has_value()) absent.push_back(r);
    }
    if (!absent.empty())
      return StrCat("no step finished for ", timeout_.count(), " s: ", RankList(absent),
                    " did not join the round; the round was stopped");
    std::vector<int> done = state_.steps_done();
    int least = *std::min_element(done.begin(), done.end());
    std::vector<int> behind;
    for (size_t r = 0; r < done.size(); ++r)
      if (done[r] == least) behind.push_back(static_cast<int>(r));
    return StrCat("no step finished for ", timeout_.count(), " s (a deadlock?): ", RankList(behind),
                  " stuck in step ", least + 1, " of ", steps_, "; the round was stopped");
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(200));
      if (stop_ || Clock::now() - state_.last_progress() < timeout_) continue;
      reason_ = Describe();
      (void)Watchdog::PublishAbort(store_, *reason_);
      return;
    }
  }

  const RoundState& state_;
  KvStore& store_;
  const std::chrono::seconds timeout_;
  const int64_t steps_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<std::string> reason_;
  std::thread thread_;
};

std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// The launcher's account of a failed round, with the failing rank's own last words (its
// log) when it exited with an error rather than a signal.
std::string DescribeFailure(const LaunchResult& result, const fs::path& logs) {
  std::string out = result.failure;
  int rank = -1;
  if (std::sscanf(result.failure.c_str(), "rank %d ", &rank) == 1 && rank >= 0 &&
      rank < static_cast<int>(result.exit_codes.size())) {
    int code = result.exit_codes[rank];
    std::string why = LastLine((logs / StrCat("rank", rank, ".log")).string());
    if (code > 0 && code < 128 && !why.empty()) out += StrCat(" (", why, ")");
  }
  return out;
}

struct RoundPlace {
  char plan;  // 'A' or 'B'
  int round;  // 0-based
  fs::path dir;
};

std::string Name(const RoundPlace& p) { return StrCat("plan ", p.plan, ", round ", p.round + 1); }

StatusOr<MeasuredRound> RunRound(const AbRunSettings& s, const RoundPlace& place,
                                 const std::function<void()>& on_step) {
  const fs::path logs = place.dir / "logs", params = place.dir / "params";
  std::error_code ec;
  fs::remove_all(place.dir, ec);  // a fresh store: an old abort notice would stop the ranks
  fs::create_directories(logs, ec);
  fs::create_directories(params, ec);
  if (ec) return Internal("cannot create ", place.dir.string(), ": ", ec.message());

  LaunchOptions options;
  options.executable = s.rank_program;
  options.nproc = s.nproc;
  options.run_dir = place.dir.string();
  options.grace = std::chrono::seconds(5);  // ranks obey an abort within a poll
  options.args = {"ab-rank",
                  logs.string(),
                  StrCat(place.plan, ":", place.round + 1),
                  "run-parallel",
                  place.plan == 'A' ? s.module_a : s.module_b,
                  "--steps",
                  std::to_string(s.steps),
                  "--seed",
                  std::to_string(s.seed),
                  "--micro-batches",
                  std::to_string(s.micro_batches),
                  "--backend",
                  s.backend,
                  "--save-params",
                  params.string()};
  if (s.strict_events) options.args.push_back("--strict-events");
  options.rank_prefix = s.rank_prefix;
  if (!s.store_server.empty())
    options.store = StrCat(s.store_server, "/ab-", getpid(), "-", place.plan, place.round + 1);

  RoundState state(s.nproc, s.steps);
  options.on_report = [&](int rank, const std::string& line) {
    if (state.Record(rank, line)) on_step();
  };
  PW_ASSIGN_OR_RETURN(
      std::unique_ptr<KvStore> store,
      OpenStore(options.store.empty() ? (place.dir / "store").string() : options.store));
  StallWatch watch(state, *store, s.stall_timeout, s.steps);
  StatusOr<LaunchResult> launched = LaunchRanks(options);
  watch.Stop();
  const std::string where = StrCat(Name(place), ": ");
  const std::string see = StrCat(" (logs in ", logs.string(), ")");
  if (!launched.ok()) return launched.status().WithContext(Name(place));
  if (std::optional<std::string> reason = watch.stalled()) return Aborted(where, *reason, see);
  if (!launched->ok) return Aborted(where, DescribeFailure(*launched, logs), see);
  StatusOr<MeasuredRound> round = state.Finish();
  if (!round.ok()) return round.status().WithContext(Name(place));
  return round;
}

// Compares the parameters both plans saved in one round, rank file by rank file.
StatusOr<ParamComparison> CompareRoundParams(const fs::path& a, const fs::path& b, int nproc,
                                             int round) {
  ParamComparison all;
  for (int rank = 0; rank < nproc; ++rank) {
    const std::string file = StrCat("rank", rank, ".params");
    PW_ASSIGN_OR_RETURN(auto ta, LoadTensors((a / "params" / file).string()));
    PW_ASSIGN_OR_RETURN(auto tb, LoadTensors((b / "params" / file).string()));
    all.Merge(CompareTensors(ta, tb, StrCat("round ", round + 1, " rank ", rank)));
  }
  return all;
}

// Each round's timed steps (all but its first) of one figure.
RoundSteps TimedRounds(const MeasuredPlan& plan, std::vector<double> MeasuredRound::*figure) {
  RoundSteps rounds;
  for (const MeasuredRound& r : plan.rounds)
    if ((r.*figure).size() > 1) rounds.emplace_back((r.*figure).begin() + 1, (r.*figure).end());
  return rounds;
}

void Summarize(MeasuredPlan& plan) {
  for (const std::vector<double>& r : TimedRounds(plan, &MeasuredRound::step_ms))
    plan.timed_steps_ms.insert(plan.timed_steps_ms.end(), r.begin(), r.end());
  for (const std::vector<double>& r : TimedRounds(plan, &MeasuredRound::step_cpu_ms))
    plan.timed_steps_cpu_ms.insert(plan.timed_steps_cpu_ms.end(), r.begin(), r.end());
  for (const MeasuredRound& r : plan.rounds) {
    if (plan.peak_bytes.size() < r.peak_bytes.size()) plan.peak_bytes.resize(r.peak_bytes.size());
    for (size_t k = 0; k < r.peak_bytes.size(); ++k)
      plan.peak_bytes[k] = std::max(plan.peak_bytes[k], r.peak_bytes[k]);
  }
  plan.median_step_ms = Median(plan.timed_steps_ms);
  // NaN unless every rank measured every step's CPU.
  const std::vector<double>& cpu = plan.timed_steps_cpu_ms;
  plan.median_step_cpu_ms =
      !cpu.empty() && std::all_of(cpu.begin(), cpu.end(), [](double x) { return std::isfinite(x); })
          ? Median(cpu)
          : NAN;
  for (int64_t b : plan.peak_bytes) plan.max_peak_bytes = std::max(plan.max_peak_bytes, b);
}

std::vector<std::vector<double>> Losses(const MeasuredPlan& plan) {
  std::vector<std::vector<double>> out;
  for (const MeasuredRound& r : plan.rounds) out.push_back(r.losses);
  return out;
}

}  // namespace

Status CheckLosses(const LossComparison& l, double tolerance) {
  if (l.bit_identical || l.max_rel_diff <= tolerance) return OkStatus();
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "plans A and B train differently: round %d step %d loss A %.9g, B %.9g "
                "(relative difference %.3g > --loss-tolerance %g)",
                l.worst_round + 1, l.worst_step + 1, l.worst_a, l.worst_b, l.max_rel_diff,
                tolerance);
  return FailedPrecondition(buf);
}

StatusOr<MeasuredAB> RunAB(const AbRunSettings& s) {
  if (s.steps < 2) return InvalidArgument("--steps must be >= 2 (the first is warm-up)");
  if (s.rounds < 1) return InvalidArgument("--rounds must be >= 1");
  MeasuredAB out;
  auto progress = [&](size_t done, size_t total, const std::string& detail) {
    if (s.on_progress) s.on_progress(done, total, detail);
  };
  const size_t total = 2 * static_cast<size_t>(s.rounds) * s.steps;
  size_t done = 0;
  for (int round = 0; round < s.rounds; ++round) {
    RoundPlace places[2] = {{'A', round, fs::path(s.run_dir) / StrCat("round", round + 1, "_a")},
                            {'B', round, fs::path(s.run_dir) / StrCat("round", round + 1, "_b")}};
    for (const RoundPlace& place : places) {
      const std::string detail = StrCat("round ", round + 1, "/", s.rounds, ", plan ", place.plan);
      progress(done, total, detail);
      PW_ASSIGN_OR_RETURN(MeasuredRound measured,
                          RunRound(s, place, [&] { progress(++done, total, detail); }));
      (place.plan == 'A' ? out.a : out.b).rounds.push_back(std::move(measured));
    }
    // Losses that part are an error at once, not after the remaining rounds.
    out.losses = CompareLosses(Losses(out.a), Losses(out.b));
    PW_RETURN_IF_ERROR(CheckLosses(out.losses, s.loss_tolerance));
    StatusOr<ParamComparison> params =
        CompareRoundParams(places[0].dir, places[1].dir, s.nproc, round);
    if (!params.ok())
      return params.status().WithContext(StrCat("round ", round + 1, " parameters"));
    out.params.Merge(*params);
    if (!s.keep_rounds) {
      std::error_code ignored;  // a directory left behind costs disk, not the answer
      for (const RoundPlace& place : places) fs::remove_all(place.dir, ignored);
    }
  }
  Summarize(out.a);
  Summarize(out.b);
  out.step_ratio = BootstrapMedianRatio(TimedRounds(out.a, &MeasuredRound::step_ms),
                                        TimedRounds(out.b, &MeasuredRound::step_ms));
  if (std::isfinite(out.a.median_step_cpu_ms) && std::isfinite(out.b.median_step_cpu_ms))
    out.cpu_ratio = BootstrapMedianRatio(TimedRounds(out.a, &MeasuredRound::step_cpu_ms),
                                         TimedRounds(out.b, &MeasuredRound::step_cpu_ms));
  else
    out.cpu_ratio.ratio = out.cpu_ratio.low = out.cpu_ratio.high = NAN;
  return out;
}

}  // namespace pw::ab
