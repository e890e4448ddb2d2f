#pragma once
// The compact form of a pipeline schedule that planning works on: per rank an ordered
// list of 8-byte actions (no strings, no per-action allocation), so that generating,
// lowering, checking and simulating ten million actions stays within a second. A pass
// converts it to the module's Plan (ir/plan_actions.h) only when it stores a result.
//
// Actions print in PyTorch's notation (torch.distributed.pipelining): `2F0`, `2B0`,
// `2I0` (input-grad backward), `2W0` (weight-grad backward), `1SEND_F0`, `2RECV_F0`,
// `2SEND_B0`, `1RECV_B0`, and fused actions `(0F7;7B3)OVERLAP_F_B`. pipeweave adds
// `(0SEND_F1;0RECV_B0)BATCH_P2P` for one batched exchange, and a peer suffix for a send or
// recv between non-adjacent stages: `0SEND_F3>2` (to stage 2), `2RECV_F3<0` (from 0).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/status.h"

namespace pw {

enum class ActionType : uint8_t {
  kIdle = 0,        // an empty CSV cell: a deliberate bubble, no work
  kForward,         // F
  kBackward,        // B: input and weight gradients together
  kBackwardInput,   // I
  kBackwardWeight,  // W
  kSendF,
  kRecvF,
  kSendB,
  kRecvB,
  kOverlapFB,  // fused compute actions that run together (DualPipeV)
  kBatchP2P,   // sends and recvs posted as one batched exchange
};

inline bool IsCompute(ActionType t) {
  return t >= ActionType::kForward && t <= ActionType::kBackwardWeight;
}
inline bool IsComm(ActionType t) { return t >= ActionType::kSendF && t <= ActionType::kRecvB; }
inline bool IsFused(ActionType t) {
  return t == ActionType::kOverlapFB || t == ActionType::kBatchP2P;
}
// B or I: the action that sends a gradient to the previous stage.
inline bool IsInputBackward(ActionType t) {
  return t == ActionType::kBackward || t == ActionType::kBackwardInput;
}

// Micro-batch numbers (and fused-group indices) fit in 24 bits, which keeps an action at
// 8 bytes: planning ten million actions touches 80 MB less memory than with 12.
inline constexpr int32_t kMaxActionMicroBatch = (1 << 23) - 1;

struct Action {
  // The micro-batch; for a fused action, the index of its group in ActionSchedule.
  int32_t micro_batch : 24 = 0;
  ActionType type : 8 = ActionType::kIdle;
  int16_t stage = 0;
  // Peer stage of a send/recv between non-adjacent stages; -1 means the adjacent stage.
  int16_t peer = -1;

  bool operator==(const Action&) const = default;
};
static_assert(sizeof(Action) == 8, "Action must stay compact");

inline Action MakeAction(ActionType type, int stage, int micro_batch, int peer = -1) {
  Action a;
  a.type = type;
  a.stage = static_cast<int16_t>(stage);
  a.micro_batch = micro_batch;
  a.peer = static_cast<int16_t>(peer);
  return a;
}

// A data edge between stages. Every stage s feeds s+1 (the chain); models with skip
// connections add edges between non-adjacent stages.
struct StageEdge {
  int src = 0;
  int dst = 0;
  bool operator==(const StageEdge&) const = default;
};

struct ActionSchedule {
  int num_stages = 0;
  int num_micro_batches = 0;
  std::vector<int> stage_to_rank;
  std::vector<std::vector<Action>> ranks;
  // Skip edges (src + 1 < dst); the chain edges are implicit.
  std::vector<StageEdge> skip_edges;
  // Parts of fused actions: group g holds group_parts[group_begin[g], group_begin[g+1]).
  std::vector<Action> group_parts;
  std::vector<uint32_t> group_begin = {0};

  int num_ranks() const { return static_cast<int>(ranks.size()); }
  size_t num_actions() const;
  // The parts of a fused action; the action itself for any other.
  std::span<const Action> Parts(const Action& a) const {
    if (!IsFused(a.type)) return {&a, 1};
    return {group_parts.data() + group_begin[a.micro_batch],
            group_parts.data() + group_begin[a.micro_batch + 1]};
  }
  // Appends a fused action of `type` made of `parts` and returns it (not yet placed).
  // Group indices share the micro-batch field: at most kMaxActionMicroBatch + 1 groups.
  Action AddGroup(ActionType type, std::span<const Action> parts);
  bool CanAddGroup() const { return group_begin.size() <= size_t{kMaxActionMicroBatch} + 1; }
  bool HasComms() const;
  // Equal actions in the same order; fused actions compare by their parts.
  bool operator==(const ActionSchedule&) const;
};

// The schedule's frame, before any action is looked at: stages and micro-batches exist,
// every stage is placed on a rank, skip edges join real stages, and the fused groups
// index their parts consistently (no group inside a group). O(stages + groups).
Status CheckScheduleShape(const ActionSchedule& schedule);

// Which rank runs each virtual stage: `loop` puts stage s on rank s mod R (Megatron's
// interleaved order), `v` zig-zags (0..R-1, R-1..0, 0..R-1, ...), so adjacent chunks meet
// on the same rank (the zero-bubble V schedules).
enum class StagePlacement { kLoop, kV };
StatusOr<StagePlacement> ParseStagePlacement(std::string_view name);  // "loop" or "v"
const char* StagePlacementName(StagePlacement placement);
int RankOfStage(StagePlacement placement, int stage, int num_ranks);
std::vector<int> PlaceStages(StagePlacement placement, int num_stages, int num_ranks);

// Appends the notation of `a` ("2F0", "(0F7;7B3)OVERLAP_F_B").
void AppendAction(std::string& out, const Action& a, const ActionSchedule& schedule);
std::string ActionToString(const Action& a, const ActionSchedule& schedule);
const char* ActionTypeToken(ActionType type);  // "F", "SEND_F", "OVERLAP_F_B", ...

// Parses one cell. An empty (or all-blank) cell is an idle action. Fused actions add their
// parts to `schedule`'s groups. Errors name the cell and the expected form.
StatusOr<Action> ParseAction(std::string_view cell, ActionSchedule& schedule);

}  // namespace pw
