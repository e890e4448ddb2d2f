// `pipeweave build-model gpt|llama|unet ... -o FILE`: writes a model's forward + loss program.

#include <cstdio>

#include "ir/limits.h"
#include "ir/number.h"
#include "ir/proto_io.h"
#include "ir/verifier.h"
#include "models/gpt.h"
#include "models/llama.h"
#include "models/unet.h"
#include "ops/registry.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace pw::tools {
namespace {

constexpr const char* kUsage =
    "pipeweave build-model gpt --layers L --hidden H --heads A [--ffn F (4H)] --seq S --vocab V\n"
    "           [--micro-batch-size B (1)] [--dp D (1)] [--mp M (1)] [--pp P (1)] [--vpp V (1)]\n"
    "           [--seed N (1)]\n"
    "           [--placement loop|v (loop)] [--vocab-parallel on|off (on)]\n"
    "           [--stage-layers N,N,... (L / (P x V) each)] [--attention fused|unfused (fused)]\n"
    "           [--dropout P (0)] [--bias-fusion on|off (off)] -o FILE\n"
    "       pipeweave build-model llama --layers L --hidden H --heads A --kv-heads G --ffn F\n"
    "           --seq S --vocab V [--rope-theta T (10000)] and the gpt flags from\n"
    "           --micro-batch-size on -o FILE\n"
    "       pipeweave build-model unet --layers L --hidden H [--micro-batch-size B (1)] [--pp P "
    "(1)]\n"
    "           [--seq S (16)] [--vocab V (128)] [--seed N (1)] -o FILE\n"
    "FILE ends in .pbtxt (text) or .pb (binary). --placement v (with --vpp 2) puts model chunks\n"
    "0..P-1 down the ranks and P..2P-1 back up, the V shape zb-v and dualpipe-v schedule.\n"
    "With mp > 1 the embedding rows and LM head columns are sharded over the mp group, with\n"
    "Megatron's parallel cross-entropy (--vocab-parallel off keeps them whole on every rank).\n"
    "--dp D trains D replicas of the pp x mp model (D x P x M ranks): a step's global batch\n"
    "(B x micro-batches x D samples) is shared by the replicas, each its own micro-batches,\n"
    "and the gradient sums are all-reduced over each dp group before the optimizer.\n"
    "--stage-layers gives the layers of each model chunk in order (P x V counts summing to L),\n"
    "e.g. fewer on the first and last stages, which also hold the embeddings and the LM head.\n"
    "--attention unfused builds attention from separate ops (regroup, q.k^T, causal softmax,\n"
    "times v) whose scores go through memory, as 2020-22 frameworks ran it; fused (the\n"
    "default) is one attention op, priced as a flash-style kernel on GPUs.\n"
    "--dropout P applies Megatron's dropout with probability P (0 <= P < 1) to the embeddings,\n"
    "the attention probabilities and the attention and MLP outputs; it needs --attention\n"
    "unfused. Its masks are drawn from the fed input dropout_seed, one per micro-batch.\n"
    "--bias-fusion on builds Megatron's fused bias epilogues (on by default in Megatron-LM):\n"
    "fc1's bias add and gelu as one bias_gelu, the attention projection's and fc2's bias add,\n"
    "dropout and residual add as one bias_dropout_add; same parameters, same training in f32.\n"
    "llama: RMSNorm, SwiGLU (gate and up column-parallel), rotary embeddings (base T) and\n"
    "grouped-query attention with G kv heads (G divides A; split over mp when G >= M, a single\n"
    "one replicated), no biases.";

// Flags of some models only; naming another model's flag is an error.
const char* const kTransformerOnly[] = {
    "heads", "ffn", "dp", "mp", "vpp", "placement", "vocab-parallel", "stage-layers"};
const char* const kLlamaOnly[] = {"kv-heads", "rope-theta"};
const char* const kGptOnly[] = {"attention", "dropout", "bias-fusion"};

// A parallel degree: the mesh's limit, checked before anything is built.
StatusOr<int> GetDegree(const Flags& flags, const std::string& name) {
  PW_ASSIGN_OR_RETURN(int64_t v, flags.GetInt(name, 1, 1, kMaxWorldSize));
  return static_cast<int>(v);
}

// Layers are built one by one: bounded so that a typo cannot exhaust memory.
constexpr int64_t kMaxLayers = 4096;

// "3,4,4,3" -> {3, 4, 4, 3}: each a whole number in [0, kMaxLayers] (the builder says
// what a zero or a wrong sum means).
StatusOr<std::vector<int64_t>> ParseCounts(const std::string& text) {
  std::vector<int64_t> counts;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    StatusOr<int64_t> n = ParseInteger(item, 0, kMaxLayers);
    if (!n.ok())
      return InvalidArgument("flag --stage-layers: '", item,
                             "' is not a layer count; give counts like 3,4,4,3");
    counts.push_back(*n);
    if (comma == std::string::npos) return counts;
    start = comma + 1;
  }
}

