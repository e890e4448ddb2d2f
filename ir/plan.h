#pragma once
// The per-rank execution plan a schedule produces: for every rank an ordered job list.
// Jobs print in PyTorch's action notation: `0F1`, `1RECV_F0`, `2SEND_B3`, `3W2`,
// `(0F7;7B3)OVERLAP_F_B`. Planning works on the compact ActionSchedule (ir/action.h);
// ir/plan_actions.h converts between the two.

#include <string>
#include <vector>

namespace pw {

enum class JobKind {
  kUnknown = 0,
  kForward,
  kBackward,        // full backward: input and weight gradients
  kBackwardInput,   // I: input gradients only
  kBackwardWeight,  // W: weight gradients only
  kOptimizer,
  kSendF,
  kRecvF,
  kSendB,
  kRecvB,
  kOverlapFB,  // fused: sub_jobs run together
  kBatchP2P,   // fused: sub_jobs (sends and recvs) posted as one batched exchange
};

struct Job {
  JobKind kind = JobKind::kUnknown;
  int stage = 0;
  int micro_batch = 0;
  std::string program;  // the program the job runs, when it runs one
  int peer = -1;        // peer rank of a send/recv
  // Peer stage of a send/recv between non-adjacent stages (skip connections); -1 means
  // the adjacent stage (stage + 1 for SEND_F/RECV_B, stage - 1 for RECV_F/SEND_B).
  int peer_stage = -1;
  // The parts of a fused job; or, for a full backward B on a module whose backward is split
  // (no `backward` program, only `backward_input` and `backward_weight`), the stage's I then
  // its W of the same micro-batch, run back to back in its place. Such a B names no program,
  // keeps its stage and micro-batch, and prints and plans as B.
  std::vector<Job> sub_jobs;
  // Events (ir/event_ref.h). A send/recv job waits on its wait_events before its first
  // transfer and records its record_events after its last, on its stream. A job that runs a
  // program (an op carries its own events) may only wait: before its first op on each stream
  // (insert-p2p{wait=exchange}: the next job after an exchange waits for all of it).
  std::vector<std::string> wait_events;
  std::vector<std::string> record_events;
  bool operator==(const Job&) const = default;
};

// Whether `job`'s sub_jobs run in its place, in order: a fused job (OVERLAP_F_B,
// BATCH_P2P) or a split full backward, none of which names a program of its own. Everything
// that walks a plan's jobs (lowering, checks, simulation) goes through this.
inline bool RunsSubJobs(const Job& job) { return job.program.empty() && !job.sub_jobs.empty(); }

// The jobs that run, in plan order: every job whose sub_jobs run in its place replaced by
// them (recursively).
inline void FlattenJobs(const std::vector<Job>& jobs, std::vector<const Job*>& out) {
  for (const Job& job : jobs) {
    if (RunsSubJobs(job))
      FlattenJobs(job.sub_jobs, out);
    else
      out.push_back(&job);
  }
}

struct RankPlan {
  int rank = 0;
  std::vector<Job> jobs;
  bool operator==(const RankPlan&) const = default;
};

struct Plan {
  std::string schedule;  // the schedule kind that produced it
  int num_micro_batches = 0;
  int num_stages = 0;
  std::vector<int> stage_to_rank;
  std::vector<RankPlan> ranks;

  bool empty() const { return ranks.empty(); }
  bool operator==(const Plan&) const = default;
};

}  // namespace pw
