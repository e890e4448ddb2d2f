#include "models/model_recipe.h"

#include <initializer_list>

namespace pw::models {
namespace {

// Checks that the metadata has every field the model's builder records.
Status RequireFields(const AttrList& meta, const std::string& model,
                     std::initializer_list<const char*> fields) {
  for (const char* field : fields)
    if (!meta.Has(field))
      return FailedPrecondition("the module's metadata records a ", model, " model without its '",
                                field, "'");
  return OkStatus();
}

// The fields RecordParallelLayout wrote (models/model_config.h), and the seed.
template <typename TransformerConfig>
Status ReadParallelLayout(const AttrList& meta, TransformerConfig& c) {
  c.micro_batch_size = meta.GetInt("micro_batch_size");
  c.dp = static_cast<int>(meta.GetInt("dp", 1));
  c.mp = static_cast<int>(meta.GetInt("mp"));
  c.pp = static_cast<int>(meta.GetInt("pp"));
  c.vpp = static_cast<int>(meta.GetInt("vpp"));
  PW_ASSIGN_OR_RETURN(c.placement, ParseStagePlacement(meta.GetString("placement")));
  // Recorded as whether it applied (mp > 1); asking for it at mp 1 changes nothing.
  c.vocab_parallel = meta.GetBool("vocab_parallel") || c.mp == 1;
  c.seed = static_cast<uint64_t>(meta.GetInt("seed"));
  if (meta.Has("stage_layers")) c.stage_layers = meta.GetInts("stage_layers");
  return OkStatus();
}

}  // namespace

StatusOr<ModelRecipe> ReadModelRecipe(const Module& module) {
  const AttrList& meta = module.metadata;
  ModelRecipe recipe;
  recipe.model = meta.GetString(kMetaModel);
  if (recipe.model == "gpt") {
    PW_RETURN_IF_ERROR(
        RequireFields(meta, "gpt",
                      {"layers", "hidden", "heads", "ffn", "seq", "vocab", "micro_batch_size", "mp",
                       "pp", "vpp", "placement", "vocab_parallel", "seed"}));
    GptConfig& c = recipe.gpt;
    c.layers = meta.GetInt("layers");
    c.hidden = meta.GetInt("hidden");
    c.heads = meta.GetInt("heads");
    c.ffn = meta.GetInt("ffn");
    c.seq = meta.GetInt("seq");
    c.vocab = meta.GetInt("vocab");
    PW_RETURN_IF_ERROR(ReadParallelLayout(meta, c));
    c.unfused_attention = meta.Has("attention") && meta.GetString("attention") == "unfused";
    c.dropout = meta.GetFloat("dropout", 0.0);
    c.bias_fusion = meta.GetBool("bias_fusion", false);
  } else if (recipe.model == "llama") {
    PW_RETURN_IF_ERROR(RequireFields(
        meta, "llama",
        {"layers", "hidden", "heads", "kv_heads", "ffn", "seq", "vocab", "rope_theta",
         "micro_batch_size", "mp", "pp", "vpp", "placement", "vocab_parallel", "seed"}));
    LlamaConfig& c = recipe.llama;
    c.layers = meta.GetInt("layers");
    c.hidden = meta.GetInt("hidden");
    c.heads = meta.GetInt("heads");
    c.kv_heads = meta.GetInt("kv_heads");
    c.ffn = meta.GetInt("ffn");
    c.seq = meta.GetInt("seq");
    c.vocab = meta.GetInt("vocab");
    c.rope_theta = meta.GetFloat("rope_theta");
    PW_RETURN_IF_ERROR(ReadParallelLayout(meta, c));
  } else if (recipe.model == "unet") {
    PW_RETURN_IF_ERROR(RequireFields(
        meta, "unet", {"layers", "hidden", "micro_batch_size", "seq", "vocab", "pp", "seed"}));
    UnetConfig& c = recipe.unet;
    c.layers = meta.GetInt("layers");
    c.hidden = meta.GetInt("hidden");
    c.micro_batch_size = meta.GetInt("micro_batch_size");
    c.seq = meta.GetInt("seq");
    c.vocab = meta.GetInt("vocab");
    c.pp = static_cast<int>(meta.GetInt("pp"));
    c.seed = static_cast<uint64_t>(meta.GetInt("seed"));
  } else {
    return FailedPrecondition("module '", module.name,
                              "' records no model it was built from (build it with pipeweave "
                              "build-model)");
  }
  return recipe;
}

StatusOr<Module> BuildFromRecipe(const ModelRecipe& recipe) {
  if (recipe.model == "gpt") return BuildGpt(recipe.gpt);
  if (recipe.model == "llama") return BuildLlama(recipe.llama);
  if (recipe.model == "unet") return BuildUnet(recipe.unet);
  return InvalidArgument("unknown model '", recipe.model, "' (gpt, llama or unet)");
}

}  // namespace pw::models
