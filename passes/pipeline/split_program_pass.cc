// split-program: one program per (virtual stage, kind) from the module's single program.
// Virtual stages are the ops' (stage, chunk) placements in model order (first appearance
// among forward ops); kinds are forward (forward and loss ops), backward (or, with
// split-backward=true, backward_input and backward_weight from the grad makers'
// weight_grad marks) and optimizer. Each program records the vars it reads from other
// programs, the vars other programs read from it, and the vars a later job of the same
// micro-batch on its stage still needs (so the executor keeps those and frees the rest).

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "passes/pass.h"
#include "passes/pass_registry.h"
#include "passes/pipeline/module_stages.h"

namespace pw {
namespace {

using pipeline::kBackwardInputKind;
using pipeline::kBackwardKind;
using pipeline::kBackwardWeightKind;
using pipeline::kForwardKind;
using pipeline::kOptimizerKind;

// The zero-bubble split of the backward ops: W (backward_weight) is the weight-gradient
// work and whatever only it needs; everything an input-gradient op reads belongs to I
// (backward_input), since I runs before W. Starts from the grad makers' weight_grad marks
// (plus communication that only carries W results, e.g. an all-reduce of a weight
// gradient) and moves to I every W op whose result is read by an op outside the W program
// of its own virtual stage, the optimizer excepted. Ops are in def-before-use order, so one
// backward sweep settles every op after its readers.
std::vector<bool> WeightGradOps(const std::vector<Op>& ops, const std::vector<int>& vstage,
                                const std::vector<bool>& in_backward) {
  const size_t n = ops.size();
  std::vector<std::vector<int>> producers(n), readers(n);
  std::unordered_map<std::string_view, int> last_writer;
  for (size_t i = 0; i < n; ++i) {
    ops[i].ForEachInput([&](const std::string& v) {
      auto it = last_writer.find(v);
      if (it == last_writer.end()) return;
      producers[i].push_back(it->second);
      readers[it->second].push_back(static_cast<int>(i));
    });
    ops[i].ForEachOutput([&](const std::string& v) { last_writer[v] = static_cast<int>(i); });
  }
  std::vector<bool> w(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (!in_backward[i]) continue;
    if (ops[i].role == OpRole::kCommunication) {
      bool from_w = false, only_w = true;
      for (int p : producers[i]) {
        if (!in_backward[p]) continue;
        from_w = from_w || w[p];
        only_w = only_w && w[p];
      }
      w[i] = from_w && only_w;
    } else {
      w[i] = ops[i].weight_grad;
    }
  }
  for (size_t i = n; i-- > 0;) {
    if (!w[i]) continue;
    for (int r : readers[i]) {
      if (ops[r].role == OpRole::kOptimize) continue;
      if (!w[r] || vstage[r] != vstage[i]) {
        w[i] = false;
        break;
      }
    }
  }
  return w;
}

// Order of a stage's programs within one micro-batch (the optimizer runs once, last).
int KindOrder(const std::string& kind) {
  if (kind == kForwardKind) return 0;
  if (kind == kBackwardKind || kind == kBackwardInputKind) return 1;
  if (kind == kBackwardWeightKind) return 2;
  return 3;
}

class SplitProgramPass : public Pass {
 public:
  std::string_view name() const override { return "split-program"; }
  std::string_view description() const override {
    return "Splits the single program into stage<N>_<kind> programs, one per virtual "
           "pipeline stage (ops' stage and chunk, in model order) and kind: forward, backward "
           "(or backward_input and backward_weight with split-backward=true, from the "
           "weight_grad marks) and optimizer. Records each program's inputs, outputs and the "
           "vars a later job of the same micro-batch needs.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.programs().empty()) return FailedPrecondition("the module has no program");
    if (!module.main_program().info().kind.empty()) return false;  // already split
    if (module.programs().size() != 1)
      return FailedPrecondition("split-program expects one program, the module has ",
                                module.programs().size());
    const Program& main = module.main_program();
    const auto& ops = main.ops();

    // Virtual stages in model order.
    std::map<std::pair<int, int>, int> virtual_stage;
    auto place = [&](const Op& op) {
      virtual_stage.try_emplace({op.stage, op.chunk}, static_cast<int>(virtual_stage.size()));
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].stage < 0)
        return FailedPrecondition("op ", i, " (", ops[i].type, ") has no pipeline stage; ",
                                  "place every op before split-program");
      if (ops[i].role == OpRole::kForward || ops[i].role == OpRole::kLoss) place(ops[i]);
    }
    for (const Op& op : ops) place(op);

