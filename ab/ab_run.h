#pragma once
// The measured half of `pipeweave ab`: plans A and B trained for real on N local rank
// processes in interleaved rounds (A, B, A, B, ...), each round a fresh set of processes
// (executor/launcher.h). Every round drops its first step as warm-up; the rest give the
// step-time samples of the plan. Losses of every step and the final parameters of every
// round are compared between A and B.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ab/ab_compare.h"
#include "ab/ab_stats.h"
#include "ir/status.h"

namespace pw::ab {

struct AbRunSettings {
  std::string module_a, module_b;  // prepared module files the ranks load
  int nproc = 1;
  int64_t steps = 2;  // per round, the first of them warm-up
  int rounds = 5;
  uint64_t seed = 1;
  int micro_batches = 1;  // for a module without a plan
  std::string backend = "cpu";
  bool strict_events = false;
  // Losses of A and B further apart than this (relative) are an error; 0: bit-identical.
  double loss_tolerance = 1e-6;
  // A round in which no rank finishes a step for this long is stopped as deadlocked.
  std::chrono::seconds stall_timeout{120};
  std::string run_dir;  // each round's store, logs and saved parameters go under it
  // Ranks on other hosts: a Redis server for the rounds' stores (each round its own
  // prefix) and the command put before each rank's (executor/launcher.h's rank_prefix).
  std::string store_server;
  std::vector<std::string> rank_prefix;
  bool keep_rounds = false;  // else a round pair's directories go once compared
  // Every rank process is this program with `ab-rank LOG_DIR LABEL run-parallel MODULE ...`:
  // the pipeweave command line (tools/cmd_ab_rank.cc). The default is the calling process
  // itself, which is right inside `pipeweave`; an embedding program names the installed
  // `pipeweave` binary.
  std::string rank_program = "/proc/self/exe";
  // Called as steps finish (`done` of `total` over all rounds); may be empty.
  std::function<void(size_t done, size_t total, const std::string& detail)> on_progress;
};

struct MeasuredRound {
  std::vector<double> step_ms;      // per step, the slowest rank's time
  std::vector<double> step_cpu_ms;  // per step, the rank processes' CPU time summed
  std::vector<double> losses;       // per step, the mean loss over the micro-batches
  std::vector<int64_t> peak_bytes;  // per rank, the largest of its steps
};

struct MeasuredPlan {
  std::vector<MeasuredRound> rounds;
  std::vector<double> timed_steps_ms;  // every round's steps but the first
  double median_step_ms = 0;
  std::vector<double> timed_steps_cpu_ms;  // the same steps' CPU time
  double median_step_cpu_ms = 0;
  std::vector<int64_t> peak_bytes;  // per rank, the largest of all rounds
  int64_t max_peak_bytes = 0;
};

struct MeasuredAB {
  MeasuredPlan a, b;
  RatioInterval step_ratio;  // median B / median A
  RatioInterval cpu_ratio;   // the same of the steps' CPU time
  LossComparison losses;
  ParamComparison params;
};

// Runs the rounds. A round that fails (a rank dies, or no rank finishes a step within the
// stall timeout) is an error naming the plan, the round and the rank; so are losses that
// part beyond the tolerance, after the round pair in which they do.
StatusOr<MeasuredAB> RunAB(const AbRunSettings& settings);

// OK when the losses are bit-identical or within `tolerance`; else the error names the step.
Status CheckLosses(const LossComparison& losses, double tolerance);

}  // namespace pw::ab
