// recompute: activation recomputation. The forward work of a transformer layer is run again
// right before that layer's backward, so that the activations its backward reads need not
// be held from the forward to the backward of a micro-batch: only the layer's input (a
// checkpoint) is. The recomputed ops are real ops of the backward (priced by the simulator,
// run by the executor) with the same kernels on the same inputs as the forward's, so
// training is bit-identical to the plan without them.
//
// Layers are the module's repeated blocks, found by the builders' naming: a forward op
// belongs to layer N when its first output is named `layerN.*`.
//
// policy=auto chooses per layer (none, selective, full) so that every rank fits a memory
// limit: it plans a copy of the module (split-program, the schedule it is told, insert-p2p),
// simulates it with the cost model and, on each pipeline stage whose ranks do not fit,
// recomputes more: the attention core of every layer first (large activations for little
// compute), then whole layers, as many as the excess over what one layer saves per
// micro-batch in flight suggests; until every rank fits or nothing is left to recompute.
// A greedy search: each round adds recomputation only where a rank is over the limit.
// policy=layers takes the choice per layer from `levels` (one letter per layer: n, s, f),
// to reproduce or hand-tune a choice; the recompute test enumerates every such choice on
// small models to measure how far auto's is from the best.

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/op_def.h"
#include "ir/rank_layout.h"
#include "ops/registry.h"
#include "passes/pass.h"
#include "passes/pass_manager.h"
#include "passes/pass_registry.h"
#include "simulator/memory_fit.h"
#include "simulator/simulator.h"

