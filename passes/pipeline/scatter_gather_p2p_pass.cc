// scatter-gather-p2p: Megatron's scatter/gather of the tensors a pipeline sends between
// stages (scatter_gather_tensors_in_pipeline, Narayanan et al. 2021, section 4.1). With
// tensor parallelism every mp rank of a stage holds the activation it sends (and the
// gradient it sends back) whole, and each would send all of it over the inter-stage link:
// here each sends only its 1/mp slice (c_split over mp at the end of the program that makes
// the value) and the receiving stage's mp ranks all-gather the slices over mp (c_all_gather
// at the start of the program that reads it), mp times fewer bytes on the link for an
// all-gather on the fast one within the stage. A slice and its all-gather in member order are
// the value's own bits: results are unchanged.
//
// It needs the value whole and the same on every mp rank, as every value between
// tensor-parallel layers is; with sequence parallelism they are slices of the sequence
// already, and the pass changes nothing.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/p2p_vars.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace pw {
namespace {

bool IsForward(const Program& p) { return p.info().kind == "forward"; }
bool IsBackward(const Program& p) {
  const std::string& k = p.info().kind;
  return k == "backward" || k == "backward_input" || k == "backward_weight";
}

// The first axis that divides by mp: the one the slices cut (axis 0 keeps each slice
// contiguous; a micro-batch of 1 cuts the sequence).
int SliceAxis(const Shape& shape, int mp) {
  for (size_t a = 0; a < shape.size(); ++a)
    if (shape[a] >= mp && shape[a] % mp == 0) return static_cast<int>(a);
  return -1;
}

Op MpCollective(const std::string& type, const std::string& in, const std::string& out, int axis,
                int mp, const Op& near) {
  Op op;
  op.type = type;
  op.role = near.role;
  op.stage = near.stage;
  op.chunk = near.chunk;
  op.SetInput("X", {in}).SetOutput("Out", {out});
  op.SetAttr("group", std::string("mp"));
  op.SetAttr("axis", int64_t{axis});
  op.SetAttr("nranks", int64_t{mp});
  return op;
}

class ScatterGatherP2PPass : public Pass {
 public:
  std::string_view name() const override { return "scatter-gather-p2p"; }
  std::string_view description() const override {
    return "Megatron's scatter/gather of pipeline transfers, after split-program on a "
           "tensor-parallel module: each mp rank sends only its 1/mp slice of a value that "
           "crosses to a stage on another pipeline rank (c_split over mp where it is made) and "
           "the receivers all-gather it over mp before reading it: mp times fewer bytes between "
           "stages, the same bits. Changes nothing at mp 1 or under sequence-parallel (whose "
           "values are slices already).";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    const int mp = module.mesh.mp;
    if (mp < 2) return false;
    if (module.metadata.GetBool("sequence_parallel", false)) {
      context.AddStatistic("sequence-parallel-values-left");
      return false;
    }
    if (module.plan.stage_to_rank.empty())
      return FailedPrecondition(
          "scatter-gather-p2p needs the stages' ranks: run it after split-program and schedule");
    for (const Program& p : module.programs())
      if (!p.info().segment_of.empty() || !p.info().variant_of.empty())
        return FailedPrecondition("scatter-gather-p2p: program '", p.name(),
                                  "' is a segment or variant of another (overlap-1f1b): run "
                                  "scatter-gather-p2p before overlap-1f1b");
    // Per direction: which program on another pipeline rank makes each value a program reads
    // from outside.
    std::map<std::string, std::set<std::string>> cut;       // writer program -> vars
    std::map<std::string, std::set<std::string>> gathered;  // reader program -> vars
    std::map<std::string, int> axes;
    for (bool backward : {false, true}) {
      auto direction = [&](const Program& p) { return backward ? IsBackward(p) : IsForward(p); };
      std::map<std::string, const Program*> writer;
      for (const Program& p : module.programs()) {
        if (!direction(p)) continue;
        for (const Op& op : p.ops())
          op.ForEachOutput([&](const std::string& v) { writer[v] = &p; });
      }
      for (const Program& reader : module.programs()) {
        if (!direction(reader)) continue;
        const int rank = ProgramPipelineRank(module, reader);
        for (const std::string& v : ReadFromOutside(reader)) {
          auto w = writer.find(v);
          const Var* var = reader.FindVar(v);
          if (w == writer.end() || !var || var->persistable ||
              ProgramPipelineRank(module, *w->second) == rank)
            continue;
          const int axis = SliceAxis(var->shape, mp);
          if (axis < 0) {
            context.AddStatistic("values-sent-whole");
            continue;
          }
          axes[v] = axis;
          cut[w->second->name()].insert(v);
          gathered[reader.name()].insert(v);
        }
      }
    }
    if (cut.empty()) return false;
    for (Program& program : module.programs()) {
      auto c = cut.find(program.name());
      auto g = gathered.find(program.name());
      if (c == cut.end() && g == gathered.end()) continue;
      std::vector<Op>& ops = program.ops();
      std::vector<Op> gathers;
      if (g != gathered.end())
        for (const std::string& v : g->second) {
          PW_RETURN_IF_ERROR(DeclareSlice(program, v, axes[v], mp));
          gathers.push_back(
              MpCollective("c_all_gather", SliceName(v), v, axes[v], mp, ops.front()));
          context.AddStatistic("values-gathered");
        }
      ops.insert(ops.begin(), gathers.begin(), gathers.end());
      if (c != cut.end())
        for (const std::string& v : c->second) {
          PW_RETURN_IF_ERROR(DeclareSlice(program, v, axes[v], mp));
          ops.push_back(MpCollective("c_split", v, SliceName(v), axes[v], mp, ops.back()));
          context.AddStatistic("values-sliced");
        }
      std::vector<std::string>& inputs = program.info().inputs;
      std::vector<std::string>& outputs = program.info().outputs;
      if (g != gathered.end())
        for (std::string& v : inputs)
          if (g->second.count(v)) v = SliceName(v);
      if (c != cut.end())
        for (const std::string& v : c->second) outputs.push_back(SliceName(v));
    }
    return true;
  }

 private:
  static std::string SliceName(const std::string& v) { return v + "@mp_slice"; }

  static Status DeclareSlice(Program& program, const std::string& v, int axis, int mp) {
    const Var* whole = program.FindVar(v);
    if (!whole)
      return NotFound("scatter-gather-p2p: '", v, "' is not declared in '", program.name(), "'");
    Var slice = *whole;
    slice.name = SliceName(v);
    slice.shape[axis] /= mp;
    if (!program.AddVar(std::move(slice)))
      return FailedPrecondition("scatter-gather-p2p: program '", program.name(),
                                "' already declares '", SliceName(v), "' (the pass ran twice?)");
    return OkStatus();
  }
};

}  // namespace

PW_REGISTER_PASS(ScatterGatherP2PPass)

}  // namespace pw
