#include "search/tune_shapes.h"

#include <algorithm>

#include "models/parallel_blocks.h"

namespace pw::search {
namespace {

constexpr int kMaxChunksPerRank = 8;

// The transformers (gpt, llama) place layers on pipeline chunks; the U-Net does not.
bool IsTransformer(const models::ModelRecipe& r) { return r.model == "gpt" || r.model == "llama"; }

models::Staging StagingOf(const models::ModelRecipe& r) {
  if (r.model == "gpt")
    return {r.gpt.layers, r.gpt.pp, r.gpt.vpp, r.gpt.placement, r.gpt.stage_layers};
  if (r.model == "llama")
    return {r.llama.layers, r.llama.pp, r.llama.vpp, r.llama.placement, r.llama.stage_layers};
  return {r.unet.layers, r.unet.pp, 1, StagePlacement::kLoop, {}};
}

void SetChunks(models::ModelRecipe& r, int vpp, StagePlacement placement) {
  if (r.model == "gpt") {
    r.gpt.vpp = vpp;
    r.gpt.placement = placement;
  } else if (r.model == "llama") {
    r.llama.vpp = vpp;
    r.llama.placement = placement;
  }
}

std::string Label(const models::ModelRecipe& r) {
  std::string label;
  if (IsTransformer(r)) {
    const models::Staging staging = StagingOf(r);
    label = StrCat("vpp ", staging.vpp, staging.placement == StagePlacement::kV ? " v" : "", ", ");
  }
  return label + StrCat("micro-batch size ", r.micro_batch_size());
}

// " --stage-layers 3,4,4,3" when the layers were placed unevenly.
std::string StageLayersArg(const std::vector<int64_t>& stage_layers) {
  if (stage_layers.empty()) return "";
  std::string out = " --stage-layers ";
  for (size_t i = 0; i < stage_layers.size(); ++i) out += StrCat(i ? "," : "", stage_layers[i]);
  return out;
}

// The flags from --micro-batch-size on, which gpt and llama share.
template <typename Config>
std::string ParallelArgs(const Config& c) {
  return StrCat(" --micro-batch-size ", c.micro_batch_size, c.dp > 1 ? StrCat(" --dp ", c.dp) : "",
                " --mp ", c.mp, " --pp ", c.pp, " --vpp ", c.vpp, " --placement ",
                StagePlacementName(c.placement), " --vocab-parallel ",
                c.vocab_parallel ? "on" : "off", " --seed ", c.seed,
                StageLayersArg(c.stage_layers));
}

// The mesh of a transformer recipe, read and set alike for gpt and llama.
template <typename Config>
void SetMesh(Config& c, int dp, int pp, int mp) {
  c.dp = dp;
  c.pp = pp;
  c.mp = mp;
  c.vpp = 1;
  c.placement = StagePlacement::kLoop;
  c.stage_layers.clear();
}

}  // namespace

std::string BuildModelArgs(const models::ModelRecipe& r) {
  if (r.model == "unet") {
    const models::UnetConfig& c = r.unet;
    return StrCat("unet --layers ", c.layers, " --hidden ", c.hidden, " --micro-batch-size ",
                  c.micro_batch_size, " --pp ", c.pp, " --seq ", c.seq, " --vocab ", c.vocab,
                  " --seed ", c.seed);
  }
  if (r.model == "llama") {
    const models::LlamaConfig& c = r.llama;
    return StrCat("llama --layers ", c.layers, " --hidden ", c.hidden, " --heads ", c.heads,
                  " --kv-heads ", c.kv_heads, " --ffn ", c.ffn, " --seq ", c.seq, " --vocab ",
                  c.vocab, " --rope-theta ", c.rope_theta, ParallelArgs(c));
  }
  const models::GptConfig& c = r.gpt;
  return StrCat("gpt --layers ", c.layers, " --hidden ", c.hidden, " --heads ", c.heads, " --ffn ",
                c.ffn, " --seq ", c.seq, " --vocab ", c.vocab, ParallelArgs(c),
                c.unfused_attention ? " --attention unfused" : "");
}

std::vector<ShapeChoice> ShapeChoices(const models::ModelRecipe& built, int64_t global_batch,
                                      int dp) {
  // Stagings: (vpp, placement) pairs the builder accepts for this model.
  std::vector<models::ModelRecipe> stagings = {built};
  const models::Staging staging = StagingOf(built);
  // Uneven stages were chosen for this vpp: other stagings would need lists of their own.
  if (IsTransformer(built) && staging.stage_layers.empty()) {
    const int64_t layers_per_rank =
        staging.pp > 0 && staging.layers % staging.pp == 0 ? staging.layers / staging.pp : 0;
    for (int vpp = 1; vpp <= kMaxChunksPerRank && vpp <= layers_per_rank; ++vpp) {
      if (layers_per_rank % vpp != 0) continue;
      for (StagePlacement placement : {StagePlacement::kLoop, StagePlacement::kV}) {
        if (placement == StagePlacement::kV && vpp != 2) continue;
        if (vpp == staging.vpp && placement == staging.placement) continue;  // as built
        models::ModelRecipe r = built;
        SetChunks(r, vpp, placement);
        stagings.push_back(r);
      }
    }
  }
  const int pp = staging.pp;
  std::vector<ShapeChoice> choices;
  auto add = [&](models::ModelRecipe r, int64_t mbs) {
    const int64_t per_replica = global_batch / dp;
    if (mbs < 1 || per_replica % mbs != 0 || per_replica / mbs < pp) return;
    r.set_micro_batch_size(mbs);
    ShapeChoice choice;
    choice.micro_batches = static_cast<int>(per_replica / mbs);
    choice.label = Label(r);
    choice.build_model = BuildModelArgs(r);
    choice.recipe = std::move(r);
    choices.push_back(std::move(choice));
  };
  for (size_t i = 0; i < stagings.size(); ++i)
    for (int64_t mbs = 1; mbs * pp <= global_batch / dp; ++mbs)
      if (i > 0 || mbs != built.micro_batch_size()) add(stagings[i], mbs);
  return choices;
}

StatusOr<ShapeRanking> RankShapes(const models::ModelRecipe& recipe, const Module& built,
                                  int micro_batches,
                                  std::shared_ptr<const cost::Estimator> estimator,
                                  int64_t global_batch) {
  ShapeRanking ranking;
  PW_ASSIGN_OR_RETURN(ranking.as_built, BestActionLevelKind(built, estimator, micro_batches));
  for (ShapeChoice& choice : ShapeChoices(recipe, global_batch, built.mesh.dp)) {
    StatusOr<Module> module = models::BuildFromRecipe(choice.recipe);
    if (!module.ok()) continue;  // a shape the builder refuses
    module->mesh.dp = built.mesh.dp;
    StatusOr<ActionLevelBest> best = BestActionLevelKind(*module, estimator, choice.micro_batches);
    if (!best.ok()) continue;
    ranking.shapes.push_back(RankedShape{std::move(choice), *best, std::move(*module)});
  }
  std::stable_sort(ranking.shapes.begin(), ranking.shapes.end(),
                   [](const RankedShape& a, const RankedShape& b) {
                     return a.best.makespan_ms < b.best.makespan_ms;
                   });
  return ranking;
}

std::vector<ShapeChoice> MeshSplits(const models::ModelRecipe& built, int64_t global_batch) {
  std::vector<ShapeChoice> choices;
  if (!IsTransformer(built)) return choices;
  const bool gpt = built.model == "gpt";
  const int built_dp = gpt ? built.gpt.dp : built.llama.dp;
  const int built_pp = gpt ? built.gpt.pp : built.llama.pp;
  const int built_mp = gpt ? built.gpt.mp : built.llama.mp;
  const int64_t layers = gpt ? built.gpt.layers : built.llama.layers;
  const int ranks = built_dp * built_pp * built_mp;
  const int64_t b = built.micro_batch_size();
  for (int dp = 1; dp <= ranks; ++dp) {
    if (ranks % dp) continue;
    for (int pp = 1; pp <= ranks / dp; ++pp) {
      if ((ranks / dp) % pp || layers % pp) continue;
      const int mp = ranks / dp / pp;
      if (dp == built_dp && pp == built_pp && mp == built_mp) continue;
      if (global_batch % (int64_t{dp} * b) || global_batch / (int64_t{dp} * b) < pp) continue;
      models::ModelRecipe r = built;
      if (gpt) {
        SetMesh(r.gpt, dp, pp, mp);
        if (!models::ValidateGptConfig(r.gpt).ok()) continue;
      } else {
        SetMesh(r.llama, dp, pp, mp);
        if (!models::ValidateLlamaConfig(r.llama).ok()) continue;
      }
      ShapeChoice choice;
      choice.micro_batches = static_cast<int>(global_batch / (int64_t{dp} * b));
      choice.label = StrCat("dp ", dp, " x pp ", pp, " x mp ", mp);
      choice.build_model = BuildModelArgs(r);
      choice.recipe = std::move(r);
      choices.push_back(std::move(choice));
    }
  }
  return choices;
}

}  // namespace pw::search
