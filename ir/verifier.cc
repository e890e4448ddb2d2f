#include "ir/verifier.h"

#include <algorithm>
#include <span>
#include <string_view>
#include <unordered_set>

#include "ir/event_ref.h"
#include "ir/graph.h"
#include "ir/limits.h"
#include "ir/p2p_vars.h"
#include "ir/plan_actions.h"
#include "ir/stream_type.h"
#include "ir/tensor_size.h"
#include "ir/var_refs.h"

namespace pw {

namespace {

std::string SlotNames(const std::vector<SlotDef>& slots) {
  std::string names;
  for (const SlotDef& s : slots) names += (names.empty() ? "" : ", ") + s.name;
  return names.empty() ? "none" : names;
}

std::string TypeString(DataType dtype, const Shape& shape) {
  return std::string(DataTypeName(dtype)) + ShapeToString(shape);
}

// Checks one op's slots and attributes against its definition.
Status CheckSignature(const Op& op, const OpDef& def) {
  auto check_slots = [&](const std::vector<Slot>& slots, const std::vector<SlotDef>& defs,
                         const char* what) -> Status {
    for (size_t k = 0; k < slots.size(); ++k) {
      const Slot& slot = slots[k];
      for (size_t earlier = 0; earlier < k; ++earlier)
        if (slots[earlier].name == slot.name)
          return InvalidArgument(what, " slot '", slot.name, "' is given twice");
      const SlotDef* sd = nullptr;
      for (const SlotDef& d : defs)
        if (d.name == slot.name) sd = &d;
      if (!sd)
        return InvalidArgument(what, " slot '", slot.name, "' is not defined for ", op.type, " (",
                               what, "s: ", SlotNames(defs), ")");
      if (!sd->duplicable && slot.vars.size() > 1)
        return InvalidArgument(what, " slot '", slot.name, "' takes one var, got ",
                               slot.vars.size());
    }
    for (const SlotDef& d : defs) {
      if (d.optional) continue;
      bool present = false;
      for (const Slot& slot : slots) present |= slot.name == d.name && !slot.vars.empty();
      if (!present) return InvalidArgument("required ", what, " slot '", d.name, "' is missing");
    }
    return OkStatus();
  };
  PW_RETURN_IF_ERROR(check_slots(op.inputs, def.inputs, "input"));
  PW_RETURN_IF_ERROR(check_slots(op.outputs, def.outputs, "output"));

  for (const auto& [name, value] : op.attrs.items()) {
    const AttrDef* ad = def.FindAttr(name);
    if (!ad) return InvalidArgument("attribute '", name, "' is not defined for ", op.type);
    AttrType got = TypeOf(value);
    bool int_as_float = ad->type == AttrType::kFloat && got == AttrType::kInt;
    if (got != ad->type && !int_as_float)
      return InvalidArgument("attribute '", name, "' must be ", AttrTypeName(ad->type), ", got ",
                             AttrTypeName(got));
  }
  for (const AttrDef& ad : def.attrs) {
    if (!ad.default_value && !op.attrs.Has(ad.name))
      return InvalidArgument("required attribute '", ad.name, "' is missing");
  }
  return OkStatus();
}

// The scheduling fields every consumer reads: a known stream type and readable events.
Status CheckScheduling(const Op& op) {
  if (!op.stream.empty()) PW_RETURN_IF_ERROR(ParseStreamType(op.stream).status());
  for (const auto* list : {&op.wait_events, &op.record_events})
    for (const std::string& e : *list) PW_RETURN_IF_ERROR(ParseEventRef(e).status());
  return OkStatus();
}

// Every declared var fits the size limits, so no count of its elements or bytes overflows.
Status CheckVarSizes(const Program& program) {
  for (const Var& v : program.vars())
    if (!TensorFits(v.dtype, v.shape))
      return InvalidArgument("var '", v.name, "' ", ShapeToString(v.shape), " is too large (",
                             TensorLimitText(), ")");
  return OkStatus();
}

// Every output's declared type must match what the op definition infers.
// `input_ids` / `output_ids` are the op's resolved (declared) var ids in slot order.
Status CheckInferredTypes(const Op& op, const OpDef& def, const Program& program,
                          std::span<const int32_t> input_ids, std::span<const int32_t> output_ids) {
  std::vector<std::vector<TensorType>> inputs(op.inputs.size());
  auto in = input_ids.begin();
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    inputs[i].reserve(op.inputs[i].vars.size());
    for (size_t j = 0; j < op.inputs[i].vars.size(); ++j) {
      const Var& v = program.vars()[*in++];
      inputs[i].push_back(TensorType{v.dtype, v.shape});
    }
  }
  InferContext inferred(op, std::move(inputs));
  if (def.infer) PW_RETURN_IF_ERROR(def.infer(inferred));
  auto out = output_ids.begin();
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    for (size_t j = 0; j < op.outputs[i].vars.size(); ++j) {
      const TensorType& want = inferred.outputs()[i][j];
      const Var* v = &program.vars()[*out++];
      if (want.dtype == DataType::kInvalid) continue;  // the definition leaves it open
      const std::string& name = op.outputs[i].vars[j];
      if (v->dtype != want.dtype || v->shape != want.shape)
        return InvalidArgument("output '", name, "' (slot ", op.outputs[i].name, ") is declared ",
                               TypeString(v->dtype, v->shape), " but ", op.type, " infers ",
                               TypeString(want.dtype, want.shape));
    }
  }
  return OkStatus();
}

