#pragma once
// What a SEND_F / RECV_F / SEND_B / RECV_B job moves. A p2p job of (virtual) stage S
// names a peer rank and a peer stage T (Job::peer_stage, or the adjacent stage); the
// values are the vars that cross between the programs the two stages' compute jobs run
// (forward jobs for *_F, the backward kinds for *_B):
//
//   send: vars S's programs write             ∩ vars T's programs read from outside
//   recv: vars S's programs read from outside ∩ vars T's programs write
//
// Both sides compute the same set from the plan, so they agree without a message.
// Persistable vars never move. A job that names a program uses it for S.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ir/module.h"
#include "ir/status.h"

namespace pw {

// Vars an op of `p` reads before any op of it writes them: what the program takes from
// other jobs (a transfer's side of a crossing value).
std::set<std::string> ReadFromOutside(const Program& p);

bool IsP2pJob(JobKind kind);
bool IsSendJob(JobKind kind);
bool IsBackwardP2p(JobKind kind);  // SEND_B / RECV_B

// The pipeline rank a program runs on (from its ProgramInfo stage and the plan).
int ProgramPipelineRank(const Module& module, const Program& program);

// The stage at the other end of a send/recv job.
int PeerStage(const Job& job);

// The vars `job` of pipeline rank `pipeline_rank` moves, sorted by name; an error when the
// job's program is unknown or nothing crosses.
StatusOr<std::vector<std::string>> P2pVars(const Module& module, int pipeline_rank, const Job& job);

// The tag both sides of one transfer use: a hash of (direction, micro-batch, var).
uint64_t P2pTag(bool backward, int micro_batch, const std::string& var);

// "0F1", "1RECV_F0", "2SEND_B3", "3W2", "(0F7;7B3)OVERLAP_F_B".
std::string JobName(const Job& job);

}  // namespace pw
