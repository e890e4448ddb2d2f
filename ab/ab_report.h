#pragma once
// How `pipeweave ab` prints its comparison: a table for people, JSON for scripts.
//
// JSON (stable keys; "sim" and "run" appear when measured):
//   {"module": FILE, "pipelines": {"a": TEXT, "b": TEXT},
//    "sim": {"device": NAME,
//            "a"|"b": {"step_time_ms", "bubble_rate",
//                      "exposed_comm_ms": {"total", "mp_forward", "mp_backward", "pp_send",
//                                          "pp_recv", "dp"},
//                      "busy_ms_by_stream": {"compute", "mp_comm", "pp_send", "pp_recv",
//                                            "dp_comm", "mp_fwd_comm"},
//                      "peak_bytes": [per rank], "max_peak_bytes",
//                      ["cpu_ms_per_step": on CPU devices, the core time a step uses]},
//            "ratio": the same keys, each B/A},
//    "run": {"nproc", "rounds", "steps_per_round", "warmup_steps_per_round",
//            "a"|"b": {"median_step_ms", "step_ms": [[per round]], "median_step_cpu_ms",
//                      "step_cpu_ms": [[per round: the rank processes' CPU time a step]],
//                      "losses": [[per round]], "peak_bytes": [per rank], "max_peak_bytes"},
//            "ratio": {"median_step_ms", "ci95": [low, high], "median_step_cpu_ms",
//                      "cpu_ci95": [low, high], "max_peak_bytes", "verdict"},
//            "losses": {"bit_identical", "max_rel_diff", "tolerance", "compared"},
//            "params": {"bit_identical", "max_rel_diff", "tensors", "mismatch"}}}
// A ratio is 1 when A and B are both 0 and null when only A is.

#include <optional>
#include <string>

#include "ab/ab_run.h"
#include "ab/ab_sim.h"

namespace pw::ab {

struct AbReport {
  std::string module_path;
  std::string pipeline_a, pipeline_b;
  struct Sim {
    std::string device;
    SimFigures a, b;
  };
  std::optional<Sim> sim;
  struct Run {
    int nproc = 0;
    int rounds = 0;
    int64_t steps = 0;
    std::string backend;
    double loss_tolerance = 0;
    MeasuredAB measured;
  };
  std::optional<Run> run;
};

// B/A, 1 for 0/0, NaN (printed "-" or null) for x/0.
double Ratio(double a, double b);

std::string AbReportTable(const AbReport& report);
std::string AbReportJson(const AbReport& report);

}  // namespace pw::ab
