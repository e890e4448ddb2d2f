#include "models/gpt.h"

#include <cmath>
#include <string>

#include "ir/builder.h"
#include "models/model_config.h"
#include "models/parallel_blocks.h"
#include "ops/dropout_mask.h"
#include "ops/registry.h"

namespace pw::models {
namespace {

Staging GptStaging(const GptConfig& c) {
  return Staging{c.layers, c.pp, c.vpp, c.placement, c.stage_layers};
}

}  // namespace

Status ValidateGptConfig(const GptConfig& c) {
  auto positive = [](const char* name, int64_t v) -> Status {
    if (v <= 0) return InvalidArgument("gpt: ", name, " must be > 0, got ", v);
    return OkStatus();
  };
  PW_RETURN_IF_ERROR(positive("layers", c.layers));
  PW_RETURN_IF_ERROR(positive("hidden", c.hidden));
  PW_RETURN_IF_ERROR(positive("heads", c.heads));
  PW_RETURN_IF_ERROR(positive("ffn", c.ffn));
  PW_RETURN_IF_ERROR(positive("seq", c.seq));
  PW_RETURN_IF_ERROR(positive("vocab", c.vocab));
  PW_RETURN_IF_ERROR(positive("micro-batch-size", c.micro_batch_size));
  PW_RETURN_IF_ERROR(positive("dp", c.dp));
  PW_RETURN_IF_ERROR(positive("mp", c.mp));
  PW_RETURN_IF_ERROR(positive("pp", c.pp));
  PW_RETURN_IF_ERROR(positive("vpp", c.vpp));
  if (c.hidden % c.heads)
    return InvalidArgument("gpt: hidden ", c.hidden, " is not divisible by heads ", c.heads);
  if (c.heads % c.mp)
    return InvalidArgument("gpt: heads ", c.heads, " is not divisible by mp ", c.mp);
  if (c.ffn % c.mp) return InvalidArgument("gpt: ffn ", c.ffn, " is not divisible by mp ", c.mp);
  if (!(c.dropout >= 0 && c.dropout < 1))
    return InvalidArgument("gpt: dropout must be in [0, 1), got ", c.dropout);
  if (c.dropout > 0 && !c.unfused_attention)
    return InvalidArgument(
        "gpt: dropout needs unfused attention (the fused attention op has no dropout of its "
        "probabilities): build with --attention unfused");
  if (c.vocab_parallel && c.vocab % c.mp)
    return InvalidArgument("gpt: vocab ", c.vocab, " is not divisible by mp ", c.mp,
                           " (or build without vocab parallelism)");
  return ValidateStaging("gpt", GptStaging(c));
}

namespace {

class GptBuilder {
 public:
  GptBuilder(const GptConfig& config, Program& program)
      : c_(config), b_(program, ops::Registry()), p_(b_, c_.mp, c_.vocab_parallel, c_.seed) {}

  // Returns the loss var.
  std::string Build() {
    const Staging staging = GptStaging(c_);
    const std::vector<int64_t> counts = LayersPerChunk(staging);
    p_.Place(0, staging);
    std::string x = Embeddings();
    int64_t layer = 0;
    for (int chunk = 0; chunk < static_cast<int>(counts.size()); ++chunk) {
      p_.Place(chunk, staging);
      for (int64_t i = 0; i < counts[chunk]; ++i, ++layer) x = Layer(layer, x);
    }
    p_.Place(static_cast<int>(counts.size()) - 1, staging);
    std::string labels = b_.Input("labels", DataType::kInt64, {c_.micro_batch_size, c_.seq});
    return p_.LanguageModelLoss(LayerNorm("ln_f", x), labels, c_.hidden, c_.vocab);
  }

  const Status& status() const { return b_.status(); }

 private:
  std::string Embeddings() {
    std::string tokens = b_.Input("tokens", DataType::kInt64, {c_.micro_batch_size, c_.seq});
    std::string wpe = p_.Param("wpe", {c_.seq, c_.hidden}, NormalInit("wpe", c_.seed));
    std::string emb = p_.TokenEmbedding("wte", tokens, c_.vocab, c_.hidden);
    // [S, H] positions broadcast over the batch.
    return Dropout(BiasAdd(emb, wpe, "embeddings.out"), "embeddings.dropout", kEmbeddingSalt);
  }

  // Dropout site `salt` on x (identity when the config has none). `shard_count` > 1: x is
  // this rank's slice along `shard_axis` of the mp group's whole tensor.
  std::string Dropout(const std::string& x, const std::string& out, int64_t salt,
                      int64_t shard_axis = -1, int64_t shard_count = 1) {
    if (c_.dropout <= 0) return x;
    OpBuilder op = b_.Op("dropout");
    op.In("X", x).In("Seed", DropoutSeed()).Out("Out", out);
    op.Attr("p", c_.dropout).Attr("salt", salt);
    if (shard_count > 1) op.Attr("shard_axis", shard_axis).Attr("shard_count", shard_count);
    return op.Build();
  }

  // The dropout seed input, declared at its first use.
  const std::string& DropoutSeed() {
    if (seed_.empty()) seed_ = b_.Input(ops::kDropoutSeedVar, DataType::kInt64, {1});
    return seed_;
  }