// A split{view}'s (or c_split{view}'s) blocks share X's bytes in the executor: neither X
// nor a block may be written after it, or the other would change too (except as an
// in-place shard update: InPlaceShardGather).
Status CheckViewsUnwritten(const Program& program, size_t index) {
  const Op& op = program.ops()[index];
  if ((op.type != "split" && op.type != "c_split") || !op.attrs.GetBool("view", false))
    return OkStatus();
  if (InPlaceShardGather(program, index)) return OkStatus();
  std::unordered_set<std::string> shared;
  op.ForEachInput([&](const std::string& v) { shared.insert(v); });
  op.ForEachOutput([&](const std::string& v) { shared.insert(v); });
  auto write =
      FirstWriteAfter(program, index, [&](const std::string& v) { return shared.count(v); });
  if (!write) return OkStatus();
  const auto& [k, v] = *write;
  return InvalidArgument("op ", k, " (", program.ops()[k].type, ") writes '", v,
                         "', which shares its bytes with this split{view}: drop view");
}

Status CheckProgram(const Program& program, const OpRegistry& registry,
                    const std::unordered_set<std::string>* external_inputs) {
  const auto& ops = program.ops();
  PW_RETURN_IF_ERROR(CheckVarSizes(program));
  const VarRefs refs(program);

  if (auto cycle = FindDefUseCycle(program, refs)) {
    std::string path;
    for (size_t i : *cycle) path += StrCat("op ", i, " (", ops[i].type, ") -> ");
    path += StrCat("op ", cycle->front(), " (", ops[cycle->front()].type, ")");
    return InvalidArgument("dependency cycle: ", path);
  }

  // Which op first writes each var, to tell a use before definition from an input.
  constexpr size_t kNever = SIZE_MAX;
  std::vector<size_t> first_writer(refs.num_ids(), kNever);
  for (size_t i = 0; i < ops.size(); ++i)
    for (int32_t v : refs.outputs(i))
      if (first_writer[v] == kNever) first_writer[v] = i;

  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    auto fail = [&](const Status& s) {
      return s.WithContext(StrCat("op ", i, " (", op.type, ")"));
    };
    const OpDef* def = registry.Find(op.type);
    if (!def) return fail(InvalidArgument("unknown op type '", op.type, "'"));
    if (Status s = CheckSignature(op, *def); !s.ok()) return fail(s);
    if (Status s = CheckScheduling(op); !s.ok()) return fail(s);

    auto ids = refs.inputs(i).begin();
    for (const Slot& slot : op.inputs) {
      for (const std::string& name : slot.vars) {
        int32_t id = *ids++;
        if (!refs.declared(id))
          return fail(InvalidArgument("input '", name, "' (slot ", slot.name, ") is not declared"));
        const Var& v = program.vars()[id];
        size_t writer = first_writer[id];
        if (writer != kNever && writer > i && !v.persistable)
          return fail(InvalidArgument("input '", name, "' (slot ", slot.name,
                                      ") is used before it is defined (by op ", writer, ")"));
        bool never_written = writer == kNever || writer == i;
        if (never_written && !v.persistable && external_inputs && !external_inputs->count(name))
          return fail(InvalidArgument("input '", name, "' (slot ", slot.name,
                                      ") is never defined: it is not a parameter, a fed input "
                                      "or an input of this program"));
      }
    }
    ids = refs.outputs(i).begin();
    for (const Slot& slot : op.outputs) {
      for (const std::string& name : slot.vars) {
        if (!refs.declared(*ids++))
          return fail(
              InvalidArgument("output '", name, "' (slot ", slot.name, ") is not declared"));
      }
    }
    if (Status s = CheckInferredTypes(op, *def, program, refs.inputs(i), refs.outputs(i)); !s.ok())
      return fail(s);
    if (Status s = CheckViewsUnwritten(program, i); !s.ok()) return fail(s);
  }
  return OkStatus();
}

