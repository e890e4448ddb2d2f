#pragma once
// The rules by which a Plan runs, as the simulator needs them: where a global rank sits in
// the mesh and which groups it belongs to, how an op names an event of another
// micro-batch, and which vars a send/recv job moves. They mirror the executor's
// (executor/rank_layout.h, event_ref.h, p2p_vars.h), which the cost model may not depend
// on; they are IR rules and belong in ir/ (asked of the lead), after which this file goes.

#include <string>
#include <string_view>
#include <vector>

#include "ir/module.h"
#include "ir/status.h"

namespace pw::cost {

// Megatron's order: rank = pp * (dp * mp) + dp * mp + mp.
struct RankCoord {
  int dp = 0;
  int pp = 0;
  int mp = 0;
};
RankCoord CoordOf(const Mesh& mesh, int rank);
int RankOf(const Mesh& mesh, const RankCoord& coord);
// Global ranks of `rank`'s group of `kind` ("mp", "dp", "pp"), in group order; empty for an
// unknown kind.
std::vector<int> GroupOf(const Mesh& mesh, const std::string& kind, int rank);

// "name" (the job's micro-batch), "name@-2" / "name@+1" (relative), "name@3" (absolute).
struct EventRef {
  std::string name;
  bool relative = true;
  int offset = 0;
  int MicroBatch(int job_micro_batch) const { return relative ? job_micro_batch + offset : offset; }
};
StatusOr<EventRef> ParseEventRef(std::string_view text);

bool IsP2pJob(JobKind kind);
bool IsSendJob(JobKind kind);
bool IsBackwardP2p(JobKind kind);
// The pipeline rank a program runs on.
int ProgramPipelineRank(const Module& module, const Program& program);
// The vars a send/recv job of `pipeline_rank` moves, sorted; an error when none crosses.
StatusOr<std::vector<std::string>> P2pVars(const Module& module, int pipeline_rank, const Job& job);

}  // namespace pw::cost
