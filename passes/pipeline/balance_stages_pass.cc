// balance-stages: moves the pipeline stage boundaries of an unsplit training module so
// that the slowest virtual stage's estimated time per micro-batch is as small as possible.
//
// A virtual stage's time is the sum over its forward ops of each op's time and the time of
// the ops made from it (Op::origin: its grad ops, the sums and fills finishing their
// gradients, and the executor's accumulation of each parameter gradient into the step's
// sum), with tensor-parallel collectives priced by the comm model, plus the
// point-to-point transfers at its boundaries: the activations that cross a boundary go
// forward, their gradients come back. Boundaries may fall between any two forward ops
// (inside a layer: between attention and MLP, or wherever what crosses is cheap to send);
// the best ones come from an exact dynamic program over the forward ops in model order.
// Virtual stages keep their (stage, chunk) places in model order; the optimizer's once-
// per-step work is not counted. Ops, their gradients, updates and vars move together.
//
// Op times come from the PassContext's cost::Estimator (`opt --device D --costs F`); without
// one, from the built-in cpu roofline.

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "cost_model/estimator.h"
#include "ir/rank_layout.h"
#include "ir/rank_sequence.h"
#include "passes/loss_scaling.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

using Place = std::pair<int, int>;  // (stage, chunk)

// Optimizer work of a whole stage rather than of a forward op (loss scaling's checks):
// rebuilt for the new stages by the pass that made it.
bool IsStageLevel(const Op& op) { return op.role == OpRole::kOptimize && op.origin.empty(); }

class StageBalancer {
 public:
  StageBalancer(Module& module, const OpRegistry& registry, const cost::Estimator& est)
      : module_(module), program_(module.main_program()), registry_(registry), est_(est) {}

