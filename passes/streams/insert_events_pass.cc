// insert-events: the fewest events that order every cross-stream dependency of the plan,
// so that the executor and the simulator add none of their own.
//
// For every pipeline rank the pass walks the rank's sequence (ir/rank_sequence.h: the
// work the executor runs, in host order) with vector clocks (ir/stream_order.h). Each
// read-after-write, write-after-read or write-after-write between two streams that stream
// order and the waits chosen so far do not imply gets one wait: the consumer's op waits on
// an event its producer's op records (or the send/recv job, for transfers). An op's events
// belong to its program, so a wait chosen in one micro-batch applies in every job of the
// program, referring to the producer's micro-batch by offset (`name@-k` when the producer
// is k micro-batches earlier). Afterwards every wait that the stream order and the other
// waits already imply in every job it applies to is dropped: what is left is a transitive
// reduction over the rank's lowered order.
//
// Dependencies on the executor's step-level work (the gradient sums' dp all-reduce and
// scaling before the optimizer) are the executor's to order; the pass accounts for its
// events but adds none for them. Events the pass inserted before (named "ev/...") are
// replaced; other events are kept and taken into account. Run it last: a pass that moves
// ops afterwards invalidates the events.

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "ir/action.h"
#include "ir/event_ref.h"
#include "ir/p2p_vars.h"
#include "ir/parallel.h"
#include "ir/plan_actions.h"
#include "ir/rank_layout.h"
#include "ir/rank_sequence.h"
#include "ir/stream_order.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

constexpr std::string_view kPrefix = "ev/";

bool Inserted(const std::string& ref) { return ref.rfind(kPrefix, 0) == 0; }

void StripInserted(std::vector<std::string>& refs) {
  refs.erase(std::remove_if(refs.begin(), refs.end(), Inserted), refs.end());
}

void StripInserted(std::vector<Job>& jobs) {
  for (Job& job : jobs) {
    StripInserted(job.wait_events);
    StripInserted(job.record_events);
    StripInserted(job.sub_jobs);
  }
}

std::string RefText(const std::string& name, int offset) {
  if (offset == 0) return name;
  return StrCat(name, "@", offset > 0 ? "+" : "-", std::abs(offset));
}

// Who records an event: an op of a program (in every job that runs the program), or the
// send/recv jobs of one kind between two stages (in every such job).
struct RecorderKey {
  const Program* program = nullptr;
  int op = -1;
  JobKind kind = JobKind::kUnknown;
  int stage = -1, peer_stage = -1;
  auto operator<=>(const RecorderKey&) const = default;
};

// A wait: on the event of `recorder`, `offset` micro-batches from the waiting job's.
struct Wait {
  RecorderKey recorder;
  int offset = 0;
  bool operator==(const Wait&) const = default;
};

// What one pipeline rank decided; applied to the module after every rank is done.
struct RankDecision {
  std::map<std::pair<const Program*, int>, std::vector<Wait>> op_waits;
  std::map<const Job*, std::vector<Wait>> job_waits;
  int64_t waits_per_step = 0;
  int64_t naive_per_step = 0;
  int64_t removed = 0;
};

class RankEvents {
 public:
  RankEvents(const Module& module, RankSequence seq) : module_(module), seq_(std::move(seq)) {}

  StatusOr<RankDecision> Run();

 private:
  void Index();
  RecorderKey KeyOf(int carrier) const;
  // The item after which `key`'s event of micro-batch `mb` is recorded, or -1 if none is.
  int RecorderItem(const RecorderKey& key, int mb) const;
  StatusOr<int> Cover(const Dependency& dep);
  Status CheckEveryJob(const std::pair<const Program*, int>& op, const Wait& wait) const;
  // Recorders a decided wait list resolves to for the job of `item`.
  void Resolve(const std::vector<Wait>& waits, int item, std::vector<int>& out) const;
  void ExtraWaits(int item, std::vector<int>& out) const;
  Status DropImpliedWaits(RankDecision& decision);
  const std::vector<int>& OpItems(const std::pair<const Program*, int>& op) const {
    return op_items_.at(op);
  }
  int JobMicroBatch(int item) const { return seq_.jobs[seq_.items[item].job]->micro_batch; }

