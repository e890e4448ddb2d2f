#include "search/plan_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "cost_model/op_price.h"
#include "ir/plan_actions.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "passes/loss_scaling.h"
#include "passes/pass_manager.h"
#include "passes/pass_registry.h"
#include "passes/pipeline/module_stages.h"
#include "simulator/action_simulator.h"
#include "simulator/memory_fit.h"
#include "simulator/simulator.h"

namespace pw::search {
namespace {

// The schedule pass's kinds a search tries (csv is the user's own file), and whether they
// need the backward split into I and W.
struct KindInfo {
  const char* name;
  bool split_backward;
  bool priced;  // takes the F, B, W costs (zb-h2, zb-auto)
};
constexpr KindInfo kKinds[] = {
    {"fthenb", false, false},     {"1f1b", false, false},
    {"eager-1f1b", false, false}, {"interleaved-1f1b", false, false},
    {"zb-h1", true, false},       {"zb-h2", true, true},
    {"zb-v", true, false},        {"dualpipe-v", true, false},
    {"zb-auto", true, true},
};

// Steps each plan is simulated back to back for its step time (cost::RepeatSteps): what a
// run measures, where ranks end a step apart.
constexpr int kSteadySteps = 2;

// The p2p orders of insert-p2p besides its default (naive).
constexpr const char* kP2pOrders[] = {"parity", "batched", "torch"};

// Ladders of stream and overlap passes, each tried where all its passes are registered.
const std::vector<std::vector<std::string>>& OverlapLadders() {
  static const std::vector<std::vector<std::string>> ladders = {
      {"assign-streams"},
      {"assign-streams", "insert-events"},
      {"assign-streams", "overlap-column-parallel-backward", "insert-events"},
      {"assign-streams", "overlap-1f1b", "insert-events"},
      {"assign-streams", "overlap-column-parallel-backward", "overlap-1f1b", "insert-events"},
      // Weight gradients under the backward's collectives and after the input gradient's send.
      {"assign-streams", "overlap-column-parallel-backward", "defer-weight-grads", "overlap-1f1b",
       "insert-events"},
      // overlap-1f1b without running forwards earlier: no extra activations, for memory limits.
      {"assign-streams", "overlap-column-parallel-backward", "overlap-1f1b{max-forward-shift=0}",
       "insert-events"},
      // Plans overlap-1f1b does not pair (zero-bubble kinds): row splits alone.
      {"assign-streams", "overlap-column-parallel-backward", "overlap-row-split", "insert-events"},
  };
  return ladders;
}

bool Registered(const std::vector<std::string>& passes) {
  for (const std::string& p : passes)
    if (!PassRegistry::Global().Find(p.substr(0, p.find('{')))) return false;
  return true;
}

std::string Join(const std::vector<std::string>& passes) {
  std::string out;
  for (const std::string& p : passes) out += "," + p;
  return out;
}

// Costs printed into a pipeline: four significant digits, enough to order schedules.
std::string Short(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

bool HasBackwardOps(const Module& module) {
  for (const Program& p : module.programs())
    for (const Op& op : p.ops())
      if (op.role == OpRole::kBackward) return true;
  return false;
}

// Step times equal to the microsecond count as equal (schedules that differ only in what
// the critical path does not see).
int64_t Microseconds(const TunedPlan& p) { return std::llround(p.step_ms * 1e3); }

// A candidate: the pipeline's parts, so that later stages vary one of them.
struct Candidate {
  const KindInfo* kind = nullptr;
  std::string order = "naive";
  std::string extra;  // passes after insert-p2p, with their leading commas
  bool sp = false;    // sequence-parallel before append-backward
  bool post = false;  // post-validate before split-program (loss scaling a step late)

  // The kind's plain plan: naive send/recv order, no passes after it.
  static Candidate Plain(const KindInfo* kind) {
    Candidate c;
    c.kind = kind;
    return c;
  }
};

class Search {
 public:
  Search(const Module& module, std::shared_ptr<const cost::Estimator> estimator,
         const TuneOptions& options)
      : module_(module), est_(std::move(estimator)), opt_(options) {
    AttachCostModel(std::const_pointer_cast<cost::Estimator>(est_), context_);
    backward_ = HasBackwardOps(module) ? "" : "append-backward,";
    // Post-validated variants: a module amp gave loss scaling, pp > 1 (asked once: the
    // answer reads every op of the module).
    tries_post_ = module_.mesh.pp > 1 && backward_.empty() && HasLossScaling(module_) &&
                  Registered({"post-validate"});
  }

  StatusOr<TuneResult> Run();
  StatusOr<ActionLevelBest> BestKind();

 private:
  // `sp`: sequence parallelism first (a forward-only tensor-parallel module); `post`:
  // the module's loss scaling post-validated.
  std::string Prefix(bool split, bool sp = false, bool post = false) const {
    return (sp ? "sequence-parallel," : "") + backward_ + (post ? "post-validate," : "") +
           (split ? "split-program{split-backward=true}" : "split-program");
  }

  // Whether sequence-parallel variants are tried: mp > 1, no backward yet, the pass there.
  bool TriesSequenceParallel() const {
    return module_.mesh.mp > 1 && !backward_.empty() && Registered({"sequence-parallel"});
  }
  std::string ScheduleText(const KindInfo& kind) const;
  std::string PipelineOf(const Candidate& c) const;
  // The module after a prefix, computed once per prefix.
  StatusOr<const Module*> Prefixed(bool split, bool sp = false, bool post = false);
  StatusOr<Module> Apply(bool split, const std::string& suffix, bool sp = false, bool post = false);
  Status PriceStages();
  // The action-level makespan of a kind's schedule; error when the pass refuses it.
  StatusOr<double> ActionMakespan(const KindInfo& kind);
  // Step 1: every kind the module plans, by the action-level makespan, fastest first.
  StatusOr<std::vector<std::pair<double, const KindInfo*>>> RankKinds();
  // Op-level: the plan's figures, or nothing when a pass or the simulator refused.
  std::optional<TunedPlan> Simulate(const Candidate& c);
  void Progress(const std::string& line) const {
    if (opt_.progress) opt_.progress(line);
  }

  const Module& module_;
  std::shared_ptr<const cost::Estimator> est_;
  // est_ as it prices a plan of each schedule (Estimator::ForSchedule), made once each.
  std::map<std::string, std::shared_ptr<const cost::Estimator>> schedule_estimators_;
  std::shared_ptr<const cost::Estimator> EstimatorFor(const std::string& schedule) {
    auto [it, added] = schedule_estimators_.try_emplace(schedule);
    if (added) it->second = cost::Estimator::ForSchedule(est_, schedule);
    return it->second;
  }
  const TuneOptions& opt_;
  PassContext context_{ops::Registry()};
  std::string backward_;
  bool tries_post_ = false;
  std::map<std::tuple<bool, bool, bool>, Module> prefixed_;  // by (split, sp, post)
  ActionCosts costs_;                                        // per stage, from the cost model (ms)
  std::map<std::string, TunedPlan> simulated_;               // by pipeline
  TuneResult result_;
};

std::string Search::ScheduleText(const KindInfo& kind) const {
  std::string s = StrCat("schedule{kind=", kind.name, ",micro-batches=", opt_.micro_batches);
  if (kind.priced)
    s += StrCat(",F=", Short(costs_.forward), ",B=", Short(costs_.backward),
                ",W=", Short(costs_.weight), ",comm=", Short(costs_.comm));
  return s + "}";
}

std::string Search::PipelineOf(const Candidate& c) const {
  return Prefix(c.kind->split_backward, c.sp, c.post) + "," + ScheduleText(*c.kind) +
         ",insert-p2p" + (c.order == "naive" ? "" : "{order=" + c.order + "}") + c.extra;
}

StatusOr<const Module*> Search::Prefixed(bool split, bool sp, bool post) {
  auto it = prefixed_.find({split, sp, post});
  if (it != prefixed_.end()) return &it->second;
  Module m = module_;
  PassManager pm(ops::Registry());
  PW_RETURN_IF_ERROR(pm.AddPipeline(Prefix(split, sp, post)));
  PW_RETURN_IF_ERROR(pm.Run(m, context_).status());
  return &prefixed_.emplace(std::make_tuple(split, sp, post), std::move(m)).first->second;
}

StatusOr<Module> Search::Apply(bool split, const std::string& suffix, bool sp, bool post) {
  PW_ASSIGN_OR_RETURN(const Module* base, Prefixed(split, sp, post));
  Module m = *base;
  PassManager pm(ops::Registry());
  PW_RETURN_IF_ERROR(pm.AddPipeline(suffix));
  PW_RETURN_IF_ERROR(pm.Run(m, context_).status());
  return m;
}

// F, B and W per stage as the cost model prices their programs (the mean over stages, in
// ms), and the activation transfer between stages as comm.
Status Search::PriceStages() {
  PW_ASSIGN_OR_RETURN(const Module* split, Prefixed(true));
  std::map<std::string, std::pair<double, int>> by_kind;  // seconds, programs
  double sent_bytes = 0;
  for (const Program& p : split->programs()) {
    double seconds = 0;
    for (const Op& op : p.ops()) {
      auto lookup = [&](const std::string& v) { return split->FindVar(v, &p); };
      StatusOr<cost::OpPrice> price = cost::PriceOp(op, *split, 0, *est_, ops::Registry(), lookup);
      if (price.ok()) seconds += price->seconds;
    }
    auto& [sum, count] = by_kind[p.info().kind];
    sum += seconds;
    ++count;
    if (p.info().kind == pipeline::kForwardKind && sent_bytes == 0)
      for (const std::string& v : p.info().outputs)
        if (const Var* decl = split->FindVar(v, &p)) sent_bytes += decl->num_bytes();
  }
  auto mean_ms = [&](const char* kind) {
    auto it = by_kind.find(kind);
    return it == by_kind.end() || it->second.second == 0
               ? 0.0
               : 1e3 * it->second.first / it->second.second;
  };
  costs_.forward = std::max(1e-6, mean_ms(pipeline::kForwardKind));
  costs_.backward = std::max(1e-6, mean_ms(pipeline::kBackwardInputKind));
  costs_.weight = std::max(1e-6, mean_ms(pipeline::kBackwardWeightKind));
  costs_.comm =
      1e3 * est_->comm()
                .Time(cost::CommKind::kSendRecv, sent_bytes, 2, cost::GroupSpan::Pair(false))
                .seconds;
  return OkStatus();
}

StatusOr<double> Search::ActionMakespan(const KindInfo& kind) {
  PW_ASSIGN_OR_RETURN(Module m, Apply(kind.split_backward, ScheduleText(kind)));
  PW_ASSIGN_OR_RETURN(ActionSchedule schedule, PlanToActionSchedule(m.plan));
  SimulationOptions options;
  options.costs = costs_;
  PW_ASSIGN_OR_RETURN(TimedResult timed, SimulateTimed(schedule, options));
  // The longest rank's span, not the makespan: steps follow each other without a barrier
  // (a run's ranks each start the next step when done with theirs), so a schedule whose
  // ranks end apart (zb-h2, zb-v, zb-auto) costs less a step than its one-step makespan.
  // The op-level simulation prices the kept kinds' steps back to back, waits included.
  return timed.cost;
}

std::optional<TunedPlan> Search::Simulate(const Candidate& c) {
  const std::string pipeline = PipelineOf(c);
  auto it = simulated_.find(pipeline);
  if (it != simulated_.end()) return it->second;
  std::string suffix = pipeline.substr(Prefix(c.kind->split_backward, c.sp, c.post).size() + 1);
  StatusOr<Module> m = Apply(c.kind->split_backward, suffix, c.sp, c.post);
  StatusOr<cost::SimResult> r =
      m.ok() ? cost::Simulator(EstimatorFor(m->plan.schedule), ops::Registry(),
                               [] {
                                 cost::SimOptions o;
                                 o.record_timeline = false;
                                 o.steps = kSteadySteps;
                                 return o;
                               }())
                   .RunSteady(*m)
             : StatusOr<cost::SimResult>(m.status());
  if (!r.ok()) {
    ++result_.refused;
    return std::nullopt;
  }
  ++result_.simulated;
  TunedPlan plan;
  plan.pipeline = pipeline;
  plan.step_ms = r->StepTimeInRun() * 1e3;
  plan.bubble_rate = r->bubble_rate;
  for (const cost::RankResult& rank : r->ranks)
    plan.peak_bytes = std::max(plan.peak_bytes, rank.peak_bytes);
  plan.fits = cost::FitMemory(*r, est_->device(), opt_.mem_limit_bytes).fits;
  simulated_.emplace(pipeline, plan);
  return plan;
}

StatusOr<std::vector<std::pair<double, const KindInfo*>>> Search::RankKinds() {
  if (opt_.micro_batches < 1)
    return InvalidArgument("the search needs micro-batches >= 1, got ", opt_.micro_batches);
  PW_RETURN_IF_ERROR(Prefixed(false).status());
  PW_RETURN_IF_ERROR(PriceStages());
  std::vector<std::pair<double, const KindInfo*>> ranked;
  for (const KindInfo& kind : kKinds) {
    StatusOr<double> makespan = ActionMakespan(kind);
    if (!makespan.ok()) {
      ++result_.refused;
      continue;
    }
    ++result_.planned;
    ranked.push_back({*makespan, &kind});
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return ranked;
}

StatusOr<ActionLevelBest> Search::BestKind() {
  PW_ASSIGN_OR_RETURN(auto ranked, RankKinds());
  if (ranked.empty())
    return FailedPrecondition("no schedule kind plans on this module (", result_.refused,
                              " refused)");
  return ActionLevelBest{ranked[0].second->name, ranked[0].first, result_.planned};
}

StatusOr<TuneResult> Search::Run() {
  // 1. Every kind on the action-level simulator; the best few go on.
  PW_ASSIGN_OR_RETURN(auto ranked, RankKinds());
  if (static_cast<int>(ranked.size()) > opt_.action_keep) ranked.resize(opt_.action_keep);

  // Plain 1f1b: what every plan is compared with (where the module's stages allow it: one
  // per rank).
  const KindInfo* one_f_one_b = &kKinds[1];
  result_.baseline = Simulate(Candidate::Plain(one_f_one_b));
  Progress(StrCat("tune: ", result_.planned,
                  " schedule kinds priced by the action-level "
                  "simulator, ",
                  ranked.size(), " kept (F=", Short(costs_.forward), " B=", Short(costs_.backward),
                  " W=", Short(costs_.weight), " comm=", Short(costs_.comm), " ms)"));

  // 2. The kept kinds on the op-level simulator; the best two with every p2p order.
  std::vector<std::pair<TunedPlan, Candidate>> found;
  auto add = [&](const Candidate& c, double makespan) {
    std::optional<TunedPlan> plan = Simulate(c);
    if (!plan) return;
    plan->action_makespan = makespan;
    found.push_back({*plan, c});
  };
  auto by_time = [](const auto& a, const auto& b) { return a.first.step_ms < b.first.step_ms; };
  std::map<const KindInfo*, double> makespan_of;
  for (const auto& [makespan, kind] : ranked) {
    makespan_of[kind] = makespan;
    add(Candidate::Plain(kind), makespan);
    // fp16's overflow check a step late: ranks no longer wait for the slowest before their
    // updates, so steps run into each other (what zero-bubble kinds gain most from).
    if (tries_post_) {
      Candidate post = Candidate::Plain(kind);
      post.post = true;
      add(post, makespan);
    }
  }
  std::stable_sort(found.begin(), found.end(), by_time);
  const size_t kinds_kept = std::min<size_t>(opt_.order_kinds, found.size());
  for (size_t i = 0; i < kinds_kept; ++i) {
    const Candidate base = found[i].second;
    for (const char* order : kP2pOrders) {
      Candidate c = base;
      c.order = order;
      add(c, makespan_of[c.kind]);
    }
  }
  std::stable_sort(found.begin(), found.end(), by_time);
  Progress(StrCat("tune: ", found.size(),
                  " schedules and p2p orders priced by the op-level "
                  "simulator"));

  // 3. The best two and plain 1f1b with each overlap ladder (and extra pass) registered.
  std::vector<std::string> extras;
  for (const std::string& p : opt_.extra_passes)
    if (Registered({p})) extras.push_back(p);
  // Plain 1f1b too: overlap-1f1b pairs only its jobs.
  std::vector<Candidate> bases;
  if (result_.baseline) bases.push_back(Candidate::Plain(one_f_one_b));
  const size_t wanted = bases.size() + opt_.overlap_bases;
  for (size_t i = 0; i < found.size() && bases.size() < wanted; ++i)
    if (!result_.baseline || PipelineOf(found[i].second) != PipelineOf(bases[0]))
      bases.push_back(found[i].second);
  for (const Candidate& base : bases) {
    std::vector<std::string> tails = {""};
    for (const auto& ladder : OverlapLadders()) {
      if (!Registered(ladder)) continue;
      tails.push_back(Join(ladder));
      // With replicas, each ladder that orders its streams also with the gradient
      // all-reduces started during the backward.
      if (module_.mesh.dp > 1 && ladder.back() == "insert-events" &&
          Registered({"overlap-grad-reduce"})) {
        std::vector<std::string> early = ladder;
        early.insert(early.begin() + 1, "overlap-grad-reduce");
        tails.push_back(Join(early));
      }
    }
    // With replicas, every tail also behind the distributed optimizer (ZeRO-1: less
    // optimizer state per rank, so plans that did not fit may).
    if (module_.mesh.dp > 1 && Registered({"distributed-optimizer"})) {
      const size_t plain_tails = tails.size();
      for (size_t t = 0; t < plain_tails; ++t) tails.push_back(",distributed-optimizer" + tails[t]);
      // And with its parameter all-gathers placed where they hide best (bf16 copies under
      // amp), behind each tail that reduces during the backward.
      const std::string early = "overlap-grad-reduce";
      if (Registered({"overlap-param-gather"}))
        for (size_t t = 0; t < plain_tails; ++t)
          if (size_t at = tails[t].find(early); at != std::string::npos)
            tails.push_back(
                ",distributed-optimizer" +
                std::string(tails[t]).insert(at + early.size(), ",overlap-param-gather"));
    }
    // Sequence parallelism (activations divided by mp between the linears) on the fastest
    // kind found only: every tail again behind sequence-parallel.
    const size_t best = result_.baseline && bases.size() > 1 ? 1 : 0;
    const bool with_sp = TriesSequenceParallel() && &base == &bases[best];
    // Behind sequence-parallel, each tail also with its collectives under their matmuls.
    std::vector<std::string> sp_tails = tails;
    if (with_sp && Registered({"overlap-collective-matmul"}))
      for (const std::string& tail : tails)
        if (size_t at = tail.find(",assign-streams,"); at != std::string::npos)
          sp_tails.push_back(std::string(tail).insert(at + std::string(",assign-streams").size(),
                                                      ",overlap-collective-matmul"));
    for (bool sp : {false, true}) {
      if (sp && !with_sp) continue;
      for (const std::string& tail : sp ? sp_tails : tails) {
        Candidate c = base;
        c.sp = sp;
        c.extra = tail;
        add(c, makespan_of[c.kind]);
        for (const std::string& extra : extras) {
          c.extra = "," + extra + tail;
          add(c, makespan_of[c.kind]);
        }
      }
    }
  }
  Progress(StrCat("tune: ", result_.simulated, " pipelines simulated, ", result_.refused,
                  " refused by a pass"));

  // The best distinct plans within memory: of equally fast plans only the one that holds
  // least (the others are dominated), the shortest pipeline of those.
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::make_tuple(Microseconds(a.first), a.first.peak_bytes, a.first.pipeline.size()) <
           std::make_tuple(Microseconds(b.first), b.first.peak_bytes, b.first.pipeline.size());
  });
  std::set<int64_t> seen;
  for (const auto& [plan, c] : found) {
    if (!seen.insert(Microseconds(plan)).second) continue;
    if (!plan.fits) {
      ++result_.over_memory;
      continue;
    }
    if (static_cast<int>(result_.best.size()) < opt_.top) result_.best.push_back(plan);
  }
  if (found.empty())
    return FailedPrecondition("no schedule kind plans and simulates on this module (",
                              result_.refused, " candidates refused)");
  return result_;
}

}  // namespace

StatusOr<ActionLevelBest> BestActionLevelKind(const Module& module,
                                              std::shared_ptr<const cost::Estimator> estimator,
                                              int micro_batches) {
  if (!module.plan.empty())
    return FailedPrecondition("module '", module.name,
                              "' already has a plan: tune starts from an unplanned module");
  TuneOptions options;
  options.micro_batches = micro_batches;
  Search search(module, std::move(estimator), options);
  return search.BestKind();
}

StatusOr<TuneResult> Tune(const Module& module, const TuneOptions& options) {
  if (!options.estimator)
    return InvalidArgument(
        "Tune needs TuneOptions::estimator (the device and op costs to price "
        "plans with: MakeEstimator)");
  if (!module.plan.empty())
    return FailedPrecondition("module '", module.name,
                              "' already has a plan: tune starts from an unplanned module");
  Search search(module, options.estimator, options);
  return search.Run();
}

}  // namespace pw::search