namespace pw {
namespace {

constexpr const char* kSuffix = "@RECOMPUTE";

enum class Level { kNone = 0, kSelective = 1, kFull = 2 };

// N for an op whose first output is "layerN.<anything>"; -1 otherwise.
int64_t LayerOf(const Op& op) {
  const std::string name = OriginName(op);
  constexpr std::string_view kPrefix = "layer";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  size_t i = kPrefix.size();
  int64_t n = 0;
  bool digits = false;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) {
    n = n * 10 + (name[i] - '0');
    digits = true;
    if (n > (int64_t{1} << 40)) return -1;
  }
  return digits && i < name.size() && name[i] == '.' ? n : -1;
}

// What policy=selective recomputes of the attention: the fused attention ops (multi-head and
// grouped-query) or, in attention built one op per step, the ops that make a per-head
// [batch, heads, seq, seq] activation (the scores, the probabilities, their dropout), as
// Megatron's selective recomputation runs the core again from the kept q, k and v.
// With `reading`, also the ops that read such an activation (the probabilities times v),
// which a whole replay runs again as well.
bool IsAttentionCore(const Op& op, const Program& program, int64_t seq, bool reading) {
  if (op.type == "attention" || op.type == "gqa_attention") return true;
  // Layout ops make q, k and v [B, heads, S, d] from the QKV projection: kept, also where
  // the head size equals the sequence.
  if (seq <= 1 || op.type == "reshape" || op.type == "transpose" || op.type == "split")
    return false;
  bool squares = false;
  auto square = [&](const std::string& v) {
    const Var* var = program.FindVar(v);
    if (var == nullptr || var->shape.size() != 4) return;
    squares |= var->shape[3] == seq && var->shape[2] == seq;
  };
  op.ForEachOutput(square);
  if (reading) op.ForEachInput(square);
  return squares;
}

// Sequence parallelism's all-gathers before the column-parallel linears: run again in the
// backward (Megatron's), so the layer holds the rank's sequence shard, not the gathered
// whole, from its forward to its backward. policy=selective recomputes them too.
bool IsSequenceGather(const Op& op) {
  return op.type == "c_all_gather" && op.role == OpRole::kForward;
}

bool IsBackwardSide(const Op& op) {
  return op.role != OpRole::kForward && op.role != OpRole::kLoss && op.role != OpRole::kUnspecified;
}

Status CheckPlace(const Module& module) {
  if (module.programs().size() != 1 || !module.plan.empty())
    return FailedPrecondition(
        "recompute runs on an unsplit, unplanned module: put it after append-backward (and "
        "amp) and before balance-stages and split-program");
  const std::vector<Op>& ops = module.main_program().ops();
  if (std::none_of(ops.begin(), ops.end(),
                   [](const Op& op) { return op.role == OpRole::kBackward; }))
    return FailedPrecondition("recompute needs the backward: put it after append-backward");
  return OkStatus();
}

struct Rewritten {
  int64_t layers = 0;
  int64_t ops = 0;
  double flops = 0;                          // added per micro-batch
  std::map<int64_t, double> released_bytes;  // per layer: no longer held forward to backward
};

// The layers of an unsplit training module and the pipeline stage of each.
std::map<int64_t, int> LayerStages(const Module& module) {
  std::map<int64_t, int> stages;
  for (const Op& op : module.main_program().ops())
    if (op.role == OpRole::kForward)
      if (const int64_t layer = LayerOf(op); layer >= 0) stages.emplace(layer, op.stage);
  return stages;
}

// How much of a layer is run again. kNeeded: the ops whose outputs the backward reads and
// the ops of the layer that make their inputs (what the backward needs, nothing more).
// kWhole: every op of the layer's forward (of its attention core, when selective), as
// torch.utils.checkpoint replays a layer's forward function: how Megatron-LM and most
// frameworks recompute, which plans that reproduce their runs must price.
enum class Replay { kNeeded, kWhole };

// Recomputes every layer at the level `level_of` gives it.
StatusOr<Rewritten> Rewrite(Module& module, const std::function<Level(int64_t)>& level_of,
                            Replay replay) {
  const bool whole = replay == Replay::kWhole;
  Program& program = module.main_program();
  std::vector<Op>& ops = program.ops();
  const int64_t seq = module.metadata.GetInt("seq", 0);
  const size_t backward_begin =
      static_cast<size_t>(std::find_if(ops.begin(), ops.end(), IsBackwardSide) - ops.begin());

  // Forward facts: who makes each var, which layer, who reads it in the forward.
  std::unordered_map<std::string, size_t> producer;
  std::map<int64_t, std::vector<size_t>> layers;
  std::unordered_map<std::string, std::set<int64_t>> forward_readers;
  for (size_t i = 0; i < backward_begin; ++i) {
    const Op& op = ops[i];
    const int64_t layer = LayerOf(op);
    if (layer >= 0 && op.role == OpRole::kForward) layers[layer].push_back(i);
    op.ForEachOutput([&](const std::string& v) { producer.emplace(v, i); });
    op.ForEachInput([&](const std::string& v) { forward_readers[v].insert(layer); });
  }
  std::unordered_set<std::string> read_backward;
  for (size_t i = backward_begin; i < ops.size(); ++i)
    ops[i].ForEachInput([&](const std::string& v) { read_backward.insert(v); });

  auto persistable = [&](const std::string& v) {
    const Var* var = program.FindVar(v);
    return var == nullptr || var->persistable;
  };

  // Per layer: the ops to run again, in forward order.
  std::vector<std::pair<int64_t, std::vector<size_t>>> clones_by_layer;
  for (const auto& [layer_index, members] : layers) {
    // A plain variable: clang before 16 cannot capture a structured binding in a lambda.
    const int64_t layer = layer_index;
    const Level level = level_of(layer);
    if (level == Level::kNone) continue;
    std::set<size_t> in_layer(members.begin(), members.end());
    // Outputs the next layers read are the checkpoint kept for them: never recomputed.
    auto boundary = [&](const std::string& v) {
      auto it = forward_readers.find(v);
      if (it == forward_readers.end()) return false;
      for (int64_t reader : it->second)
        if (reader != layer) return true;
      return false;
    };
    auto candidate = [&](size_t i) {
      const Op& op = ops[i];
      bool reads_activation = false;
      op.ForEachInput([&](const std::string& v) { reads_activation |= !persistable(v); });
      bool all_boundary = true, any_output = false;
      op.ForEachOutput([&](const std::string& v) {
        any_output = true;
        all_boundary = all_boundary && boundary(v);
      });
      if (!reads_activation || !any_output || all_boundary) return false;
      return level == Level::kFull || IsAttentionCore(op, program, seq, whole) ||
             IsSequenceGather(op);
    };
    // Needed: candidates whose outputs the backward reads, and the candidates of this
    // layer those read (full recomputation rebuilds the chain from the checkpoint).
    std::set<size_t> needed;
    std::vector<size_t> work;
    for (size_t i : members) {
      if (!candidate(i)) continue;
      bool read = whole;
      ops[i].ForEachOutput([&](const std::string& v) { read |= read_backward.count(v) > 0; });
      if (read && needed.insert(i).second) work.push_back(i);
    }
    while (!work.empty()) {
      const size_t i = work.back();
      work.pop_back();
      ops[i].ForEachInput([&](const std::string& v) {
        auto p = producer.find(v);
        if (p == producer.end() || !in_layer.count(p->second) || !candidate(p->second)) return;
        if (needed.insert(p->second).second) work.push_back(p->second);
      });
    }
    if (!needed.empty())
      clones_by_layer.emplace_back(layer, std::vector(needed.begin(), needed.end()));
  }

  // Each layer's clones go right before the first backward op that reads what they make;
  // every backward reader is switched to the recomputed vars.
  const OpRegistry& registry = ops::Registry();
  Rewritten out;
  std::map<size_t, std::vector<Op>> insert_before;
  for (const auto& [layer, clones] : clones_by_layer) {
    std::unordered_map<std::string, std::string> renamed;
    for (size_t i : clones)
      ops[i].ForEachOutput([&](const std::string& v) { renamed.emplace(v, v + kSuffix); });
    size_t position = ops.size();
    for (size_t i = backward_begin; i < ops.size() && position == ops.size(); ++i)
      ops[i].ForEachInput([&](const std::string& v) {
        if (renamed.count(v)) position = i;
      });
    std::vector<Op>& batch = insert_before[position];
    for (size_t i : clones) {
      Op clone = ops[i];
      for (const auto& [from, to] : renamed) {
        clone.RenameInput(from, to);
        clone.RenameOutput(from, to);
      }
      clone.role = OpRole::kBackward;
      clone.origin = OriginName(ops[i]);
      clone.stream.clear();
      clone.wait_events.clear();
      clone.record_events.clear();
      if (const OpDef* def = registry.Find(clone.type); def && def->cost) {
        auto types =
            InferOpTypes(*def, ops[i], [&](const std::string& v) { return program.FindVar(v); });
        if (types.ok()) out.flops += def->cost(*types).flops;
      }
      batch.push_back(std::move(clone));
      ++out.ops;
    }
    for (const auto& [from, to] : renamed) {
      const Var* original = program.FindVar(from);
      if (original == nullptr)
        return Internal("recompute: var '", from, "' is made by an op but not declared");
      Var copy = *original;
      copy.name = to;
      if (read_backward.count(from))
        out.released_bytes[layer] += static_cast<double>(copy.num_bytes());
      if (!program.AddVar(std::move(copy)))
        return FailedPrecondition("recompute: '", to,
                                  "' is declared already: the module was recomputed before");
    }
    for (size_t i = position; i < ops.size(); ++i)
      for (const auto& [from, to] : renamed) ops[i].RenameInput(from, to);
    ++out.layers;
  }
  std::vector<Op> rewritten;
  rewritten.reserve(ops.size() + static_cast<size_t>(out.ops));
  for (size_t i = 0; i < ops.size(); ++i) {
    if (auto it = insert_before.find(i); it != insert_before.end())
      for (Op& op : it->second) rewritten.push_back(std::move(op));
    rewritten.push_back(std::move(ops[i]));
  }
  ops = std::move(rewritten);
  return out;
}

class RecomputePass : public Pass {
 public:
  std::string_view name() const override { return "recompute"; }
  std::string_view description() const override {
    return "Activation recomputation, after append-backward (and amp), before balance-stages "
           "and split-program. policy=full keeps each transformer layer's input and runs the "
           "layer's forward again right before its backward (Megatron's full recomputation); "
           "policy=selective recomputes only the attention core (the attention or gqa_attention "
           "op, or in attention built one op per step the ops that make the per-head "
           "[B, heads, S, S] scores, probabilities and their dropout), whose activations grow "
           "with seq^2, and sequence parallelism's all-gathers (the layer then holds its "
           "sequence shard), and keeps the rest; replay=needed (default) runs again only what "
           "the backward reads and what makes it (a row-parallel matmul whose output no "
           "backward op reads is not rerun), replay=whole every op of the layer (or of its "
           "attention core) as torch.utils.checkpoint does, to price runs of frameworks that "
           "recompute that way; "
           "policy=auto chooses per layer so that every rank fits mem-limit GiB (0: the "
           "device's memory), planning with the schedule it is given and the cost model "
           "(--device): selective everywhere first, then whole layers, only on the stages "
           "that do not fit (a greedy search); policy=layers takes a letter per layer from levels "
           "(n, s, f). Layers are the ops whose first output is named "
           "layerN.*; ops that read only parameters (weight casts) and a layer's output are "
           "kept. The recomputed ops run the same kernels on the same inputs: training is "
           "bit-identical. Statistics: layers recomputed, ops added, FLOPs added per "
           "micro-batch, activation bytes no longer held from forward to backward per "
           "micro-batch.";
  }