  const Module& module_;
  RankSequence seq_;
  std::vector<int> last_of_carrier_;  // per carrier item: its last item (where it records)
  std::vector<int> first_of_job_, last_of_job_;
  std::map<std::pair<const Program*, int>, std::vector<int>> op_items_;  // per op: its items
  // (program, op, micro-batch) -> the op's item; ops of segment programs are keyed by their
  // parent and their index there, so that a wait names one event wherever its producer
  // was cut.
  std::map<std::tuple<const Program*, int, int>, int> op_instances_;
  std::map<RecorderKey, std::map<int, int>> p2p_recorders_;  // pattern -> mb -> last item
  RankDecision decision_;
};

void RankEvents::Index() {
  const int n = static_cast<int>(seq_.items.size());
  last_of_carrier_.assign(n, -1);
  first_of_job_.assign(seq_.jobs.size(), -1);
  last_of_job_.assign(seq_.jobs.size(), -1);
  for (int i = 0; i < n; ++i) {
    const WorkItem& item = seq_.items[i];
    if (item.carrier >= 0) last_of_carrier_[item.carrier] = i;
    if (first_of_job_[item.job] < 0) first_of_job_[item.job] = i;
    last_of_job_[item.job] = i;
    if (item.kind == WorkKind::kOp) {
      op_items_[{seq_.programs[item.job], item.op}].push_back(i);
      const RecorderKey key = KeyOf(i);
      op_instances_[{key.program, key.op, JobMicroBatch(i)}] = i;
    }
  }
  for (size_t j = 0; j < seq_.jobs.size(); ++j) {
    const Job& job = *seq_.jobs[j];
    if (!IsP2pJob(job.kind) || last_of_job_[j] < 0) continue;
    RecorderKey key;
    key.kind = job.kind;
    key.stage = job.stage;
    key.peer_stage = PeerStage(job);
    p2p_recorders_[key][job.micro_batch] = last_of_job_[j];
  }
}

RecorderKey RankEvents::KeyOf(int carrier) const {
  const WorkItem& item = seq_.items[carrier];
  RecorderKey key;
  if (item.kind == WorkKind::kOp) {
    const Program* program = seq_.programs[item.job];
    const ProgramInfo& info = program->info();
    const Program* parent =
        info.segment_of.empty() ? nullptr : module_.FindProgram(info.segment_of);
    key.program = parent ? parent : program;
    key.op = item.op + (parent ? info.segment_begin : 0);
  } else {
    const Job& job = *seq_.jobs[item.job];
    key.kind = job.kind;
    key.stage = job.stage;
    key.peer_stage = PeerStage(job);
  }
  return key;
}

int RankEvents::RecorderItem(const RecorderKey& key, int mb) const {
  if (key.program) {
    // The op's instance in the job of micro-batch mb (the optimizer's job has 0).
    auto it = op_instances_.find({key.program, key.op, mb});
    return it == op_instances_.end() ? -1 : last_of_carrier_[it->second];
  }
  auto it = p2p_recorders_.find(key);
  if (it == p2p_recorders_.end()) return -1;
  auto at = it->second.find(mb);
  return at == it->second.end() ? -1 : at->second;
}

void RankEvents::Resolve(const std::vector<Wait>& waits, int item, std::vector<int>& out) const {
  const int mb = JobMicroBatch(item);
  for (const Wait& w : waits) {
    const int target = mb + w.offset;
    if (target < 0 || target >= seq_.num_micro_batches) continue;
    const int r = RecorderItem(w.recorder, target);
    if (r >= 0 && r < item) out.push_back(r);
  }
}

