#pragma once
// Action-level simulation of a pipeline schedule (ir/action.h), in two modes:
//
//  * unit steps: every action takes one step and a RECV runs no earlier than the step of
//    its SEND. Same rules and the same printed table as PyTorch's
//    `_simulate_comms_compute` / `_format_pipeline_order`, so step counts compare 1:1.
//  * timed: each rank runs its list in order. F, B (input-grad part, the Zero Bubble
//    paper's convention) and W cost per stage; a full backward costs B+W; a fused
//    OVERLAP_F_B costs the sum of its parts. A schedule without send/recv actions pays
//    `comm` on every cross-rank data edge; with them, SEND costs the rank nothing and a
//    RECV blocks its rank until the data arrived (SEND issue time + comm).
//
// Both report a deadlock as the cycle of waiting (rank, action) pairs.
//
// Communication semantics decide when a send/recv may complete:
//  * eager (PyTorch's isend/irecv model): a SEND never waits; a RECV waits for its SEND.
//  * rendezvous (blocking NCCL-style p2p): a SEND and its RECV complete together, once both
//    ranks reached them; the members of a BATCH_P2P group are posted together.
//
// Precondition: the schedule passed the structural checks of
// passes/pipeline/schedule_checker.h (stages, micro-batches and edges in range).

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/action.h"
#include "ir/status.h"

namespace pw {

struct ActionCosts {
  double forward = 1;   // F
  double backward = 1;  // B: the input-gradient part of the backward (I)
  double weight = 1;    // W: the weight-gradient part
  double comm = 0;      // latency of every cross-rank edge
  // Memory held per micro-batch and stage, in units of M_B (one micro-batch's activations
  // on one stage): F holds 1, I releases 1 - w_mem, W releases w_mem, B releases 1.
  double w_mem = 0.5;
  // Optional per-stage multiplier of F, B and W (empty: every stage costs the same).
  std::vector<double> stage_scale;

  double Scale(int stage) const {
    return stage_scale.empty() || stage < 0 ? 1.0 : stage_scale[static_cast<size_t>(stage)];
  }
  double Of(ActionType type, int stage) const;  // compute cost; 0 for comm and idle
};

// Every cost finite, >= 0 and at most kMaxActionCost (ir/limits.h), per stage too; w_mem
// in [0, 1]. The planners and the simulator rely on it; the error names the cost.
Status CheckActionCosts(const ActionCosts& costs);

enum class CommSemantics { kEager, kRendezvous };
const char* CommSemanticsName(CommSemantics s);
StatusOr<CommSemantics> ParseCommSemantics(const std::string& name);

struct SimulationOptions {
  ActionCosts costs;
  CommSemantics semantics = CommSemantics::kEager;
  bool record_timeline = false;  // fill TimedResult::timeline (16 bytes per action)
};

struct RankStats {
  double busy = 0;              // time computing
  double idle = 0;              // makespan - busy
  double first_start = 0;       // start of its first compute action
  double last_end = 0;          // end of its last compute action
  double peak_activations = 0;  // in M_B units
  double span() const { return last_end - first_start; }
};

struct ActionTime {
  double start = 0;
  double end = 0;
};

struct TimedResult {
  double makespan = 0;
  // The Zero Bubble paper's cost: the longest per-rank span from its first action's start
  // to its last action's end.
  double cost = 0;
  double ideal = 0;        // M * sum over stages of (F+B+W), divided by the ranks
  double bubble_rate = 0;  // (cost - ideal per rank) / cost
  std::vector<RankStats> ranks;
  // Per rank, per action (same indices as the schedule): when it ran. Sends and recvs
  // take no time; a RECV's start is when its rank reached it, its end when it completed.
  std::vector<std::vector<ActionTime>> timeline;
};

StatusOr<TimedResult> SimulateTimed(const ActionSchedule& schedule,
                                    const SimulationOptions& options);

// Only the dependency replay: OK when every rank can run its list to the end under
// `semantics`, otherwise the deadlock with its cycle. Allocates no timing tables.
Status CheckDeadlockFree(const ActionSchedule& schedule, CommSemantics semantics);

struct UnitStepResult {
  int num_steps = 0;
  // Per rank, per step: the action run (kIdle when the rank waited). Ranks that are done
  // stop getting steps, as in PyTorch.
  std::vector<std::vector<Action>> steps;
};

StatusOr<UnitStepResult> SimulateUnitSteps(const ActionSchedule& schedule);
// PyTorch's `_format_pipeline_order` table: a header of "Rank r" labels, then one
// "Step NN: a b c" row per step with one column per rank.
std::string FormatStepTable(const UnitStepResult& result, const ActionSchedule& schedule);

// Peak in-flight activations per rank (M_B units) from the order alone.
std::vector<double> PeakActivations(const ActionSchedule& schedule, double w_mem);

}  // namespace pw
