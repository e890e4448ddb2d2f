#include "models/llama.h"

#include <string>

#include "ir/builder.h"
#include "models/parallel_blocks.h"
#include "ops/registry.h"

namespace pw::models {
namespace {

Staging LlamaStaging(const LlamaConfig& c) {
  return Staging{c.layers, c.pp, c.vpp, c.placement, c.stage_layers};
}

// Whether the kv heads are split over the mp group (else replicated on every rank).
bool SplitsKvHeads(const LlamaConfig& c) { return c.kv_heads >= c.mp; }

}  // namespace

Status ValidateLlamaConfig(const LlamaConfig& c) {
  auto positive = [](const char* name, int64_t v) -> Status {
    if (v <= 0) return InvalidArgument("llama: ", name, " must be > 0, got ", v);
    return OkStatus();
  };
  PW_RETURN_IF_ERROR(positive("layers", c.layers));
  PW_RETURN_IF_ERROR(positive("hidden", c.hidden));
  PW_RETURN_IF_ERROR(positive("heads", c.heads));
  PW_RETURN_IF_ERROR(positive("kv-heads", c.kv_heads));
  PW_RETURN_IF_ERROR(positive("ffn", c.ffn));
  PW_RETURN_IF_ERROR(positive("seq", c.seq));
  PW_RETURN_IF_ERROR(positive("vocab", c.vocab));
  PW_RETURN_IF_ERROR(positive("micro-batch-size", c.micro_batch_size));
  PW_RETURN_IF_ERROR(positive("dp", c.dp));
  PW_RETURN_IF_ERROR(positive("mp", c.mp));
  if (!(c.rope_theta > 1))
    return InvalidArgument("llama: rope-theta must be > 1, got ", c.rope_theta);
  if (c.hidden % c.heads)
    return InvalidArgument("llama: hidden ", c.hidden, " is not divisible by heads ", c.heads);
  if (c.heads % c.kv_heads)
    return InvalidArgument("llama: kv-heads ", c.kv_heads, " does not divide heads ", c.heads,
                           " (each kv head serves an equal group of query heads)");
  const int64_t head_size = c.hidden / c.heads;
  if (head_size % 2)
    return InvalidArgument("llama: head size ", head_size, " (hidden ", c.hidden, " / heads ",
                           c.heads, ") is odd; rotary embeddings rotate pairs of dimensions");
  if (c.heads % c.mp)
    return InvalidArgument("llama: heads ", c.heads, " is not divisible by mp ", c.mp);
  if (c.kv_heads < c.mp && c.kv_heads != 1)
    return InvalidArgument("llama: kv-heads ", c.kv_heads, " is fewer than mp ", c.mp,
                           "; kv heads are split over mp (at least mp of them) or, when there "
                           "is a single one, replicated");
  if (SplitsKvHeads(c) && c.kv_heads % c.mp)
    return InvalidArgument("llama: kv-heads ", c.kv_heads, " is not divisible by mp ", c.mp);
  if (c.ffn % c.mp) return InvalidArgument("llama: ffn ", c.ffn, " is not divisible by mp ", c.mp);
  if (c.vocab_parallel && c.vocab % c.mp)
    return InvalidArgument("llama: vocab ", c.vocab, " is not divisible by mp ", c.mp,
                           " (or build without vocab parallelism)");
  return ValidateStaging("llama", LlamaStaging(c));
}

namespace {

class LlamaBuilder {
 public:
  LlamaBuilder(const LlamaConfig& config, Program& program)
      : c_(config), b_(program, ops::Registry()), p_(b_, c_.mp, c_.vocab_parallel, c_.seed) {}

  // Returns the loss var.
  std::string Build() {
    const Staging staging = LlamaStaging(c_);
    const std::vector<int64_t> counts = LayersPerChunk(staging);
    p_.Place(0, staging);
    std::string tokens = b_.Input("tokens", DataType::kInt64, {c_.micro_batch_size, c_.seq});
    std::string x = p_.TokenEmbedding("embed", tokens, c_.vocab, c_.hidden);
    int64_t layer = 0;
    for (int chunk = 0; chunk < static_cast<int>(counts.size()); ++chunk) {
      p_.Place(chunk, staging);
      for (int64_t i = 0; i < counts[chunk]; ++i, ++layer) x = Layer(layer, x);
    }
    p_.Place(static_cast<int>(counts.size()) - 1, staging);
    std::string labels = b_.Input("labels", DataType::kInt64, {c_.micro_batch_size, c_.seq});
    return p_.LanguageModelLoss(RmsNorm("norm", x), labels, c_.hidden, c_.vocab);
  }

  const Status& status() const { return b_.status(); }

 private:
  int64_t head_size() const { return c_.hidden / c_.heads; }

  std::string RmsNorm(const std::string& name, const std::string& x) {
    std::string scale =
        p_.Param(name + ".scale", {c_.hidden}, ConstantInit(name + ".scale", c_.seed, 1));
    return b_.Op("rms_norm")
        .In("X", x)
        .In("Scale", scale)
        .Out("Y", name + ".out")
        .Out("Rstd", name + ".rstd")
        .Build();
  }

  // x (replicated over mp) times 1/mp of the columns of `name`.weight [in, out_full].
  std::string ColumnLinear(const std::string& name, const std::string& x, int64_t in,
                           int64_t out_full) {
    std::string w =
        p_.ShardedParam(name + ".weight", {in, out_full}, 1, NormalInit(name + ".weight", c_.seed));
    return p_.Matmul(x, w, name + ".out");
  }