void RankEvents::ExtraWaits(int i, std::vector<int>& out) const {
  const WorkItem& item = seq_.items[i];
  if (item.kind == WorkKind::kOp) {
    auto it = decision_.op_waits.find({seq_.programs[item.job], item.op});
    if (it != decision_.op_waits.end()) Resolve(it->second, i, out);
  } else if ((item.kind == WorkKind::kSend || item.kind == WorkKind::kRecv) &&
             first_of_job_[item.job] == i) {
    auto it = decision_.job_waits.find(seq_.jobs[item.job]);
    if (it != decision_.job_waits.end()) Resolve(it->second, i, out);
  }
}

// A program-level wait must name an event recorded earlier in every job of the program
// where its micro-batch exists.
Status RankEvents::CheckEveryJob(const std::pair<const Program*, int>& op, const Wait& wait) const {
  for (int item : OpItems(op)) {
    const int target = JobMicroBatch(item) + wait.offset;
    if (target < 0 || target >= seq_.num_micro_batches) continue;
    const int r = RecorderItem(wait.recorder, target);
    if (r < 0 || r >= item)
      return FailedPrecondition(
          "insert-events: ", seq_.Describe(item), " would wait on an event of micro-batch ", target,
          " that ", r < 0 ? "no job of this rank records" : "is recorded only after it",
          "; the plan orders this op's jobs unlike its producer's, which one event per op "
          "cannot express");
  }
  return OkStatus();
}

StatusOr<int> RankEvents::Cover(const Dependency& dep) {
  const int pc = seq_.items[dep.producer].carrier;
  const int cc = seq_.items[dep.consumer].carrier;
  if (pc < 0 || cc < 0) return dep.producer;  // the executor orders its step-level work
  const bool producer_op = seq_.items[pc].kind == WorkKind::kOp;
  const int recorder = producer_op ? last_of_carrier_[pc] : last_of_job_[seq_.items[pc].job];
  Wait wait{KeyOf(pc), JobMicroBatch(pc) - JobMicroBatch(cc)};
  const WorkItem& consumer = seq_.items[cc];
  if (consumer.kind == WorkKind::kOp) {
    std::pair<const Program*, int> op{seq_.programs[consumer.job], consumer.op};
    std::vector<Wait>& waits = decision_.op_waits[op];
    if (std::find(waits.begin(), waits.end(), wait) == waits.end()) {
      PW_RETURN_IF_ERROR(CheckEveryJob(op, wait));
      waits.push_back(wait);
    }
  } else {
    std::vector<Wait>& waits = decision_.job_waits[seq_.jobs[consumer.job]];
    if (std::find(waits.begin(), waits.end(), wait) == waits.end()) waits.push_back(wait);
  }
  return recorder;
}