// The program kind a job of `kind` runs ("" for jobs that run none of their own).
std::string_view ProgramKindOf(JobKind kind) {
  switch (kind) {
    case JobKind::kForward:
      return "forward";
    case JobKind::kBackward:
      return "backward";
    case JobKind::kBackwardInput:
      return "backward_input";
    case JobKind::kBackwardWeight:
      return "backward_weight";
    case JobKind::kOptimizer:
      return "optimizer";
    default:
      return "";
  }
}

// One job of pipeline rank `rank`, at every level: it names a program that exists and is
// of its kind, its stage, micro-batch and peer are in range, its sub-jobs have the shape
// ir/plan_actions.h describes and its events are readable.
Status VerifyJob(const Module& module, int rank, const Job& job) {
  const Plan& plan = module.plan;
  if (job.kind == JobKind::kUnknown ||
      static_cast<int>(job.kind) > static_cast<int>(JobKind::kBatchP2P))
    return InvalidArgument("job of unknown kind ", static_cast<int>(job.kind));
  const std::string name = JobToString(job);
  if (!job.program.empty()) {
    const Program* program = module.FindProgram(job.program);
    if (!program) return InvalidArgument("program '", job.program, "' does not exist");
    const std::string& kind = program->info().kind;
    // A send/recv names the program whose values it moves; a compute job runs its own kind.
    const std::string_view want = ProgramKindOf(job.kind);
    if (!kind.empty() && !want.empty() && kind != want)
      return InvalidArgument(name, ": runs program '", job.program, "' of kind ", kind);
  }
  PW_RETURN_IF_ERROR(CheckSubJobs(job));
  const bool fused = job.kind == JobKind::kOverlapFB || job.kind == JobKind::kBatchP2P;
  if (!fused) {
    if (job.stage < 0 || job.stage >= plan.num_stages)
      return InvalidArgument(name, ": stage ", job.stage, " is outside [0, ", plan.num_stages, ")");
    bool step_level = job.kind == JobKind::kOptimizer;
    if (!step_level && (job.micro_batch < 0 || job.micro_batch >= plan.num_micro_batches))
      return InvalidArgument(name, ": micro-batch ", job.micro_batch, " is outside [0, ",
                             plan.num_micro_batches, ")");
  }
  if (IsP2pJob(job.kind) && (job.peer < 0 || job.peer >= module.mesh.pp || job.peer == rank))
    return InvalidArgument(name, ": peer ", job.peer,
                           " is not another pipeline rank (pp=", module.mesh.pp, ")");
  if (!job.record_events.empty() && !IsP2pJob(job.kind))
    return InvalidArgument(name,
                           ": only send/recv jobs record events (put them on the program's ops)");
  if (!job.wait_events.empty() && !IsP2pJob(job.kind) && job.program.empty())
    return InvalidArgument(name,
                           ": a job that runs no program of its own waits on no events (put "
                           "them on its sub-jobs)");
  for (const auto* list : {&job.wait_events, &job.record_events})
    for (const std::string& e : *list) PW_RETURN_IF_ERROR(ParseEventRef(e).status());
  for (size_t k = 0; k < job.sub_jobs.size(); ++k) {
    Status sub = VerifyJob(module, rank, job.sub_jobs[k]);
    if (!sub.ok()) return sub.WithContext(StrCat("sub-job ", k));
  }
  return OkStatus();
}

