// dce: removes ops whose results nobody uses, then vars no op uses.

#include <unordered_set>

#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

// Vars that must survive whatever the ops of one program do with them.
std::unordered_set<std::string> LiveRoots(const Module& module, const Program& program) {
  std::unordered_set<std::string> roots;
  if (const Attribute* loss = module.metadata.Find("loss")) {
    if (const auto* name = std::get_if<std::string>(loss)) {
      roots.insert(*name);
      roots.insert(GradVarName(*name));
    }
  }
  if (const Attribute* inputs = module.metadata.Find("inputs")) {
    if (const auto* names = std::get_if<std::vector<std::string>>(inputs))
      roots.insert(names->begin(), names->end());
    if (const auto* name = std::get_if<std::string>(inputs)) roots.insert(*name);
  }
  const ProgramInfo& info = program.info();
  roots.insert(info.inputs.begin(), info.inputs.end());
  roots.insert(info.outputs.begin(), info.outputs.end());
  roots.insert(info.keep_alive.begin(), info.keep_alive.end());
  // A var another program reads is live here (split modules).
  for (const Program& other : module.programs()) {
    if (&other == &program) continue;
    for (const Op& op : other.ops())
      op.ForEachInput([&](const std::string& in) { roots.insert(in); });
  }
  return roots;
}

// Whether an op must stay whatever its outputs: it updates state, talks to other ops or
// ranks without an output var, or is (the gradient of) the loss.
bool HasEffect(const Op& op, const Program& program, const std::unordered_set<std::string>& roots) {
  if (op.role == OpRole::kOptimize || op.role == OpRole::kLoss) return true;
  if (op.outputs.empty() || !op.record_events.empty() || !op.wait_events.empty()) return true;
  bool effect = false;
  op.ForEachOutput([&](const std::string& out) {
    const Var* v = program.FindVar(out);
    effect = effect || (v && v->persistable) || roots.count(out);
  });
  return effect;
}

class DcePass : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  std::string_view description() const override {
    return "Dead code elimination, in every program: removes ops none of whose outputs a later "
           "op reads, unless they write a persistable var, are loss or optimizer ops, produce "
           "the loss or its gradient, or carry events; then removes vars no op uses, keeping "
           "persistable vars, the module's metadata 'inputs', and vars other programs need.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    bool changed = false;
    for (Program& program : module.programs()) {
      std::unordered_set<std::string> roots = LiveRoots(module, program);
      changed = RemoveDeadOps(program, roots, context) || changed;
      changed = RemoveUnusedVars(program, roots, context) || changed;
    }
    return changed;
  }

 private:
  // One reverse sweep: an op is live when it has an effect or a live op after it reads one
  // of its outputs. Vars are never killed, so in-place updates stay conservative.
  static bool RemoveDeadOps(Program& program, const std::unordered_set<std::string>& roots,
                            PassContext& context) {
    std::vector<Op>& ops = program.ops();
    std::unordered_set<std::string> live = roots;
    std::vector<bool> keep(ops.size());
    for (size_t i = ops.size(); i-- > 0;) {
      bool used = HasEffect(ops[i], program, roots);
      ops[i].ForEachOutput([&](const std::string& out) { used = used || live.count(out); });
      keep[i] = used;
      if (used) ops[i].ForEachInput([&](const std::string& in) { live.insert(in); });
    }
    size_t kept = 0;
    for (size_t i = 0; i < ops.size(); ++i)
      if (keep[i]) {
        if (kept != i) ops[kept] = std::move(ops[i]);  // self-move would empty the op
        ++kept;
      }
    size_t removed = ops.size() - kept;
    ops.resize(kept);
    if (removed) context.AddStatistic("ops-removed", static_cast<int64_t>(removed));
    return removed > 0;
  }

  static bool RemoveUnusedVars(Program& program, const std::unordered_set<std::string>& roots,
                               PassContext& context) {
    std::unordered_set<std::string> used;
    for (const Op& op : program.ops()) {
      op.ForEachInput([&](const std::string& v) { used.insert(v); });
      op.ForEachOutput([&](const std::string& v) { used.insert(v); });
    }
    size_t removed = program.RemoveVarsIf([&](const Var& v) {
      return !v.persistable && !used.count(v.name) && !roots.count(v.name);
    });
    if (removed) context.AddStatistic("vars-removed", static_cast<int64_t>(removed));
    return removed > 0;
  }
};

}  // namespace

PW_REGISTER_PASS(DcePass)

}  // namespace pw