// Drops every wait that, in every job it applies to, stream order and the rank's other
// waits (and the executor's own events around its step-level work) already imply. Dropping
// an implied wait changes no clock, so the others are judged on the same clocks.
Status RankEvents::DropImpliedWaits(RankDecision& decision) {
  StreamOrder order(seq_);
  const int n = static_cast<int>(seq_.items.size());
  std::vector<std::vector<int>> internal(n);  // executor events joined per item
  StreamOrderHooks hooks;
  hooks.extra_waits = [&](int item, std::vector<int>& out) { ExtraWaits(item, out); };
  hooks.cover = [&](const Dependency& dep) -> StatusOr<int> {
    if (seq_.items[dep.producer].carrier >= 0 && seq_.items[dep.consumer].carrier >= 0)
      return Internal("insert-events left ", seq_.Describe(dep.consumer), " unordered after ",
                      seq_.Describe(dep.producer));
    internal[dep.consumer].push_back(dep.producer);
    return dep.producer;
  };
  PW_RETURN_IF_ERROR(order.Walk(hooks));

  // The clock of `item` from everything but the wait list `skip` entry `skip_index`.
  auto clock_without = [&](int item, const std::vector<Wait>& waits, size_t skip) {
    StreamClock clock = order.before_on_stream(item);
    for (int e : seq_.items[item].wait_events)
      JoinClock(clock, order.after(seq_.events[e].recorded_after));
    for (int p : internal[item]) JoinClock(clock, order.after(p));
    std::vector<int> recorders;
    for (size_t k = 0; k < waits.size(); ++k)
      if (k != skip) Resolve({waits[k]}, item, recorders);
    for (int r : recorders) JoinClock(clock, order.after(r));
    return clock;
  };
  auto prune = [&](std::vector<Wait>& waits, const std::vector<int>& items) {
    for (size_t k = waits.size(); k-- > 0;) {
      bool implied = true;
      for (int item : items) {
        std::vector<int> own;
        Resolve({waits[k]}, item, own);
        if (own.empty()) continue;
        StreamClock clock = clock_without(item, waits, k);
        implied = implied && order.Covers(clock, own.front());
        if (!implied) break;
      }
      if (implied) {
        waits.erase(waits.begin() + static_cast<long>(k));
        ++decision.removed;
      }
    }
  };
  for (auto& [op, waits] : decision.op_waits) prune(waits, OpItems(op));
  for (auto& [job, waits] : decision.job_waits) {
    int j =
        static_cast<int>(std::find(seq_.jobs.begin(), seq_.jobs.end(), job) - seq_.jobs.begin());
    prune(waits, {first_of_job_[j]});
  }
  return OkStatus();
}

StatusOr<RankDecision> RankEvents::Run() {
  Index();
  StreamOrder order(seq_);
  StreamOrderHooks hooks;
  hooks.extra_waits = [this](int item, std::vector<int>& out) { ExtraWaits(item, out); };
  hooks.cover = [this](const Dependency& dep) { return Cover(dep); };
  PW_RETURN_IF_ERROR(order.Walk(hooks));
  PW_RETURN_IF_ERROR(DropImpliedWaits(decision_));

  // What one step executes: waits that resolve to an event, against one per dependency.
  for (int i = 0; i < static_cast<int>(seq_.items.size()); ++i) {
    std::vector<int> recorders;
    ExtraWaits(i, recorders);
    decision_.waits_per_step += static_cast<int64_t>(recorders.size());
  }
  std::set<std::pair<int, int>> naive;
  for (const Dependency& dep : CrossStreamDependencies(seq_))
    if (seq_.items[dep.producer].carrier >= 0 && seq_.items[dep.consumer].carrier >= 0)
      naive.insert({dep.producer, dep.consumer});
  decision_.naive_per_step = static_cast<int64_t>(naive.size());
  return std::move(decision_);
}

std::string EventName(const RecorderKey& key) {
  if (key.program) return StrCat(kPrefix, key.program->name(), "/", key.op);
  return StrCat(kPrefix, key.stage, ActionTypeToken(ActionTypeOf(key.kind)), "/", key.peer_stage);
}

// Writes the decisions into the module: waits on ops and jobs, records on their producers.
int64_t Apply(Module& module, const std::vector<RankDecision>& decisions) {
  std::set<RecorderKey> recorded;
  int64_t waits = 0;
  auto refs = [&](const std::vector<Wait>& list, std::vector<std::string>& out) {
    for (const Wait& w : list) {
      out.push_back(RefText(EventName(w.recorder), w.offset));
      recorded.insert(w.recorder);
      ++waits;
    }
  };
  // The sequences point into this module's programs and jobs, which have not moved since.
  for (const RankDecision& d : decisions) {
    for (const auto& [op, list] : d.op_waits)
      refs(list, const_cast<Program*>(op.first)->ops()[op.second].wait_events);
    for (const auto& [job, list] : d.job_waits) refs(list, const_cast<Job*>(job)->wait_events);
  }
  for (const RecorderKey& key : recorded) {
    if (key.program) {
      // Every program that holds the op: its parent, and the segments cut from it.
      for (Program& p : module.programs()) {
        const ProgramInfo& info = p.info();
        int local = -1;
        if (&p == key.program) local = key.op;
        if (info.segment_of == key.program->name()) local = key.op - info.segment_begin;
        if (local >= 0 && local < static_cast<int>(p.ops().size()))
          p.ops()[local].record_events.push_back(EventName(key));
      }
      continue;
    }
    std::function<void(std::vector<Job>&)> mark = [&](std::vector<Job>& jobs) {
      for (Job& job : jobs) {
        mark(job.sub_jobs);
        if (job.kind == key.kind && job.stage == key.stage && PeerStage(job) == key.peer_stage)
          job.record_events.push_back(EventName(key));
      }
    };
    for (RankPlan& rank : module.plan.ranks) mark(rank.jobs);
  }
  return waits;
}