// The plan as a whole agrees with the mesh: one job list per pipeline rank, stages placed
// on ranks that exist, a micro-batch count within the limits.
Status VerifyPlan(const Module& module) {
  const Plan& plan = module.plan;
  if (plan.empty()) return OkStatus();
  const int pp = module.mesh.pp;
  if (plan.num_micro_batches < 1 || plan.num_micro_batches > kMaxMicroBatches)
    return InvalidArgument("plan runs ", plan.num_micro_batches, " micro-batches (1 to ",
                           kMaxMicroBatches, ")");
  if (plan.num_stages < 1) return InvalidArgument("plan has ", plan.num_stages, " stages");
  if (static_cast<int>(plan.ranks.size()) != pp)
    return InvalidArgument("plan has job lists for ", plan.ranks.size(),
                           " pipeline ranks but the mesh has pp=", pp);
  std::vector<bool> seen(pp, false);
  for (const RankPlan& rp : plan.ranks) {
    if (rp.rank < 0 || rp.rank >= pp || seen[rp.rank])
      return InvalidArgument("plan: pipeline rank ", rp.rank, " is outside [0, ", pp,
                             ") or has two job lists");
    seen[rp.rank] = true;
  }
  if (!plan.stage_to_rank.empty() && static_cast<int>(plan.stage_to_rank.size()) != plan.num_stages)
    return InvalidArgument("plan places ", plan.stage_to_rank.size(), " stages but has ",
                           plan.num_stages);
  for (size_t stage = 0; stage < plan.stage_to_rank.size(); ++stage)
    if (plan.stage_to_rank[stage] < 0 || plan.stage_to_rank[stage] >= pp)
      return InvalidArgument("plan places stage ", stage, " on pipeline rank ",
                             plan.stage_to_rank[stage], ", outside [0, ", pp, ")");
  for (const RankPlan& rp : plan.ranks) {
    for (size_t j = 0; j < rp.jobs.size(); ++j) {
      Status job = VerifyJob(module, rp.rank, rp.jobs[j]);
      if (!job.ok()) return job.WithContext(StrCat("plan of rank ", rp.rank, ", job ", j));
    }
  }
  return OkStatus();
}

}  // namespace

Status VerifyProgram(const Program& program, const OpRegistry& registry) {
  return CheckProgram(program, registry, nullptr)
      .WithContext(StrCat("program '", program.name(), "'"));
}

Status VerifyModule(const Module& module, const OpRegistry& registry) {
  if (module.programs().empty()) return InvalidArgument("module has no programs");
  const Mesh& m = module.mesh;
  if (m.dp < 1 || m.pp < 1 || m.mp < 1 || m.vpp < 1)
    return InvalidArgument("mesh degrees must be at least 1 (dp=", m.dp, " pp=", m.pp, " mp=", m.mp,
                           " vpp=", m.vpp, ")");
  int64_t product = 1;
  for (int64_t degree : {m.dp, m.pp, m.mp, m.vpp})
    product = std::min(product * degree, kMaxWorldSize + 1);  // both factors <= 2^31
  if (product > kMaxWorldSize)
    return InvalidArgument("mesh dp=", m.dp, " pp=", m.pp, " mp=", m.mp, " vpp=", m.vpp,
                           " is too large (at most ", kMaxWorldSize, " ranks and chunks)");

  // Fed inputs (metadata "inputs") plus each program's recorded inputs may be read
  // without being written.
  std::unordered_set<std::string> fed;
  bool know_inputs = false;
  if (const Attribute* a = module.metadata.Find("inputs")) {
    if (const auto* names = std::get_if<std::vector<std::string>>(a)) {
      fed.insert(names->begin(), names->end());
      know_inputs = true;
    }
  }
  for (const Program& program : module.programs()) {
    std::unordered_set<std::string> external = fed;
    external.insert(program.info().inputs.begin(), program.info().inputs.end());
    bool checked = know_inputs || !program.info().kind.empty();
    PW_RETURN_IF_ERROR(CheckProgram(program, registry, checked ? &external : nullptr)
                           .WithContext(StrCat("program '", program.name(), "'")));
  }
  PW_RETURN_IF_ERROR(CheckModuleBytes(module));

  return VerifyPlan(module);
}

std::optional<size_t> InPlaceShardGather(const Program& program, size_t index) {
  const Op& split = program.ops()[index];
  const Var* param = program.FindVar(split.Input("X"));
  if (split.type != "c_split" || !param || !param->persistable) return std::nullopt;
  const std::string &whole = split.Input("X"), &rows = split.Output("Out");
  std::optional<size_t> gathered;
  for (size_t k = index + 1; k < program.ops().size(); ++k) {
    const Op& op = program.ops()[k];
    bool touches_whole = false;
    op.ForEachInput([&](const std::string& v) { touches_whole = touches_whole || v == whole; });
    op.ForEachOutput([&](const std::string& v) { touches_whole = touches_whole || v == whole; });
    if (!touches_whole) continue;
    const bool gather = op.type == "c_all_gather" && op.Input("X") == rows &&
                        op.Output("Out") == whole &&
                        op.attrs.GetString("group") == split.attrs.GetString("group");
    if (!gather || gathered) return std::nullopt;
    gathered = k;
  }
  return gathered;
}

}  // namespace pw
