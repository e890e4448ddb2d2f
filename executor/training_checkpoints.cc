#include "executor/training_checkpoints.h"

#include <filesystem>
#include <map>

#include "executor/initializer.h"
#include "executor/sequential_plan.h"
#include "ir/post_validation.h"

namespace pw {

CheckpointManifest RunHeader(const Module& module, int64_t micro_batches,
                             const std::string& data_source, uint64_t data_seed,
                             const std::string& data_file) {
  CheckpointManifest h;
  h.set_format(kCheckpointFormat);
  h.set_module_name(module.name);
  h.set_model_hash(ModelHash(module));
  h.set_dp(module.mesh.dp);
  h.set_pp(module.mesh.pp);
  h.set_mp(module.mesh.mp);
  h.set_vpp(module.mesh.vpp);
  h.set_num_stages(module.plan.empty() ? 1 : module.plan.num_stages);
  h.set_schedule(ScheduleOf(module));
  h.set_micro_batches(micro_batches);
  h.set_data_source(data_source);
  h.set_data_seed(data_seed);
  h.set_data_file(data_file);
  return h;
}

Status CheckCheckpointFits(const CheckpointReader& reader, const Module& module) {
  PW_RETURN_IF_ERROR(CheckSameModel(reader.manifest(), module, reader.manifest_path()));
  // Every piece any rank may hold: each var at each mp index.
  for (const auto& [name, v] : CheckpointedVars(module))
    for (int mp = 0; mp < module.mesh.mp; ++mp)
      PW_RETURN_IF_ERROR(reader.CheckCanRead(PieceOf(ShardForRank(*v, mp))));
  return OkStatus();
}

Status CheckSameData(const CheckpointReader& reader, const CheckpointManifest& header) {
  const CheckpointManifest& m = reader.manifest();
  const std::string where = reader.manifest_path();
  if (m.micro_batches() != header.micro_batches())
    return FailedPrecondition(where, " was trained on ", m.micro_batches(),
                              " micro-batches per step, this run trains on ",
                              header.micro_batches(), ": its data would not continue");
  if (m.data_source() == "fed" || header.data_source() == "fed") return OkStatus();
  if (m.data_source() != header.data_source() || m.data_file() != header.data_file())
    return FailedPrecondition(
        where, " was trained on ", m.data_file().empty() ? m.data_source() : m.data_file(),
        " data, this run reads ",
        header.data_file().empty() ? header.data_source() : header.data_file());
  if (m.data_seed() != header.data_seed())
    return FailedPrecondition(where, " was trained with data seed ", m.data_seed(),
                              ", this run uses ", header.data_seed(),
                              " (drop --seed to continue its data)");
  return OkStatus();
}

bool CheckpointDue(const CheckpointOptions& options, int64_t steps_done, int64_t total_steps) {
  if (options.dir.empty()) return false;
  return steps_done == total_steps || (options.every > 0 && steps_done % options.every == 0);
}

RankVars VarsOfRank(const Interpreter& interp) {
  RankVars r;
  r.rank = interp.rank();
  r.coord = interp.layout().Coord(interp.rank());
  r.stages = StagesOfRank(interp.module(), interp.rank());
  for (const std::string& name : interp.PersistentNames())
    if (interp.FindPersistent(name) && !IsPostValidationVar(name))  // validated when saved
      r.vars.push_back(ShardForRank(interp.lowered().persistent_decls.at(name), r.coord.mp));
  return r;
}

Status RestoreRank(CheckpointReader& reader, const RankVars& rank, const SetVarFn& set) {
  for (const Var& v : rank.vars) {
    StatusOr<Tensor> value = reader.Read(PieceOf(v), rank.rank);
    if (!value.ok()) return value.status().WithContext(StrCat("rank ", rank.rank));
    PW_RETURN_IF_ERROR(set(v.name, std::move(value).value()));
  }
  reader.Release();
  return OkStatus();
}

StatusOr<int64_t> SaveRank(const CheckpointOptions& options, CheckpointManifest header,
                           int64_t step, const RankVars& rank, const GetVarFn& get) {
  header.set_step(step);
  RankCheckpoint piece;
  piece.rank = rank.rank;
  piece.coord = rank.coord;
  piece.stages = rank.stages;
  for (const Var& v : rank.vars) {
    PW_ASSIGN_OR_RETURN(Tensor t, get(v.name));
    piece.vars.emplace_back(PieceOf(v), std::move(t));
  }
  return WriteRankCheckpoint(options.dir, header, piece, options.keep);
}

}  // namespace pw