  // Salts: the embeddings', then three per layer.
  static constexpr int64_t kEmbeddingSalt = 0;
  static int64_t LayerSalt(int64_t layer, int64_t site) { return 1 + 3 * layer + site; }

  std::string LayerNorm(const std::string& name, const std::string& x) {
    std::string scale =
        p_.Param(name + ".scale", {c_.hidden}, ConstantInit(name + ".scale", c_.seed, 1));
    std::string bias = p_.Param(name + ".bias", {c_.hidden}, ZerosInit(name + ".bias", c_.seed));
    return b_.Op("layer_norm")
        .In("X", x)
        .In("Scale", scale)
        .In("Bias", bias)
        .Out("Y", name + ".out")
        .Out("Mean", name + ".mean")
        .Out("Rstd", name + ".rstd")
        .Build();
  }

  std::string BiasAdd(const std::string& x, const std::string& bias, const std::string& out) {
    return b_.Op("bias_add").In("X", x).In("Bias", bias).Out("Out", out).Build();
  }

  // A linear's matmul and its bias var, whose add is left to the caller (fused or not).
  struct Linear {
    std::string out;
    std::string bias;
  };

  // Column-parallel linear: the input is replicated (c_identity: identity forward,
  // all-reduce of its gradient backward), weight and bias hold 1/mp of the columns.
  Linear ColumnParallel(const std::string& name, const std::string& x, int64_t out_full) {
    const int64_t h = c_.hidden;
    std::string x_id = p_.Unary("c_identity", x, name + ".in");
    std::string w =
        p_.ShardedParam(name + ".weight", {h, out_full}, 1, NormalInit(name + ".weight", c_.seed));
    std::string b =
        p_.ShardedParam(name + ".bias", {out_full}, 0, ZerosInit(name + ".bias", c_.seed));
    return {p_.Matmul(x_id, w, name + ".matmul"), b};
  }

  // Row-parallel linear: each rank multiplies its 1/mp of the rows, partial sums are
  // all-reduced, and the (replicated) bias is added once, after the reduction.
  Linear RowParallel(const std::string& name, const std::string& x, int64_t in_full) {
    const int64_t h = c_.hidden;
    std::string w =
        p_.ShardedParam(name + ".weight", {in_full, h}, 0, NormalInit(name + ".weight", c_.seed));
    std::string b = p_.Param(name + ".bias", {h}, ZerosInit(name + ".bias", c_.seed));
    std::string partial = p_.Matmul(x, w, name + ".matmul");
    return {p_.Unary("c_allreduce_sum", partial, name + ".allreduce"), b};
  }

  // gelu(linear + bias): one bias_gelu with bias fusion, else bias_add then gelu.
  std::string BiasGelu(const Linear& y, const std::string& name, const std::string& out) {
    if (c_.bias_fusion)
      return b_.Op("bias_gelu").In("X", y.out).In("Bias", y.bias).Out("Out", out).Build();
    return p_.Unary("gelu", BiasAdd(y.out, y.bias, name + ".out"), out);
  }

  // residual + dropout(linear + bias): one bias_dropout_add with bias fusion (dropout p may
  // be 0 there), else bias_add, dropout and add.
  std::string BiasDropoutAdd(const Linear& y, const std::string& name, const std::string& residual,
                             int64_t salt, const std::string& out) {
    if (!c_.bias_fusion) {
      std::string branch = Dropout(BiasAdd(y.out, y.bias, name + ".out"), name + ".dropout", salt);
      return p_.Add(residual, branch, out);
    }
    OpBuilder op = b_.Op("bias_dropout_add");
    op.In("X", y.out).In("Bias", y.bias).In("Residual", residual).Out("Out", out);
    op.Attr("p", c_.dropout).Attr("salt", salt);
    if (c_.dropout > 0) op.In("Seed", DropoutSeed());
    return op.Build();
  }

  std::string Layer(int64_t index, const std::string& x) {
    const std::string p = "layer" + std::to_string(index) + ".";
    std::string ln1 = LayerNorm(p + "ln1", x);
    Linear qkv_linear = ColumnParallel(p + "qkv", ln1, 3 * c_.hidden);
    std::string qkv = BiasAdd(qkv_linear.out, qkv_linear.bias, p + "qkv.out");
    std::string attn = c_.unfused_attention ? UnfusedAttention(p, qkv, index)
                                            : b_.Op("attention")
                                                  .In("QKV", qkv)
                                                  .Out("Out", p + "attn.out")
                                                  .Out("Probs", p + "attn.probs")
                                                  .Attr("num_heads", int64_t{c_.heads / c_.mp})
                                                  .Attr("causal", true)
                                                  .Build();
    std::string h1 = BiasDropoutAdd(RowParallel(p + "proj", attn, c_.hidden), p + "proj", x,
                                    LayerSalt(index, 1), p + "residual1");
    std::string ln2 = LayerNorm(p + "ln2", h1);
    std::string act = BiasGelu(ColumnParallel(p + "fc1", ln2, c_.ffn), p + "fc1", p + "gelu");
    return BiasDropoutAdd(RowParallel(p + "fc2", act, c_.ffn), p + "fc2", h1, LayerSalt(index, 2),
                          p + "residual2");
  }