  // x times the whole of `name`.weight [in, out], on every rank.
  std::string ReplicatedLinear(const std::string& name, const std::string& x, int64_t in,
                               int64_t out) {
    std::string w = p_.Param(name + ".weight", {in, out}, NormalInit(name + ".weight", c_.seed));
    return p_.Matmul(x, w, name + ".out");
  }

  // Row-parallel linear without bias: this rank's 1/mp of the rows, partial sums all-reduced.
  std::string RowParallel(const std::string& name, const std::string& x, int64_t in_full) {
    std::string w = p_.ShardedParam(name + ".weight", {in_full, c_.hidden}, 0,
                                    NormalInit(name + ".weight", c_.seed));
    std::string partial = p_.Matmul(x, w, name + ".matmul");
    return p_.Unary("c_allreduce_sum", partial, name + ".allreduce");
  }

  std::string Rotary(const std::string& x, const std::string& out) {
    return b_.Op("rotary_embedding")
        .In("X", x)
        .Out("Out", out)
        .Attr("head_dim", head_size())
        .Attr("theta", c_.rope_theta)
        .Build();
  }

  std::string Attention(const std::string& p, const std::string& x) {
    const int64_t h = c_.hidden, d = head_size();
    std::string h_id = p_.Unary("c_identity", x, p + "attn.in");
    std::string q = ColumnLinear(p + "q", h_id, h, c_.heads * d);
    std::string k, v;
    if (SplitsKvHeads(c_)) {
      k = ColumnLinear(p + "k", h_id, h, c_.kv_heads * d);
      v = ColumnLinear(p + "v", h_id, h, c_.kv_heads * d);
    } else {
      k = ReplicatedLinear(p + "k", x, h, c_.kv_heads * d);
      v = ReplicatedLinear(p + "v", x, h, c_.kv_heads * d);
    }
    std::string q_rope = Rotary(q, p + "q.rope");
    std::string k_rope = Rotary(k, p + "k.rope");
    if (!SplitsKvHeads(c_)) {
      // Each rank's query heads give part of the replicated K's and V's gradients: the
      // c_identity all-reduces them, so every rank's weight gradient is the whole one.
      k_rope = p_.Unary("c_identity", k_rope, p + "k.replicated");
      v = p_.Unary("c_identity", v, p + "v.replicated");
    }
    const int64_t kv_heads = SplitsKvHeads(c_) ? c_.kv_heads / c_.mp : c_.kv_heads;
    std::string attn = b_.Op("gqa_attention")
                           .In("Q", q_rope)
                           .In("K", k_rope)
                           .In("V", v)
                           .Out("Out", p + "attn.out")
                           .Out("Probs", p + "attn.probs")
                           .Attr("num_heads", int64_t{c_.heads / c_.mp})
                           .Attr("kv_heads", kv_heads)
                           .Attr("causal", true)
                           .Build();
    return RowParallel(p + "o", attn, c_.heads * d);
  }

  std::string Mlp(const std::string& p, const std::string& x) {
    std::string x_id = p_.Unary("c_identity", x, p + "mlp.in");
    std::string gate = ColumnLinear(p + "gate", x_id, c_.hidden, c_.ffn);
    std::string up = ColumnLinear(p + "up", x_id, c_.hidden, c_.ffn);
    std::string act =
        b_.Op("swiglu").In("Gate", gate).In("Up", up).Out("Out", p + "swiglu").Build();
    return RowParallel(p + "down", act, c_.ffn);
  }

  std::string Layer(int64_t index, const std::string& x) {
    const std::string p = "layer" + std::to_string(index) + ".";
    std::string attn = Attention(p, RmsNorm(p + "attn_norm", x));
    std::string h = p_.Add(x, attn, p + "residual1");
    std::string mlp = Mlp(p, RmsNorm(p + "mlp_norm", h));
    return p_.Add(h, mlp, p + "residual2");
  }

  const LlamaConfig& c_;
  ProgramBuilder b_;
  ParallelBlocks p_;
};

void RecordConfig(const LlamaConfig& c, const std::string& loss, AttrList& meta) {
  meta.Set(kMetaModel, std::string("llama"));
  meta.Set(kMetaInputs, std::vector<std::string>{"tokens", "labels"});
  meta.Set(kMetaLoss, loss);
  meta.Set("layers", c.layers);
  meta.Set("hidden", c.hidden);
  meta.Set("heads", c.heads);
  meta.Set("kv_heads", c.kv_heads);
  meta.Set("ffn", c.ffn);
  meta.Set("seq", c.seq);
  meta.Set("vocab", c.vocab);
  meta.Set("rope_theta", c.rope_theta);
  RecordParallelLayout(c, meta);
  meta.Set("seed", static_cast<int64_t>(c.seed));
}

}  // namespace

StatusOr<Module> BuildLlama(const LlamaConfig& config) {
  PW_RETURN_IF_ERROR(ValidateLlamaConfig(config));
  Module module;
  module.name = "llama";
  module.mesh = TransformerMesh(config);
  Program& program = module.AddProgram(Program("main"));
  LlamaBuilder builder(config, program);
  std::string loss = builder.Build();
  PW_RETURN_IF_ERROR(builder.status().WithContext("building llama"));
  RecordConfig(config, loss, module.metadata);
  return module;
}

}  // namespace pw::models