    // Each op's program. Communication ops go with the work around them: a forward
    // all-reduce with the forward, a gradient all-reduce with the backward.
    std::vector<int> op_vstage(ops.size());
    std::vector<bool> in_backward(ops.size(), false);
    std::vector<std::string> op_kind(ops.size());
    std::map<std::pair<int, int>, std::string> last_kind;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      op_vstage[i] = virtual_stage.at({op.stage, op.chunk});
      std::string kind;
      switch (op.role) {
        case OpRole::kBackward:
          kind = kBackwardKind;
          break;
        case OpRole::kOptimize:
          kind = kOptimizerKind;
          break;
        case OpRole::kCommunication: {
          auto it = last_kind.find({op.stage, op.chunk});
          kind = it == last_kind.end() ? kForwardKind : it->second;
          break;
        }
        default:
          kind = kForwardKind;
          break;
      }
      last_kind[{op.stage, op.chunk}] = kind;
      in_backward[i] = kind == kBackwardKind;
      op_kind[i] = std::move(kind);
    }
    if (split_backward) {
      std::vector<bool> weight = WeightGradOps(ops, op_vstage, in_backward);
      for (size_t i = 0; i < ops.size(); ++i)
        if (in_backward[i]) op_kind[i] = weight[i] ? kBackwardWeightKind : kBackwardInputKind;
    }

    std::map<std::pair<int, std::string>, Program> programs;
    std::vector<std::pair<int, std::string>> op_program(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      const int vs = op_vstage[i];
      const std::string& kind = op_kind[i];
      auto [it, fresh] = programs.try_emplace({vs, kind});
      if (fresh) {
        it->second.set_name(pipeline::StageProgramName(vs, kind));
        it->second.info().kind = kind;
        it->second.info().stage = op.stage;
        it->second.info().chunk = op.chunk;
      }
      it->second.AddOp(op);
      op_program[i] = {vs, kind};
    }

    // Where each var is defined and who reads it.
    std::map<std::string, std::pair<int, std::string>> defined_in;
    std::map<std::string, std::set<std::pair<int, std::string>>> read_by;
    for (size_t i = 0; i < ops.size(); ++i) {
      ops[i].ForEachOutput([&](const std::string& v) { defined_in.try_emplace(v, op_program[i]); });
      ops[i].ForEachInput([&](const std::string& v) { read_by[v].insert(op_program[i]); });
    }
    for (auto& [key, program] : programs) {
      ProgramInfo& info = program.info();
      std::set<std::string> used, defined, inputs, outputs, keep;
      for (const Op& op : program.ops()) {
        op.ForEachInput([&](const std::string& v) {
          used.insert(v);
          if (!defined.count(v)) inputs.insert(v);
        });
        op.ForEachOutput([&](const std::string& v) {
          used.insert(v);
          defined.insert(v);
        });
      }
      for (const std::string& v : defined)
        for (const auto& reader : read_by[v])
          if (reader != key) outputs.insert(v);
      // Vars this program holds that a later program of the same stage and micro-batch
      // reads: activations kept from forward to backward, output grads kept for W.
      for (const std::string& v : used) {
        const Var* var = main.FindVar(v);
        if (var && var->persistable) continue;
        for (const auto& reader : read_by[v])
          if (reader.first == key.first && KindOrder(reader.second) > KindOrder(key.second) &&
              reader.second != kOptimizerKind)
            keep.insert(v);
      }
      for (const std::string& v : used)
        if (const Var* var = main.FindVar(v)) program.AddVar(*var);
      info.inputs.assign(inputs.begin(), inputs.end());
      info.outputs.assign(outputs.begin(), outputs.end());
      info.keep_alive.assign(keep.begin(), keep.end());
    }

    std::vector<std::pair<int, std::string>> order;
    for (auto& [key, program] : programs) order.push_back(key);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return std::pair(a.first, KindOrder(a.second)) < std::pair(b.first, KindOrder(b.second));
    });
    std::vector<Program> split;
    for (const auto& key : order) split.push_back(std::move(programs.at(key)));
    module.programs() = std::move(split);
    context.AddStatistic("programs", static_cast<int64_t>(order.size()));
    context.AddStatistic("virtual-stages", static_cast<int64_t>(virtual_stage.size()));
    return true;
  }

 private:
  Option<bool> split_backward{this, "split-backward",
                              "split each backward into backward_input and backward_weight "
                              "programs (for zero-bubble schedules)",
                              false};
};

}  // namespace

PW_REGISTER_PASS(SplitProgramPass)

}  // namespace pw
