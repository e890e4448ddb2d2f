#include "tools/tune_shapes.h"

namespace pw::tools {
namespace {

constexpr int kMaxChunksPerRank = 8;

std::string Label(const models::ModelRecipe& r) {
  std::string label;
  if (r.model == "gpt")
    label = StrCat("vpp ", r.gpt.vpp, r.gpt.placement == StagePlacement::kV ? " v" : "", ", ");
  return label + StrCat("micro-batch size ", r.micro_batch_size());
}

// " --stage-layers 3,4,4,3" when the layers were placed unevenly.
std::string StageLayersArg(const models::GptConfig& c) {
  if (c.stage_layers.empty()) return "";
  std::string out = " --stage-layers ";
  for (size_t i = 0; i < c.stage_layers.size(); ++i) out += StrCat(i ? "," : "", c.stage_layers[i]);
  return out;
}

}  // namespace

std::string BuildModelArgs(const models::ModelRecipe& r) {
  if (r.model == "unet") {
    const models::UnetConfig& c = r.unet;
    return StrCat("unet --layers ", c.layers, " --hidden ", c.hidden, " --micro-batch-size ",
                  c.micro_batch_size, " --pp ", c.pp, " --seq ", c.seq, " --vocab ", c.vocab,
                  " --seed ", c.seed);
  }
  const models::GptConfig& c = r.gpt;
  return StrCat("gpt --layers ", c.layers, " --hidden ", c.hidden, " --heads ", c.heads, " --ffn ",
                c.ffn, " --seq ", c.seq, " --vocab ", c.vocab, " --micro-batch-size ",
                c.micro_batch_size, " --mp ", c.mp, " --pp ", c.pp, " --vpp ", c.vpp,
                " --placement ", StagePlacementName(c.placement), " --vocab-parallel ",
                c.vocab_parallel ? "on" : "off", " --seed ", c.seed, StageLayersArg(c),
                c.unfused_attention ? " --attention unfused" : "");
}

std::vector<ShapeChoice> ShapeChoices(const models::ModelRecipe& built, int64_t global_batch,
                                      int dp) {
  // Stagings: (vpp, placement) pairs the builder accepts for this model.
  std::vector<models::ModelRecipe> stagings = {built};
  // Uneven stages were chosen for this vpp: other stagings would need lists of their own.
  if (built.model == "gpt" && built.gpt.stage_layers.empty()) {
    const models::GptConfig& c = built.gpt;
    const int64_t layers_per_rank = c.pp > 0 && c.layers % c.pp == 0 ? c.layers / c.pp : 0;
    for (int vpp = 1; vpp <= kMaxChunksPerRank && vpp <= layers_per_rank; ++vpp) {
      if (layers_per_rank % vpp != 0) continue;
      for (StagePlacement placement : {StagePlacement::kLoop, StagePlacement::kV}) {
        if (placement == StagePlacement::kV && vpp != 2) continue;
        if (vpp == c.vpp && placement == c.placement) continue;  // as built
        models::ModelRecipe r = built;
        r.gpt.vpp = vpp;
        r.gpt.placement = placement;
        stagings.push_back(r);
      }
    }
  }
  const int pp = built.model == "gpt" ? built.gpt.pp : built.unet.pp;
  std::vector<ShapeChoice> choices;
  auto add = [&](models::ModelRecipe r, int64_t mbs) {
    const int64_t per_replica = global_batch / dp;
    if (mbs < 1 || per_replica % mbs != 0 || per_replica / mbs < pp) return;
    (r.model == "gpt" ? r.gpt.micro_batch_size : r.unet.micro_batch_size) = mbs;
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

}  // namespace pw::tools