// The flags the transformers share beyond their shapes, into a GptConfig or LlamaConfig.
template <typename Config>
Status ParseParallelFlags(const Flags& flags, Config& c) {
  PW_ASSIGN_OR_RETURN(c.micro_batch_size, flags.GetInt("micro-batch-size", 1));
  PW_ASSIGN_OR_RETURN(c.dp, GetDegree(flags, "dp"));
  PW_ASSIGN_OR_RETURN(c.mp, GetDegree(flags, "mp"));
  PW_ASSIGN_OR_RETURN(c.pp, GetDegree(flags, "pp"));
  PW_ASSIGN_OR_RETURN(c.vpp, GetDegree(flags, "vpp"));
  PW_ASSIGN_OR_RETURN(c.placement, ParseStagePlacement(flags.Get("placement", "loop")));
  const std::string vocab_parallel = flags.Get("vocab-parallel", "on");
  if (vocab_parallel != "on" && vocab_parallel != "off")
    return InvalidArgument("flag --vocab-parallel takes on or off, got '", vocab_parallel, "'");
  c.vocab_parallel = vocab_parallel == "on";
  PW_ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed", 1, 0, kInt64Max));
  c.seed = static_cast<uint64_t>(seed);
  if (flags.Has("stage-layers")) {
    PW_ASSIGN_OR_RETURN(c.stage_layers, ParseCounts(flags.Get("stage-layers")));
  }
  return OkStatus();
}

StatusOr<Module> BuildGptFromFlags(const Flags& flags) {
  for (const char* name : kLlamaOnly)
    if (flags.Has(name)) return InvalidArgument("flag --", name, " applies to llama, not gpt");
  models::GptConfig c;
  PW_ASSIGN_OR_RETURN(c.layers, flags.RequireInt("layers", 1, kMaxLayers));
  PW_ASSIGN_OR_RETURN(c.hidden, flags.RequireInt("hidden"));
  PW_ASSIGN_OR_RETURN(c.heads, flags.RequireInt("heads"));
  PW_ASSIGN_OR_RETURN(c.ffn, flags.GetInt("ffn", 4 * c.hidden));
  PW_ASSIGN_OR_RETURN(c.seq, flags.RequireInt("seq"));
  PW_ASSIGN_OR_RETURN(c.vocab, flags.RequireInt("vocab"));
  PW_RETURN_IF_ERROR(ParseParallelFlags(flags, c));
  const std::string attention = flags.Get("attention", "fused");
  if (attention != "fused" && attention != "unfused")
    return InvalidArgument("flag --attention takes fused or unfused, got '", attention, "'");
  c.unfused_attention = attention == "unfused";
  PW_ASSIGN_OR_RETURN(c.dropout, flags.GetDouble("dropout", 0.0, 0.0, 1.0));
  const std::string bias_fusion = flags.Get("bias-fusion", "off");
  if (bias_fusion != "on" && bias_fusion != "off")
    return InvalidArgument("flag --bias-fusion takes on or off, got '", bias_fusion, "'");
  c.bias_fusion = bias_fusion == "on";
  return models::BuildGpt(c);
}