  Option<std::string> policy{
      this, "policy", "what is recomputed", "full", {"full", "selective", "auto", "layers"}};
  Option<std::string> replay{this,
                             "replay",
                             "what of a recomputed layer runs again: needed (what the backward "
                             "reads and what makes it) or whole (every forward op, as "
                             "torch.utils.checkpoint replays a layer: Megatron-LM's runs)",
                             "needed",
                             {"needed", "whole"}};
  Option<std::string> layer_levels{this, "levels",
                                   "policy=layers: one letter per layer in order, n (none), s "
                                   "(selective) or f (full), e.g. ffsn",
                                   ""};
  Option<double> mem_limit{this, "mem-limit",
                           "policy=auto: GiB a rank may use (0: the device's memory)", 0.0};
  Option<std::string> schedule{this, "schedule", "policy=auto: the schedule kind it plans with",
                               "1f1b"};
  Option<int64_t> micro_batches{this, "micro-batches",
                                "policy=auto: micro-batches it plans with (0: 2 x pp)", 0};

  Status ValidateOptions() const override {
    if (!(mem_limit.value() >= 0) || mem_limit.value() > 1024.0 * 1024)
      return InvalidArgument("recompute: mem-limit must be a GiB count >= 0, got ",
                             mem_limit.value());
    if (micro_batches.value() < 0 || micro_batches.value() > 65536)
      return InvalidArgument("recompute: micro-batches must be in [0, 65536], got ",
                             micro_batches.value());
    if ((policy.value() == "layers") != !layer_levels.value().empty())
      return InvalidArgument(
          "recompute: levels=... goes with policy=layers (and policy=layers needs it)");
    if (layer_levels.value().find_first_not_of("nsf") != std::string::npos)
      return InvalidArgument("recompute: levels takes one of n, s, f per layer, got '",
                             layer_levels.value(), "'");
    return OkStatus();
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    PW_RETURN_IF_ERROR(CheckPlace(module));
    std::map<int64_t, Level> levels;
    if (policy.value() == "auto") {
      PW_ASSIGN_OR_RETURN(levels, ChooseLevels(module, context));
    } else if (policy.value() == "layers") {
      PW_ASSIGN_OR_RETURN(levels, GivenLevels(module));
    } else {
      const Level level = policy.value() == "full" ? Level::kFull : Level::kSelective;
      for (const auto& [layer, stage] : LayerStages(module)) levels[layer] = level;
    }
    auto level_of = [&](int64_t layer) {
      auto it = levels.find(layer);
      return it == levels.end() ? Level::kNone : it->second;
    };
    PW_ASSIGN_OR_RETURN(Rewritten done, Rewrite(module, level_of, Replayed()));
    if (done.ops == 0) return false;
    double released = 0;
    for (const auto& [layer, bytes] : done.released_bytes) released += bytes;
    int64_t full = 0, selective = 0;
    for (const auto& [layer, level] : levels) {
      full += level == Level::kFull;
      selective += level == Level::kSelective;
    }
    context.AddStatistic("layers-recomputed", done.layers);
    if (policy.value() == "auto") {
      context.AddStatistic("layers-full", full);
      context.AddStatistic("layers-selective", selective);
    }
    context.AddStatistic("ops-added", done.ops);
    context.AddStatistic("added-mflop-per-micro-batch", static_cast<int64_t>(done.flops / 1e6));
    context.AddStatistic("freed-kib-per-micro-batch", static_cast<int64_t>(released / 1024));
    return true;
  }

