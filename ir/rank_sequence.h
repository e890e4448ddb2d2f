#pragma once
// One rank's step as its host issues it: every piece of work of the rank's plan, in plan
// order, on its stream, with the tensors it reads and writes. The executor's lowering, the
// op-level simulator and the insert-events pass all start from this one sequence, so what
// the executor runs, what the simulator prices and what the pass orders are the same work.
//
// Walking the rank's jobs in plan order (fused jobs replaced by their parts):
//   - each op of a job's program is one item on the op's stream;
//   - each send/recv job is one transfer per var it moves (ir/p2p_vars.h), on pp_send or
//     pp_recv;
//   - work the executor adds to the plan, attached to the op it follows on that op's stream:
//     per gradient the optimizer reads, an accumulation into the step's sum after the op
//     that finishes the micro-batch's gradient, and a fetch of the loss after the op that
//     produces it;
//   - before an optimizer job, step-level work on each gradient sum its program reads: an
//     all-reduce over the dp group (when dp > 1 and the program has none of its own) and a
//     scale by 1/(M·dp);
//   - first of all: the optimizer programs' ops marked kAtStepStartAttr
//     (ir/post_validation.h) on dp_comm, then with kParamGatherNextStep (ir/grad_reduce.h)
//     the distributed optimizer's parameter all-gathers, issued at the step's start instead
//     of after the updates.
//
// Events: an op or a send/recv job records its events after its last item (an op's
// attached work included, so that a wait on an op's event also covers the accumulation and
// fetch the executor adds after it) and waits on its events before its first item.
//
// Tensors are slots: a var of one micro-batch, of the step (the optimizer job's own
// intermediates) or of the rank (parameters, optimizer state, gradient sums).

#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/module.h"
#include "ir/stream_type.h"

namespace pw {

enum class WorkKind : uint8_t {
  kOp,             // an op of a job's program
  kSend,           // one var a send job moves
  kRecv,           // one var a recv job moves
  kAccumulate,     // gradient sum += the micro-batch's gradient (attached to an op)
  kFetch,          // the micro-batch's loss copied out (attached to an op)
  kGradAllReduce,  // gradient sums (one, or a bucket: its writes) all-reduced over dp (step-level)
  kGradScale,      // the gradient sum scaled by 1/(M·dp) (step-level)
  // A distributed optimizer's parameter all-gather deferred to the step's start
  // (kParamGatherNextStep; step-level): its `op` is the optimizer program's c_all_gather.
  kParamGather,
  // A bucket of the distributed optimizer's reduce-scatters issued in the backward as one
  // collective (c_reduce_scatter_coalesced; step-level): its `coalesced` ops of the
  // optimizer program, in bucket order.
  kGradReduceScatter,
};

inline constexpr int kRankTable = -2;  // parameters, optimizer state, gradient sums
inline constexpr int kStepTable = -1;  // the optimizer job's own intermediates

struct SeqSlot {
  std::string var;
  int table = 0;  // a micro-batch, kStepTable or kRankTable
  const Var* decl = nullptr;
  bool persistable = false;  // parameters, optimizer state
  bool accumulator = false;  // a gradient sum: zeroed by the host at the start of a step
  bool fed = false;          // an input fed from outside for every micro-batch
  // A block of a split{view}: it holds no bytes of its own but these of slot `view_of`,
  // from `view_offset` bytes on.
  int view_of = -1;
  int64_t view_offset = 0;
  // A view the whole of whose bytes are its source's (an op that RunsAsView: reshape,
  // c_identity, an all-reduce over one rank; ir/alias_ops.h). Every item that uses it also
  // reads `view_of`, so the source lives until the view's last use.
  bool alias = false;
  // A parameter that only a sync between steps reads whole (RankSequence::sync_gathers:
  // amp's f32 master under overlap-param-gather): between syncs it holds only the bytes of
  // slot `held_as`, the c_split{view} of its own rows that the update writes, as a
  // distributed optimizer shards its master weights. -1: held whole.
  int held_as = -1;
};

struct SeqEvent {
  std::string name;
  int micro_batch = 0;
  int recorded_after = -1;  // item
};

struct WorkItem {
  WorkKind kind = WorkKind::kOp;
  StreamType stream = StreamType::kCompute;
  int job = -1;          // index into RankSequence::jobs
  int op = -1;           // kOp: the op's index in the job's program; attached work: its op's
  int micro_batch = -1;  // -1: step-level work and the optimizer job's ops
  int slot = -1;         // transfers, attached and step-level work: the var's slot
  // The item whose events cover this one: itself for ops and transfers, its op for attached
  // work, -1 for step-level work (which the executor orders by itself).
  int carrier = -1;
  // kOp: the gradient sum the op adds its result into itself (the weight-gradient GEMM's
  // Acc, FusesGradAccumulation), in place of a kAccumulate after it; -1: none. Its writes
  // and reads then hold that slot instead of the micro-batch's value.
  int accumulate_into = -1;
  std::vector<int> coalesced;      // kGradReduceScatter: the c_reduce_scatter_sum ops
  std::vector<int> reads, writes;  // distinct slots
  std::vector<int> feeds;          // fed slots read here for the first time
  std::vector<int> wait_events;    // SeqEvents waited on before it runs
  std::vector<int> record_events;  // SeqEvents recorded after it
};

struct RankSequenceOptions {
  std::vector<std::string> feeds;  // vars fed from outside for every micro-batch
  std::string loss;                // the var fetched per micro-batch; empty: none
  // A read of a tensor no earlier item writes (and that is not fed, a parameter or a
  // gradient sum) is an error.
  bool check_reads = false;
  // false: every gradient is added into its sum by a kAccumulate after the op that computes
  // it, none by its weight-gradient GEMM (FusesGradAccumulation), as the sequential reference
  // runner sums them (for pricing it).
  bool fuse_grad_accumulation = true;
};

struct RankSequence {
  int rank = 0;           // global rank
  int pipeline_rank = 0;  // its plan
  int num_micro_batches = 0;
  int dp = 1;
  std::vector<const Job*> jobs;          // flattened, in plan order
  std::vector<const Program*> programs;  // per job: the program it runs (p2p: its stage's)
  std::vector<WorkItem> items;
  std::vector<SeqSlot> slots;
  std::vector<SeqEvent> events;
  std::vector<std::string> grads;  // gradients the optimizer reads, sorted
  // The dp buckets of more than one gradient sum (their slots, in bucket order): the executor
  // lays each bucket's sums end to end in one allocation, so that its all-reduce sums the
  // bucket in place, with no packing copy.
  std::vector<std::vector<int>> grad_buckets;
  // With kMetaParamGather: the deferred parameter all-gathers no job of the step waits
  // for, as (optimizer job, op of its c_all_gather): run only when the parameters are
  // synced between steps (the executor's SyncParameters), never within a step.
  std::vector<std::pair<int, int>> sync_gathers;

