#include "models/parallel_blocks.h"

namespace pw::models {

Status ValidateStaging(const std::string& model, const Staging& c) {
  if (c.pp <= 0) return InvalidArgument(model, ": pp must be > 0, got ", c.pp);
  if (c.vpp <= 0) return InvalidArgument(model, ": vpp must be > 0, got ", c.vpp);
  const int64_t model_chunks = int64_t{c.pp} * c.vpp;
  if (!c.stage_layers.empty()) {
    if (static_cast<int64_t>(c.stage_layers.size()) != model_chunks)
      return InvalidArgument(model, ": --stage-layers has ", c.stage_layers.size(),
                             " counts; it needs one per model chunk, pp*vpp = ", c.pp, "*", c.vpp,
                             " = ", model_chunks);
    int64_t sum = 0;
    for (size_t i = 0; i < c.stage_layers.size(); ++i) {
      if (c.stage_layers[i] < 1)
        return InvalidArgument(model, ": --stage-layers count ", i + 1, " is ", c.stage_layers[i],
                               "; every model chunk needs at least one layer");
      sum += c.stage_layers[i];
    }
    if (sum != c.layers)
      return InvalidArgument(model, ": --stage-layers sums to ", sum, ", not to layers ", c.layers);
  } else if (c.layers % model_chunks) {
    return InvalidArgument(model, ": layers ", c.layers, " is not divisible by pp*vpp = ", c.pp,
                           "*", c.vpp, " = ", model_chunks,
                           " (give --stage-layers to place them unevenly)");
  }
  if (c.placement == ChunkPlacement::kV && c.vpp != 2)
    return InvalidArgument(model,
                           ": placement v needs vpp 2 (one chunk down the ranks, one back "
                           "up), got vpp ",
                           c.vpp);
  return OkStatus();
}

std::vector<int64_t> LayersPerChunk(const Staging& c) {
  const int model_chunks = c.pp * c.vpp;
  if (!c.stage_layers.empty()) return c.stage_layers;
  return std::vector<int64_t>(model_chunks, c.layers / model_chunks);
}

void ParallelBlocks::Place(int model_chunk, const Staging& staging) {
  Placement p = PlaceModelChunk(model_chunk, staging.pp, staging.placement);
  b_.SetPlacement(p.stage, p.chunk);
}

std::string ParallelBlocks::Param(const std::string& key, Shape shape, Initializer init) {
  return b_.Parameter(key, std::move(shape), std::move(init));
}

std::string ParallelBlocks::ShardedParam(const std::string& key, Shape full_shape, int axis,
                                         Initializer init) {
  Shape shape = ShardAlong(init, std::move(full_shape), axis, mp_);
  return b_.Parameter(key, std::move(shape), std::move(init));
}

std::string ParallelBlocks::Unary(const std::string& type, const std::string& x,
                                  const std::string& out) {
  return b_.Op(type).In("X", x).Out("Out", out).Build();
}

std::string ParallelBlocks::Matmul(const std::string& x, const std::string& w,
                                   const std::string& out) {
  return b_.Op("matmul").In("X", x).In("Y", w).Out("Out", out).Build();
}

std::string ParallelBlocks::Add(const std::string& x, const std::string& y,
                                const std::string& out) {
  return b_.Op("add").In("X", x).In("Y", y).Out("Out", out).Build();
}

std::string ParallelBlocks::TokenEmbedding(const std::string& name, const std::string& tokens,
                                           int64_t vocab, int64_t hidden) {
  if (!vocab_sharded_) {
    std::string w = Param(name, {vocab, hidden}, NormalInit(name, seed_));
    return b_.Op("embedding").In("Ids", tokens).In("W", w).Out("Out", name + ".out").Build();
  }
  std::string w = ShardedParam(name, {vocab, hidden}, 0, NormalInit(name, seed_));
  std::string partial = b_.Op("c_embedding")
                            .In("Ids", tokens)
                            .In("W", w)
                            .Out("Out", name + ".partial")
                            .Attr("vocab_size", vocab)
                            .Build();
  return Unary("c_allreduce_sum", partial, name + ".out");
}

std::string ParallelBlocks::LanguageModelLoss(const std::string& x, const std::string& labels,
                                              int64_t hidden, int64_t vocab) {
  std::string ce = vocab_sharded_ ? ParallelCrossEntropy(x, labels, hidden, vocab)
                                  : CrossEntropy(x, labels, hidden, vocab);
  return b_.Op("mean").In("X", ce).Out("Out", "loss").Role(OpRole::kLoss).Build();
}

std::string ParallelBlocks::CrossEntropy(const std::string& x, const std::string& labels,
                                         int64_t hidden, int64_t vocab) {
  std::string w = Param("head.weight", {hidden, vocab}, NormalInit("head.weight", seed_));
  std::string logits = Matmul(x, w, "logits");
  return b_.Op("softmax_cross_entropy")
      .In("Logits", logits)
      .In("Label", labels)
      .Out("Loss", "token_loss")
      .Out("Softmax", "softmax")
      .Build();
}

std::string ParallelBlocks::ParallelCrossEntropy(const std::string& x, const std::string& labels,
                                                 int64_t hidden, int64_t vocab) {
  std::string x_id = Unary("c_identity", x, "head.in");
  std::string w = ShardedParam("head.weight", {hidden, vocab}, 1, NormalInit("head.weight", seed_));
  std::string logits = Matmul(x_id, w, "logits");
  std::string local_max = Unary("reduce_max", logits, "logits.local_max");
  std::string max = Unary("c_allreduce_max", local_max, "logits.max");
  b_.Op("c_softmax_stats")
      .In("Logits", logits)
      .In("Max", max)
      .In("Label", labels)
      .Out("SumExp", "logits.local_sum_exp")
      .Out("TargetLogit", "logits.local_target")
      .Attr("vocab_size", vocab)
      .Build();
  std::string sum_exp = Unary("c_allreduce_sum", "logits.local_sum_exp", "logits.sum_exp");
  std::string target = Unary("c_allreduce_sum", "logits.local_target", "logits.target");
  return b_.Op("c_softmax_cross_entropy")
      .In("Logits", logits)
      .In("Max", max)
      .In("SumExp", sum_exp)
      .In("TargetLogit", target)
      .In("Label", labels)
      .Out("Loss", "token_loss")
      .Out("Softmax", "softmax")
      .Build();
}

}  // namespace pw::models
