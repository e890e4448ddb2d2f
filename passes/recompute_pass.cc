// recompute: activation recomputation. The forward work of a transformer layer is run again
// right before that layer's backward, so that the activations its backward reads need not
// be held from the forward to the backward of a micro-batch: only the layer's input (a
// checkpoint) is. The recomputed ops are real ops of the backward (priced by the simulator,
// run by the executor) with the same kernels on the same inputs as the forward's, so
// training is bit-identical to the plan without them.
//
// Layers are the module's repeated blocks, found by the builders' naming: a forward op
// belongs to layer N when its first output is named `layerN.*`.

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/op_def.h"
#include "ops/registry.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

constexpr const char* kSuffix = "@RECOMPUTE";

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

bool IsBackwardSide(const Op& op) {
  return op.role != OpRole::kForward && op.role != OpRole::kLoss && op.role != OpRole::kUnspecified;
}

class RecomputePass : public Pass {
 public:
  std::string_view name() const override { return "recompute"; }
  std::string_view description() const override {
    return "Activation recomputation, after append-backward (and amp), before balance-stages "
           "and split-program. policy=full keeps each transformer layer's input and runs the "
           "layer's forward again right before its backward (Megatron's full recomputation); "
           "policy=selective recomputes only the attention core (the attention op: scores, "
           "softmax, times V), whose activations grow with seq^2, and keeps the rest. Layers "
           "are the ops whose first output is named layerN.*; ops that read only parameters "
           "(weight casts) and a layer's output are kept. The recomputed ops run the same "
           "kernels on the same inputs: training is bit-identical. Statistics: layers "
           "recomputed, ops added, FLOPs added per micro-batch, activation bytes no longer "
           "held from forward to backward per micro-batch.";
  }

  Option<std::string> policy{this, "policy", "what is recomputed", "full", {"full", "selective"}};

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.programs().size() != 1 || !module.plan.empty())
      return FailedPrecondition(
          "recompute runs on an unsplit, unplanned module: put it after append-backward (and "
          "amp) and before balance-stages and split-program");
    Program& program = module.main_program();
    std::vector<Op>& ops = program.ops();
    const auto first_backward = std::find_if(ops.begin(), ops.end(), IsBackwardSide);
    if (first_backward == ops.end() || std::none_of(ops.begin(), ops.end(), [](const Op& op) {
          return op.role == OpRole::kBackward;
        }))
      return FailedPrecondition("recompute needs the backward: put it after append-backward");
    const size_t backward_begin = static_cast<size_t>(first_backward - ops.begin());

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
    std::vector<std::vector<size_t>> clones_by_layer;
    for (const auto& [layer, members] : layers) {
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
        return policy.value() == "full" || op.type == "attention";
      };
      // Needed: candidates whose outputs the backward reads, and the candidates of this
      // layer those read (full recomputation rebuilds the chain from the checkpoint).
      std::set<size_t> needed;
      std::vector<size_t> work;
      for (size_t i : members) {
        if (!candidate(i)) continue;
        bool read = false;
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
      if (!needed.empty()) clones_by_layer.emplace_back(needed.begin(), needed.end());
    }
    if (clones_by_layer.empty()) return false;

    // Each layer's clones go right before the first backward op that reads what they make;
    // every backward reader is switched to the recomputed vars.
    const OpRegistry& registry = ops::Registry();
    std::map<size_t, std::vector<Op>> insert_before;
    double flops = 0, bytes_released = 0;
    int64_t added = 0;
    for (const std::vector<size_t>& clones : clones_by_layer) {
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
          if (types.ok()) flops += def->cost(*types).flops;
        }
        batch.push_back(std::move(clone));
        ++added;
      }
      for (const auto& [from, to] : renamed) {
        const Var* original = program.FindVar(from);
        if (original == nullptr)
          return Internal("recompute: var '", from, "' is made by an op but not declared");
        Var copy = *original;
        copy.name = to;
        if (read_backward.count(from)) bytes_released += static_cast<double>(copy.num_bytes());
        if (!program.AddVar(std::move(copy)))
          return FailedPrecondition("recompute: '", to,
                                    "' is declared already: the module was recomputed before");
      }
      for (size_t i = position; i < ops.size(); ++i)
        for (const auto& [from, to] : renamed) ops[i].RenameInput(from, to);
    }
    std::vector<Op> rewritten;
    rewritten.reserve(ops.size() + static_cast<size_t>(added));
    for (size_t i = 0; i < ops.size(); ++i) {
      if (auto it = insert_before.find(i); it != insert_before.end())
        for (Op& op : it->second) rewritten.push_back(std::move(op));
      rewritten.push_back(std::move(ops[i]));
    }
    ops = std::move(rewritten);
    context.AddStatistic("layers-recomputed", static_cast<int64_t>(clones_by_layer.size()));
    context.AddStatistic("ops-added", added);
    context.AddStatistic("added-mflop-per-micro-batch", static_cast<int64_t>(flops / 1e6));
    context.AddStatistic("freed-kib-per-micro-batch", static_cast<int64_t>(bytes_released / 1024));
    return true;
  }
};

}  // namespace

PW_REGISTER_PASS(RecomputePass)

}  // namespace pw