StatusOr<Module> BuildLlamaFromFlags(const Flags& flags) {
  for (const char* name : kGptOnly)
    if (flags.Has(name)) return InvalidArgument("flag --", name, " applies to gpt, not llama");
  models::LlamaConfig c;
  PW_ASSIGN_OR_RETURN(c.layers, flags.RequireInt("layers", 1, kMaxLayers));
  PW_ASSIGN_OR_RETURN(c.hidden, flags.RequireInt("hidden"));
  PW_ASSIGN_OR_RETURN(c.heads, flags.RequireInt("heads"));
  PW_ASSIGN_OR_RETURN(c.kv_heads, flags.RequireInt("kv-heads"));
  PW_ASSIGN_OR_RETURN(c.ffn, flags.RequireInt("ffn"));
  PW_ASSIGN_OR_RETURN(c.seq, flags.RequireInt("seq"));
  PW_ASSIGN_OR_RETURN(c.vocab, flags.RequireInt("vocab"));
  PW_ASSIGN_OR_RETURN(c.rope_theta, flags.GetDouble("rope-theta", c.rope_theta));
  PW_RETURN_IF_ERROR(ParseParallelFlags(flags, c));
  return models::BuildLlama(c);
}

StatusOr<Module> BuildUnetFromFlags(const Flags& flags) {
  for (const char* name : kTransformerOnly)
    if (flags.Has(name))
      return InvalidArgument("flag --", name, " applies to gpt and llama, not unet");
  for (const char* name : kLlamaOnly)
    if (flags.Has(name)) return InvalidArgument("flag --", name, " applies to llama, not unet");
  for (const char* name : kGptOnly)
    if (flags.Has(name)) return InvalidArgument("flag --", name, " applies to gpt, not unet");
  models::UnetConfig c;
  PW_ASSIGN_OR_RETURN(c.layers, flags.RequireInt("layers", 1, kMaxLayers));
  PW_ASSIGN_OR_RETURN(c.hidden, flags.RequireInt("hidden"));
  PW_ASSIGN_OR_RETURN(c.micro_batch_size, flags.GetInt("micro-batch-size", 1));
  PW_ASSIGN_OR_RETURN(c.seq, flags.GetInt("seq", c.seq));
  PW_ASSIGN_OR_RETURN(c.vocab, flags.GetInt("vocab", c.vocab));
  PW_ASSIGN_OR_RETURN(c.pp, GetDegree(flags, "pp"));
  PW_ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed", 1, 0, kInt64Max));
  c.seed = static_cast<uint64_t>(seed);
  return models::BuildUnet(c);
}

StatusOr<int> RunBuildModel(const std::vector<std::string>& args) {
  Flags flags;
  for (const char* name :
       {"layers",     "hidden", "heads",        "kv-heads",         "ffn",
        "seq",        "vocab",  "rope-theta",   "micro-batch-size", "dp",
        "mp",         "pp",     "vpp",          "placement",        "vocab-parallel",
        "seed",       "output", "stage-layers", "attention",        "dropout",
        "bias-fusion"})
    flags.Value(name);
  flags.Alias("o", "output");
  PW_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.positional().size() != 1)
    return InvalidArgument("expected one model name (gpt, llama or unet), got ",
                           flags.positional().size(), " positional arguments");
  PW_ASSIGN_OR_RETURN(std::string output, flags.Require("output"));
  PW_RETURN_IF_ERROR(FormatFromPath(output).status());

  const std::string& model = flags.positional()[0];
  StatusOr<Module> module =
      model == "gpt"     ? BuildGptFromFlags(flags)
      : model == "llama" ? BuildLlamaFromFlags(flags)
      : model == "unet"
          ? BuildUnetFromFlags(flags)
          : StatusOr<Module>(InvalidArgument("unknown model '", model, "' (gpt, llama or unet)"));
  if (!module.ok()) return module.status();
  PW_RETURN_IF_ERROR(VerifyModule(*module, ops::Registry()).WithContext("built module"));
  PW_RETURN_IF_ERROR(SaveModule(*module, output));

  const Program& program = module->main_program();
  int64_t params = 0;
  for (const Var& v : program.vars())
    if (v.is_parameter) params += v.num_elements();
  std::printf("wrote %s: %s, %zu ops, %zu vars, %lld parameter elements per mp rank\n",
              output.c_str(), model.c_str(), program.ops().size(), program.vars().size(),
              static_cast<long long>(params));
  return 0;
}

}  // namespace

PW_REGISTER_COMMAND(build_model, "build-model",
                    "build a model's forward + loss program (gpt, llama, unet) and write it",
                    kUsage, RunBuildModel);

}  // namespace pw::tools
