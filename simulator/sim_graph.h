#pragma once
// The op-level simulator's input: every rank's plan lowered into instructions on named
// streams, with their estimated durations and the dependencies that order them. The work
// is the rank's sequence (ir/rank_sequence.h), the one the executor lowers: jobs in plan
// order, each op of a job's program on its stream, one transfer per var a send/recv job
// moves, and the work the executor adds. Dependencies are the plan's own events (keyed by
// name and micro-batch, within a rank) and, where they leave a cross-stream read-after-
// write, write-after-read or write-after-write open (ir/stream_order.h), one edge each, as
// the executor covers those with events of its own. Sends are matched to recvs and
// collectives across their group here.
//
// Ranks of one pipeline rank (its mp and dp peers) run the same sequence: it is lowered
// once per pipeline rank and copied to each peer, which reprices only what its place in the
// mesh changes (its communication's groups, partners and whether they span nodes).

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cost_model/estimator.h"
#include "ir/module.h"
#include "ir/stream_type.h"

namespace pw::cost {

enum class InstrKind : uint8_t { kCompute, kCollective, kSend, kRecv };

// What a piece of communication is for, whatever stream it runs on: the report splits
// exposed communication by it. Tensor-parallel all-reduces count as forward or backward by
// the role of the job they run in (a forward job, or any other); so do the tensor-parallel
// all-gathers and reduce-scatters of sequence parallelism (sp_forward, sp_backward).
enum class CommClass : uint8_t {
  kNone = 0,
  kMpForward,
  kMpBackward,
  kPpSend,
  kPpRecv,
  kDp,
  kSpForward,
  kSpBackward
};
inline constexpr int kNumCommClasses = 8;
// "none", "mp_forward", "mp_backward", "pp_send", "pp_recv", "dp", "sp_forward",
// "sp_backward".
const char* CommClassName(CommClass c);

struct SimInstr {
  int rank = 0;
  StreamType stream = StreamType::kCompute;
  InstrKind kind = InstrKind::kCompute;
  CommClass comm_class = CommClass::kNone;  // kNone for compute
  int job = -1;  // index into SimGraph::job_names[rank]; -1 for step-level work
  int micro_batch = -1;
  int step = 0;        // which of the graph's steps it belongs to (RepeatSteps)
  std::string name;    // the op type, or "SEND x" / "RECV x"
  double seconds = 0;  // compute: isolated run time; comm: transfer or collective time
  EstimatePath path = EstimatePath::kRoofline;
  std::vector<int> deps;  // instructions of the same rank that must finish first
  int partner = -1;       // send <-> recv
  int collective = -1;    // index into SimGraph::collectives
  double bytes = 0;       // moved by a send, recv or collective
  // Communication: the ranks taking part and whether they span nodes, so the simulator can
  // price it under the load it meets (CommModel::Time).
  int group_size = 0;
  GroupSpan span;                             // where its group (or the pair of a transfer) sits
  CommKind comm_kind = CommKind::kAllReduce;  // a collective's kind
  // A compute op whose kernel is a BLAS GEMM: it keeps the table's BLAS threads busy, any
  // other op one thread.
  bool gemm = false;
  int signature = -1;       // a compute op's signature: index into SimGraph::signatures
  std::vector<int> allocs;  // slots allocated when it starts
  std::vector<int> uses;    // slots it touches; a slot is freed after its last use
};

// One tensor of one rank for one micro-batch (or the step, or persistent).
struct SimSlot {
  int rank = 0;
  int64_t bytes = 0;
  bool persistent = false;  // parameters, optimizer state, gradient accumulators
  int uses = 0;
};

struct SimCollective {
  std::vector<int> members;  // one instruction per rank of the group
  double seconds = 0;
};

struct SimGraph {
  int world_size = 0;
  int num_micro_batches = 0;
  // Training steps back to back (RepeatSteps): each rank's order holds its steps one after
  // the other, in equal runs.
  int steps = 1;
  std::vector<SimInstr> instrs;
  std::vector<std::vector<int>> rank_order;         // per rank, instructions in host order
  std::vector<std::vector<std::string>> job_names;  // per rank: "0F1", "1RECV_F0", ...
  std::vector<SimSlot> slots;
  std::vector<SimCollective> collectives;
  std::vector<std::string> signatures;  // the compute ops' signature keys
  // Dependencies between pieces of the plan's work that its events left open (the executor
  // covers each with an event of its own): 0 once insert-events has run.
  int auto_events = 0;
  // Empty, or (folded graph) per rank the rank whose instructions stand for it: only those
  // ranks have instructions, collectives hold only their members, and the simulator
  // reports each other rank as a copy of its stand-in.
  std::vector<int> replica_of;

  bool folded() const { return !replica_of.empty(); }
  // The rank whose instructions are `rank`'s.
  int simulated_rank(int rank) const { return folded() ? replica_of[rank] : rank; }
};

struct SimGraphOptions {
  // Lower only the first rank of each pipeline rank (mp 0, dp 0) where that is exact: the
  // device shares no cores between the ranks of a node (then nothing couples a rank to
  // its peers beyond the collectives they run together, which start for all members at
  // once), and every peer's communication is priced as its stand-in's (the same groups
  // spanning nodes, the same transfers crossing them). Otherwise the graph is whole.
  bool fold_replicas = false;
  // Weight-gradient GEMMs add into their gradient sums (the executor); false: a separate add
  // per gradient and micro-batch (the reference runner, RankSequenceOptions).
  bool fuse_grad_accumulation = true;
};

// Lowers `module`'s plan (it must have one) for every rank of its mesh. Errors: no plan, a
// rank without jobs, an unknown program or stream, an event waited on before it is recorded,
// a send without its recv, a collective some member of its group never joins.
StatusOr<SimGraph> BuildSimGraph(const Module& module, const Estimator& estimator,
                                 const OpRegistry& registry, const SimGraphOptions& options = {});

// Each instruction's predecessor on its rank's stream (in host order), or -1 for a stream's
// first: the instruction its stream's thread ran before it.
std::vector<int> StreamPredecessors(const SimGraph& g);

}  // namespace pw::cost