  // Attention as the kernels of 2020-22 frameworks ran it, one op per step: QKV
  // [B, S, h x {q, k, v} x d] regrouped into per-head q, k, v [B, h, S, d] (q scaled by
  // 1/sqrt(d)), the scores q.k^T [B, h, S, S], a causal softmax over them, times v, and the
  // heads back to [B, S, h d]. The scores and probabilities go through memory.
  std::string UnfusedAttention(const std::string& p, const std::string& qkv, int64_t layer) {
    const int64_t b = c_.micro_batch_size, s = c_.seq, h = c_.heads / c_.mp;
    const int64_t d = c_.hidden / c_.heads;
    std::string x = b_.Op("reshape")
                        .In("X", qkv)
                        .Out("Out", p + "attn.qkv_heads")
                        .Attr("shape", std::vector<int64_t>{b, s, h, 3, d})
                        .Build();
    x = b_.Op("transpose")
            .In("X", x)
            .Out("Out", p + "attn.qkv_t")
            .Attr("perm", std::vector<int64_t>{0, 2, 3, 1, 4})  // [B, h, 3, S, d]
            .Build();
    b_.Op("split")
        .In("X", x)
        .Out("Out", {p + "attn.q5", p + "attn.k5", p + "attn.v5"})
        .Attr("axis", int64_t{2})
        .Attr("sections", std::vector<int64_t>{1, 1, 1})
        .Build();
    auto heads = [&](const std::string& in, const std::string& out) {
      return b_.Op("reshape")
          .In("X", in)
          .Out("Out", out)
          .Attr("shape", std::vector<int64_t>{b, h, s, d})
          .Build();
    };
    std::string q = heads(p + "attn.q5", p + "attn.q");
    std::string k = heads(p + "attn.k5", p + "attn.k");
    std::string v = heads(p + "attn.v5", p + "attn.v");
    q = b_.Op("scale")
            .In("X", q)
            .Out("Out", p + "attn.q_scaled")
            .Attr("scale", 1.0 / std::sqrt(static_cast<double>(d)))
            .Attr("bias", 0.0)
            .Build();
    std::string scores = b_.Op("matmul")
                             .In("X", q)
                             .In("Y", k)
                             .Out("Out", p + "attn.scores")
                             .Attr("trans_x", false)
                             .Attr("trans_y", true)
                             .Build();
    std::string probs =
        b_.Op("softmax").In("X", scores).Out("Out", p + "attn.probs").Attr("causal", true).Build();
    // This rank's heads of the probabilities: the mask of the global head indices.
    probs = Dropout(probs, p + "attn.probs_dropout", LayerSalt(layer, 0), 1, c_.mp);
    std::string context = p_.Matmul(probs, v, p + "attn.context");
    context = b_.Op("transpose")
                  .In("X", context)
                  .Out("Out", p + "attn.context_t")
                  .Attr("perm", std::vector<int64_t>{0, 2, 1, 3})  // [B, S, h, d]
                  .Build();
    return b_.Op("reshape")
        .In("X", context)
        .Out("Out", p + "attn.out")
        .Attr("shape", std::vector<int64_t>{b, s, h * d})
        .Build();
  }

  const GptConfig& c_;
  ProgramBuilder b_;
  ParallelBlocks p_;
  std::string seed_;  // the dropout seed input, declared at the first dropout
};

void RecordConfig(const GptConfig& c, const std::string& loss, AttrList& meta) {
  meta.Set(kMetaModel, std::string("gpt"));
  std::vector<std::string> inputs = {"tokens", "labels"};
  if (c.dropout > 0) inputs.push_back(ops::kDropoutSeedVar);
  meta.Set(kMetaInputs, inputs);
  meta.Set(kMetaLoss, loss);
  meta.Set("layers", c.layers);
  meta.Set("hidden", c.hidden);
  meta.Set("heads", c.heads);
  meta.Set("ffn", c.ffn);
  meta.Set("seq", c.seq);
  meta.Set("vocab", c.vocab);
  RecordParallelLayout(c, meta);
  meta.Set("attention", std::string(c.unfused_attention ? "unfused" : "fused"));
  // Recorded only when on, so that modules built before them read back as they were.
  if (c.dropout > 0) meta.Set("dropout", c.dropout);
  if (c.bias_fusion) meta.Set("bias_fusion", true);
  meta.Set("seed", static_cast<int64_t>(c.seed));
}

}  // namespace

StatusOr<Module> BuildGpt(const GptConfig& config) {
  PW_RETURN_IF_ERROR(ValidateGptConfig(config));
  Module module;
  module.name = "gpt";
  module.mesh = TransformerMesh(config);
  Program& program = module.AddProgram(Program("main"));
  GptBuilder builder(config, program);
  std::string loss = builder.Build();
  PW_RETURN_IF_ERROR(builder.status().WithContext("building gpt"));
  RecordConfig(config, loss, module.metadata);
  return module;
}

}  // namespace pw::models