class InsertEventsPass : public Pass {
 public:
  std::string_view name() const override { return "insert-events"; }
  std::string_view description() const override {
    return "Adds the fewest events that order every cross-stream read-after-write, "
           "write-after-read and write-after-write of every rank's plan, within a program and "
           "across jobs and micro-batches (name@-k), so that the executor (--strict-events) and "
           "the simulator add none: each dependency that stream order and the events chosen so "
           "far leave open gets a wait on an event its producer records, then every wait the "
           "others imply is dropped (a transitive reduction over the rank's lowered order). "
           "Replaces the events it inserted before and keeps others. Run it last, after the "
           "passes that assign streams or reorder ops. Statistics: events, waits, "
           "waits-per-step against naive-waits-per-step (one per cross-stream dependency), "
           "implied-waits-dropped.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.plan.empty())
      return FailedPrecondition(
          "insert-events orders a plan's streams: run split-program,schedule{...},insert-p2p "
          "before it");
    for (Program& program : module.programs())
      for (Op& op : program.ops()) {
        StripInserted(op.wait_events);
        StripInserted(op.record_events);
      }
    for (RankPlan& rank : module.plan.ranks) StripInserted(rank.jobs);

    // One rank per pipeline rank: its mp and dp peers run the same programs and jobs.
    RankLayout layout(module.mesh);
    const int ranks = module.mesh.pp;
    std::vector<StatusOr<RankDecision>> decisions(ranks, RankDecision{});
    RankSequenceOptions options;
    options.feeds = ModuleInputs(module);
    options.loss = ModuleLoss(module);
    size_t work = 0;
    for (const RankPlan& r : module.plan.ranks) work += 64 * r.jobs.size();
    ParallelFor(ranks, work, [&](size_t begin, size_t end) {
      for (size_t p = begin; p < end; ++p) {
        const int rank = layout.Rank(RankCoord{0, static_cast<int>(p), 0});
        StatusOr<RankSequence> seq = BuildRankSequence(module, rank, options);
        if (!seq.ok()) {
          decisions[p] = seq.status().WithContext(StrCat("rank ", rank));
          continue;
        }
        RankEvents events(module, std::move(seq).value());
        decisions[p] = events.Run();
      }
    });
    std::vector<RankDecision> done;
    int64_t per_step = 0, naive = 0, removed = 0;
    for (StatusOr<RankDecision>& d : decisions) {
      if (!d.ok()) return d.status();
      per_step += d->waits_per_step;
      naive += d->naive_per_step;
      removed += d->removed;
      done.push_back(std::move(d).value());
    }
    const int64_t waits = Apply(module, done);
    std::set<std::string> names;
    for (const Program& p : module.programs())
      for (const Op& op : p.ops())
        for (const std::string& r : op.record_events)
          if (Inserted(r)) names.insert(r);
    context.AddStatistic("events", static_cast<int64_t>(names.size()));
    context.AddStatistic("waits", waits);
    context.AddStatistic("waits-per-step", per_step);
    context.AddStatistic("naive-waits-per-step", naive);
    context.AddStatistic("implied-waits-dropped", removed);
    return waits > 0;
  }
};

}  // namespace

PW_REGISTER_PASS(InsertEventsPass)

}  // namespace pw