  Status Analyze() {
    const std::vector<Op>& ops = program_.ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.role != OpRole::kForward && op.role != OpRole::kLoss) continue;
      if (op.stage < 0)
        return FailedPrecondition("op ", i, " (", op.type, ") has no pipeline stage");
      unit_of_[OriginName(op)] = static_cast<int>(forward_.size());
      forward_.push_back(static_cast<int>(i));
      Place p{op.stage, op.chunk};
      if (places_.empty() || places_.back() != p) {
        if (std::find(places_.begin(), places_.end(), p) != places_.end())
          return FailedPrecondition("op ", i, " (", op.type, ") returns to stage ", op.stage,
                                    " chunk ", op.chunk,
                                    ": balance-stages needs each stage's forward ops contiguous");
        places_.push_back(p);
        cuts_before_.push_back(static_cast<int>(forward_.size()) - 1);
      }
    }
    const int n = static_cast<int>(forward_.size());
    unit_seconds_.assign(n, 0);
    for (int u = 0; u < n; ++u) PW_RETURN_IF_ERROR(AddSeconds(ops[forward_[u]], u));
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.role == OpRole::kForward || op.role == OpRole::kLoss || IsStageLevel(op)) continue;
      auto it = unit_of_.find(op.origin);
      if (it == unit_of_.end())
        return FailedPrecondition("op ", i, " (", op.type, ") names no forward op it was made ",
                                  "from (origin '", op.origin,
                                  "'): build the training program with append-backward");
      if (op.role != OpRole::kOptimize) {
        // The executor adds every micro-batch's parameter gradient into its sum, or the
        // weight-gradient GEMM that makes it does: work of the unit that makes the gradient
        // (as the simulator counts it).
        auto lookup = [&](const std::string& v) { return program_.FindVar(v); };
        const ExecutedOp run = ExecutedForm(
            program_, i, [&](const std::string& v) { return ParamGradDecl(v, lookup); });
        PW_RETURN_IF_ERROR(AddSeconds(run.op, it->second));
        for (const std::string& v : run.added)
          PW_RETURN_IF_ERROR(AddSeconds(AddedWorkOp(WorkKind::kAccumulate, v), it->second));
      }
      // split-program puts a communication op with the work before it on its stage: a stage
      // whose backward would start with one (the gradient all-reduce of a c_identity) must
      // not end at that unit.
      if (op.role != OpRole::kOptimize && !first_made_.count(it->second)) {
        first_made_.insert(it->second);
        if (op.role == OpRole::kCommunication) no_cut_after_.insert(it->second);
      }
    }
    return CrossingSeconds();
  }

  int num_places() const { return static_cast<int>(places_.size()); }
  int num_units() const { return static_cast<int>(forward_.size()); }

  // Stage k holds units [starts[k], starts[k + 1]) (starts[0] = 0, one past the end last).
  std::vector<int> CurrentStarts() const {
    std::vector<int> starts = cuts_before_;
    starts.push_back(num_units());
    return starts;
  }

  double StageSeconds(int begin, int end) const {
    if (end < num_units() && no_cut_after_.count(end - 1))
      return std::numeric_limits<double>::infinity();
    double t = prefix_[end] - prefix_[begin];
    if (begin > 0) t += boundary_[begin - 1];
    if (end < num_units()) t += boundary_[end - 1];
    return t;
  }

  std::vector<double> Estimates(const std::vector<int>& starts) const {
    std::vector<double> t;
    for (size_t k = 0; k + 1 < starts.size(); ++k)
      t.push_back(StageSeconds(starts[k], starts[k + 1]));
    return t;
  }

  // The starts minimising the slowest stage: dp[k][j] is the best slowest stage of units
  // [0, j) split into k + 1 stages.
  std::vector<int> BalancedStarts() const {
    const int n = num_units(), v = num_places();
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<std::vector<double>> dp(v, std::vector<double>(n + 1, inf));
    std::vector<std::vector<int>> from(v, std::vector<int>(n + 1, -1));
    for (int j = 1; j <= n; ++j) dp[0][j] = StageSeconds(0, j);
    for (int k = 1; k < v; ++k)
      for (int j = k + 1; j <= n; ++j)
        for (int i = k; i < j; ++i) {
          double t = std::max(dp[k - 1][i], StageSeconds(i, j));
          if (t < dp[k][j]) dp[k][j] = t, from[k][j] = i;
        }
    if (dp[v - 1][n] == inf) return CurrentStarts();  // no allowed boundaries
    std::vector<int> starts(v + 1, n);
    for (int k = v - 1, j = n; k > 0; --k) j = starts[k] = from[k][j];
    starts[0] = 0;
    return starts;
  }

  // Places every op, and every var with a stage, by the new starts.
  void Apply(const std::vector<int>& starts) {
    std::vector<Place> unit_place(num_units());
    for (int k = 0; k + 1 < static_cast<int>(starts.size()); ++k)
      for (int u = starts[k]; u < starts[k + 1]; ++u) unit_place[u] = places_[k];
    std::vector<Op>& ops = program_.ops();
    for (int u = 0; u < num_units(); ++u) Move(ops[forward_[u]], unit_place[u]);
    for (Op& op : ops)
      if (op.role != OpRole::kForward && op.role != OpRole::kLoss && !IsStageLevel(op))
        Move(op, unit_place[unit_of_.at(op.origin)]);
    // A var sits with the first op that writes it, else the first that reads it.
    std::unordered_map<std::string, int> stage;
    for (const Op& op : ops)
      op.ForEachOutput([&](const std::string& v) { stage.emplace(v, op.stage); });
    for (const Op& op : ops)
      op.ForEachInput([&](const std::string& v) { stage.emplace(v, op.stage); });
    for (const Var& v : program_.vars()) {
      auto it = stage.find(v.name);
      if (v.stage >= 0 && it != stage.end()) program_.FindVar(v.name)->stage = it->second;
    }
  }

  // "op 123 'layer7.residual1' (add), 16.0 MiB": what a boundary before unit u sends.
  std::string DescribeBoundary(int u) const {
    const Op& op = program_.ops()[forward_[u - 1]];
    return StrCat("after op ", forward_[u - 1], " '", OriginName(op), "' (", op.type, "), ",
                  crossing_bytes_[u - 1] / (1 << 20), " MiB each way");
  }
  int LastOpBefore(int u) const { return forward_[u - 1]; }

 private:
  StatusOr<double> OpSeconds(const Op& op) {
    auto lookup = [&](const std::string& v) { return program_.FindVar(v); };
    StatusOr<cost::OpSignature> sig = cost::SignatureOf(op, registry_, lookup);
    if (!sig.ok()) return sig.status();
    const OpDef* def = registry_.Find(op.type);
    if (def && def->collective) {
      std::vector<int> group = layout_.Group(op.attrs.GetString("group", "mp"), 0);
      const Var* x = program_.FindVar(op.Input("X"));
      if (group.size() > 1 && x)
        return est_.comm()
            .Time(cost::CommKind::kAllReduce, static_cast<double>(x->num_bytes()),
                  static_cast<int>(group.size()), cost::SpanOf(est_.device(), group))
            .seconds;
    }
    return est_.OpTime(*sig).seconds;
  }

  Status AddSeconds(const Op& op, int unit) {
    StatusOr<double> t = OpSeconds(op);
    if (!t.ok()) return t.status().WithContext(StrCat("balance-stages: pricing ", op.type));
    unit_seconds_[unit] += *t;
    return OkStatus();
  }

  // Bytes of the activations each cut sends forward (their gradients come back alike) and
  // the prefix sums the dynamic program reads.
  Status CrossingSeconds() {
    const int n = num_units();
    std::unordered_set<std::string> fed;
    for (const std::string& v : ModuleInputs(module_)) fed.insert(v);
    std::unordered_map<std::string, int> producer, last_reader;
    const std::vector<Op>& ops = program_.ops();
    for (int u = 0; u < n; ++u)
      ops[forward_[u]].ForEachOutput([&](const std::string& v) { producer.emplace(v, u); });
    for (const Op& op : ops) {
      if (op.role == OpRole::kOptimize) continue;
      const bool forward = op.role == OpRole::kForward || op.role == OpRole::kLoss;
      const int u = forward ? unit_of_.at(OriginName(op)) : unit_of_.at(op.origin);
      op.ForEachInput([&](const std::string& v) {
        int& r = last_reader.emplace(v, u).first->second;
        r = std::max(r, u);
      });
    }
    std::vector<double> diff(n + 1, 0);
    for (const auto& [name, p] : producer) {
      auto r = last_reader.find(name);
      const Var* var = program_.FindVar(name);
      if (r == last_reader.end() || r->second <= p || !var || var->persistable || fed.count(name))
        continue;
      diff[p] += static_cast<double>(var->num_bytes());
      diff[r->second] -= static_cast<double>(var->num_bytes());
    }
    crossing_bytes_.assign(std::max(0, n - 1), 0);
    boundary_.assign(std::max(0, n - 1), 0);
    double running = 0;
    for (int c = 0; c + 1 < n; ++c) {
      running += diff[c];
      crossing_bytes_[c] = running;
      // The next stage's first rank: whether the link between them leaves the node.
      const bool inter = !cost::SameNode(est_.device(), 0, layout_.PipelinePeer(0, 1));
      boundary_[c] =
          2 * est_.comm()
                  .Time(cost::CommKind::kSendRecv, running, 2, cost::GroupSpan::Pair(inter))
                  .seconds;
    }
    prefix_.assign(n + 1, 0);
    for (int u = 0; u < n; ++u) prefix_[u + 1] = prefix_[u] + unit_seconds_[u];
    return OkStatus();
  }

  void Move(Op& op, const Place& p) {
    if (op.stage != p.first || op.chunk != p.second) ++moved_;
    op.stage = p.first;
    op.chunk = p.second;
  }

 public:
  int64_t moved() const { return moved_; }

 private:
  Module& module_;
  Program& program_;
  const OpRegistry& registry_;
  const cost::Estimator& est_;
  RankLayout layout_{module_.mesh};

  std::vector<int> forward_;                      // unit -> op index
  std::unordered_map<std::string, int> unit_of_;  // forward op's name -> unit
  std::vector<Place> places_;                     // virtual stages in model order
  std::vector<int> cuts_before_;                  // first unit of each virtual stage
  std::vector<double> unit_seconds_, prefix_;
  std::vector<double> crossing_bytes_, boundary_;  // per cut after unit c
  std::unordered_set<int> first_made_, no_cut_after_;
  int64_t moved_ = 0;
};