 private:
  Replay Replayed() const { return replay.value() == "whole" ? Replay::kWhole : Replay::kNeeded; }

  // policy=layers: levels' letter i for the module's layer i.
  StatusOr<std::map<int64_t, Level>> GivenLevels(const Module& module) const {
    const std::map<int64_t, int> stage_of = LayerStages(module);
    const std::string& given = layer_levels.value();
    if (given.size() != stage_of.size())
      return InvalidArgument("recompute: levels '", given, "' has ", given.size(), " letters for ",
                             stage_of.size(), " layers");
    std::map<int64_t, Level> out;
    size_t i = 0;
    for (const auto& [layer, stage] : stage_of) {
      const char c = given[i++];
      out[layer] = c == 'f' ? Level::kFull : c == 's' ? Level::kSelective : Level::kNone;
    }
    return out;
  }

  // policy=auto: the least recomputation (by the greedy rule above) with which the planned
  // copy fits the limit on every rank.
  StatusOr<std::map<int64_t, Level>> ChooseLevels(const Module& module, PassContext& context) {
    const cost::Simulator* simulator = context.Find<cost::Simulator>();
    if (simulator == nullptr)
      return FailedPrecondition(
          "recompute{policy=auto} plans with the cost model: give --device (and --costs)");
    const cost::DeviceSpec& device = simulator->estimator().device();
    const auto limit = static_cast<int64_t>(mem_limit.value() * 1024 * 1024 * 1024);
    if (limit == 0 && device.memory_capacity() <= 0)
      return FailedPrecondition("recompute{policy=auto}: device '", device.name(),
                                "' has no memory capacity: give mem-limit=GIB");
    const int64_t m = micro_batches.value() > 0 ? micro_batches.value() : 2 * module.mesh.pp;
    const bool split =
        schedule.value().rfind("zb", 0) == 0 || schedule.value().rfind("dualpipe", 0) == 0;
    const std::string plan =
        StrCat(",split-program", split ? "{split-backward=true}" : "",
               ",schedule{kind=", schedule.value(), ",micro-batches=", m, "},insert-p2p");

    const std::map<int64_t, int> stage_of = LayerStages(module);
    if (stage_of.empty())
      return FailedPrecondition("recompute: the module has no layers (ops named layerN.*)");
    // What one layer at each level stops holding per micro-batch, from a trial rewrite.
    std::map<Level, std::map<int64_t, double>> saved;
    for (Level level : {Level::kSelective, Level::kFull}) {
      Module trial = module;
      auto all_at = [&](int64_t) { return level; };
      PW_ASSIGN_OR_RETURN(Rewritten r, Rewrite(trial, all_at, Replayed()));
      saved[level] = r.released_bytes;
    }
    std::map<int64_t, Level> levels;
    for (const auto& [layer, stage] : stage_of) levels[layer] = Level::kNone;
    const RankLayout layout(module.mesh);
    for (int round = 0;; ++round) {
      Module trial = module;
      auto level_of = [&](int64_t layer) { return levels[layer]; };
      PW_RETURN_IF_ERROR(Rewrite(trial, level_of, Replayed()).status());
      PassManager pm;
      PW_RETURN_IF_ERROR(pm.AddPipeline(plan.substr(1)));
      PW_RETURN_IF_ERROR(pm.Run(trial).status().WithContext("recompute{policy=auto} planning"));
      PW_ASSIGN_OR_RETURN(cost::SimResult result, simulator->Run(trial));
      const cost::MemoryFit fit = cost::FitMemory(result, device, limit);
      if (fit.fits) return levels;
      // The excess of each pipeline stage (its worst rank).
      std::map<int, int64_t> excess;
      for (const cost::RankFit& r : fit.ranks)
        if (!r.fits) {
          int64_t& e = excess[layout.Coord(r.rank).pp];
          e = std::max(e, r.need - r.usable);
        }
      bool escalated = false;
      for (const auto& [stage, over] : excess) {
        // Stage s holds about pp - s micro-batches at once under 1F1B.
        const int in_flight = std::max(1, module.mesh.pp - stage);
        for (Level level : {Level::kSelective, Level::kFull}) {
          std::vector<int64_t> below;
          for (const auto& [layer, s] : stage_of)
            if (s == stage && levels[layer] < level) below.push_back(layer);
          if (below.empty()) continue;
          // Enough layers for the excess by what each saves, at least one.
          double per_layer = 0;
          for (int64_t layer : below) {
            const double gain =
                saved[level][layer] -
                (levels[layer] == Level::kNone ? 0 : saved[Level::kSelective][layer]);
            per_layer = std::max(per_layer, gain);
          }
          size_t count = below.size();
          if (per_layer > 0)
            count = std::min<size_t>(
                below.size(), static_cast<size_t>(
                                  std::ceil(static_cast<double>(over) / (per_layer * in_flight))));
          count = std::max<size_t>(count, 1);
          for (size_t i = 0; i < count; ++i) levels[below[i]] = level;
          escalated = true;
          break;
        }
      }
      if (!escalated) {
        const cost::RankFit* worst = fit.Tightest();
        return FailedPrecondition(
            "recompute{policy=auto}: with every layer recomputed, rank ", worst->rank,
            " still needs ", cost::FormatBytes(static_cast<double>(worst->need)), " of ",
            cost::FormatBytes(static_cast<double>(worst->usable)),
            " (the smallest peak recomputation reaches): use more pipeline or tensor "
            "parallelism, or a larger mem-limit");
      }
    }
  }
};

}  // namespace

PW_REGISTER_PASS(RecomputePass)

}  // namespace pw