  const Op& op(const WorkItem& item) const { return programs[item.job]->ops()[item.op]; }
  const Program& program(const WorkItem& item) const { return *programs[item.job]; }
  // The slot of `var` as `item` sees it; -1 when it touches no such var.
  int SlotOf(const WorkItem& item, const std::string& var) const;
  // Whether `item` only binds its output to its input's bytes (a split{view} or an op that
  // runs as a view): no kernel runs, no byte moves.
  bool BindsView(const WorkItem& item) const;
  // One line naming the work, for errors: "op 3 (matmul) of program 'stage0_forward' for
  // micro-batch 2", "1SEND_F2 of 'x' to pipeline rank 2", "accumulation of gradient 'w@GRAD'
  // of micro-batch 0".
  std::string Describe(int item) const;

 private:
  friend class RankSequenceBuilder;
  // Vars as small integers, and slots by (table, var id): the lookups every op's every
  // var makes, once per job.
  std::unordered_map<std::string, int> var_ids_;
  std::unordered_map<int64_t, int> slot_index_;
};

// The sequence of global rank `rank` of `module`, which must have a plan. Errors name the
// job or op: an unknown program or stream, a job's micro-batch outside the plan, an event
// waited on before it is recorded or recorded twice, a send/recv that moves nothing.
StatusOr<RankSequence> BuildRankSequence(const Module& module, int rank,
                                         const RankSequenceOptions& options = {});

// Gradients: vars the optimizer ops read that the other ops write, except persistable
// ones (`is_persistable` looks the var up): what the executor sums over micro-batches. The
// profiler asks the same of a module with no plan.
std::set<std::string> OptimizerGradients(
    const std::vector<const Op*>& optimizer_ops, const std::vector<const Op*>& other_ops,
    const std::function<bool(const std::string&)>& is_persistable);

// Whether op `op_index` of `program`, which finishes a micro-batch's gradient `grad`, adds
// it into the gradient sum itself instead of a separate kAccumulate: a weight-gradient GEMM
// writing f32 (matmul_weight_grad with Acc: Megatron's gradient-accumulation fusion, one
// pass over the gradient fewer per micro-batch) whose result nothing later in the program
// reads or writes (the optimizer's ops read the sum). Same bits either way: the GEMM adds
// its finished product to the sum.
bool FusesGradAccumulation(const Program& program, size_t op_index, const Var& grad);
// The op such a GEMM runs as: the program's op with the sum as Acc (named like the gradient,
// whose slot it takes).
Op WithAccumulator(const Op& op);

// What the executor runs for op `op_index` of `program` in a micro-batch's job, for the
// passes and the profiler that price it: the op itself or its WithAccumulator form, and the
// gradients it writes that the executor then adds into their sums with an op of its own
// (AddedWorkOp kAccumulate). `summed` gives the declaration of a var that is a gradient the
// executor sums, nullptr for any other.
struct ExecutedOp {
  Op op;
  std::vector<std::string> added;
};
ExecutedOp ExecutedForm(const Program& program, size_t op_index,
                        const std::function<const Var*(const std::string&)>& summed);
// A `summed` for ExecutedForm where every parameter's gradient is summed: the declaration
// of `var` (found by `lookup`) when it is the gradient of a parameter, else nullptr.
const Var* ParamGradDecl(const std::string& var,
                         const std::function<const Var*(const std::string&)>& lookup);

// The op the executor runs for a piece of its own work: `add` (X = Y = Out = grad) for
// kAccumulate, `c_allreduce_sum` over dp for kGradAllReduce, `scale` by `scale` otherwise.
Op AddedWorkOp(WorkKind kind, const std::string& grad, double scale = 1.0);
// The op a kGradAllReduce item runs for the gradient sums it holds (its writes; one, or a
// bucket of several): c_allreduce_sum of one, c_allreduce_coalesced of a bucket.
Op BucketAllReduceOp(const std::vector<std::string>& grads);
std::vector<std::string> BucketGrads(const RankSequence& seq, const WorkItem& item);
// The op a kGradReduceScatter item runs: c_reduce_scatter_coalesced of its ops' X into their
// Out, over the first one's group, axis and nranks.
Op CoalescedReduceScatterOp(const RankSequence& seq, const WorkItem& item);
// The op a kParamGather item runs: c_sync_shards of the parameter the optimizer program's
// c_all_gather `gather` writes, over its group, axis and nranks.
Op SyncShardsOp(const Op& gather);
// The gradient sums' scale, 1/(M·dp), rounded to float as the kernel applies it.
double GradScale(const RankSequence& seq);

}  // namespace pw