class BalanceStagesPass : public Pass {
 public:
  std::string_view name() const override { return "balance-stages"; }
  std::string_view description() const override {
    return "Moves the pipeline stage boundaries of the unsplit training module (after "
           "append-backward and amp, before split-program) so that the slowest virtual "
           "stage's estimated forward + backward time per micro-batch, plus what its "
           "boundaries send and receive, is as small as possible. Boundaries may fall between "
           "any two forward ops, inside a layer too; what crosses is priced by the comm model. "
           "Op times come from the cost model (opt --device D --costs F), else the cpu "
           "roofline. Prints each stage's estimate before and after and where each boundary "
           "fell (report=false: statistics only).";
  }

  Option<bool> report{this, "report", "print the estimates and boundaries to stderr", true};

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.programs().size() != 1 || !module.main_program().info().kind.empty())
      return FailedPrecondition(
          "balance-stages runs on the unsplit module: put it before "
          "split-program");
    bool backward = false;
    for (const Op& op : module.main_program().ops()) backward |= op.role == OpRole::kBackward;
    if (!backward)
      return FailedPrecondition(
          "balance-stages balances forward and backward work: put "
          "append-backward before it");
    std::shared_ptr<cost::Estimator> fallback;
    const cost::Estimator* est = context.Find<cost::Estimator>();
    if (!est) {
      PW_ASSIGN_OR_RETURN(
          fallback, cost::Estimator::Create(*cost::BuiltinDeviceSpec("cpu"), cost::OpCostTable()));
      est = fallback.get();
    }
    StageBalancer balancer(module, context.ops(), *est);
    PW_RETURN_IF_ERROR(balancer.Analyze());
    context.AddStatistic("virtual-stages", balancer.num_places());
    if (balancer.num_places() < 2) return false;
    const std::vector<int> before = balancer.CurrentStarts();
    const std::vector<int> after = balancer.BalancedStarts();
    const std::vector<double> t_before = balancer.Estimates(before);
    const std::vector<double> t_after = balancer.Estimates(after);
    for (size_t k = 0; k < t_before.size(); ++k) {
      context.AddStatistic(StrCat("stage", k, "-before-us"), std::llround(t_before[k] * 1e6));
      context.AddStatistic(StrCat("stage", k, "-after-us"), std::llround(t_after[k] * 1e6));
    }
    for (size_t k = 1; k + 1 < after.size(); ++k)
      context.AddStatistic(StrCat("boundary", k, "-after-op"), balancer.LastOpBefore(after[k]));
    // Keep the boundaries unless moving them shortens the slowest stage.
    const double slowest_before = *std::max_element(t_before.begin(), t_before.end());
    const double slowest_after = *std::max_element(t_after.begin(), t_after.end());
    const bool better = after != before && slowest_after < slowest_before * (1 - 1e-9);
    if (report.value())
      Print(est->device().name(), !fallback, balancer, before, better ? after : before);
    if (!better) return false;
    balancer.Apply(after);
    if (HasLossScaling(module)) PW_RETURN_IF_ERROR(RestageLossScaling(module));
    context.AddStatistic("ops-moved", balancer.moved());
    return true;
  }

 private:
  static void Print(const std::string& device, bool measured, const StageBalancer& b,
                    const std::vector<int>& before, const std::vector<int>& after) {
    const std::vector<double> t0 = b.Estimates(before), t1 = b.Estimates(after);
    std::fprintf(stderr,
                 "balance-stages: per virtual stage, forward + backward + boundary transfers per "
                 "micro-batch on %s%s (ms)\n",
                 device.c_str(), measured ? "" : " (roofline: no --device/--costs given)");
    std::fprintf(stderr, "  stage      before       after   forward ops\n");
    for (size_t k = 0; k < t1.size(); ++k)
      std::fprintf(stderr, "  %5zu %11.3f %11.3f   [%d, %d) -> [%d, %d)\n", k, t0[k] * 1e3,
                   t1[k] * 1e3, before[k], before[k + 1], after[k], after[k + 1]);
    for (size_t k = 1; k + 1 < after.size(); ++k)
      std::fprintf(stderr, "  boundary %zu|%zu: %s\n", k - 1, k,
                   b.DescribeBoundary(after[k]).c_str());
  }
};

}  // namespace

PW_REGISTER_PASS(BalanceStagesPass)

}  // namespace pw
