#pragma once
// What the transformer builders (gpt.cc, llama.cc) build alike: parameters replicated or
// sharded over the mp group, the token embedding and the LM head with its cross-entropy
// loss, both vocabulary-parallel (Megatron's) when the vocabulary is sharded, and the
// placement of model chunks on pipeline stages.

#include <cstdint>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/status.h"
#include "models/model_config.h"

namespace pw::models {

// How a transformer's layers are spread over the pipeline, shared by the builders' configs.
struct Staging {
  int64_t layers = 0;
  int pp = 1;
  int vpp = 1;
  ChunkPlacement placement = ChunkPlacement::kLoop;
  std::vector<int64_t> stage_layers;  // per model chunk; empty: layers / (pp * vpp) each
};

// One line naming the first bad setting, prefixed with the model's name ("llama: ...").
Status ValidateStaging(const std::string& model, const Staging& staging);
// Layers of each of the pp * vpp model chunks, in model order (staging must be valid).
std::vector<int64_t> LayersPerChunk(const Staging& staging);

class ParallelBlocks {
 public:
  ParallelBlocks(ProgramBuilder& b, int mp, bool vocab_parallel, uint64_t seed)
      : b_(b), mp_(mp), vocab_sharded_(vocab_parallel && mp > 1), seed_(seed) {}

  ProgramBuilder& builder() { return b_; }
  uint64_t seed() const { return seed_; }
  bool vocab_sharded() const { return vocab_sharded_; }

  // Puts the ops built from now on on model chunk `model_chunk` of `staging`.
  void Place(int model_chunk, const Staging& staging);

  // A replicated parameter.
  std::string Param(const std::string& key, Shape shape, Initializer init);
  // An mp-sharded parameter: shard 0 of `full_shape` split along `axis`.
  std::string ShardedParam(const std::string& key, Shape full_shape, int axis, Initializer init);

  std::string Unary(const std::string& type, const std::string& x, const std::string& out);
  std::string Matmul(const std::string& x, const std::string& w, const std::string& out);
  std::string Add(const std::string& x, const std::string& y, const std::string& out);

  // tokens [B, S] -> [B, S, hidden] from the table `name` [vocab, hidden] (N(0, 0.02)),
  // output `name`.out: with a sharded vocabulary this rank's rows (c_embedding, zeros for
  // the others' tokens), then an all-reduce brings in the other ranks' rows.
  std::string TokenEmbedding(const std::string& name, const std::string& tokens, int64_t vocab,
                             int64_t hidden);
  // The LM head `head.weight` [hidden, vocab] on the final hidden states x and the mean
  // softmax cross-entropy against labels: the scalar `loss` (role loss). With a sharded
  // vocabulary the head is column-parallel and the softmax Megatron's parallel one: the
  // shift (max) and the sums are all-reduced, logits never gathered.
  std::string LanguageModelLoss(const std::string& x, const std::string& labels, int64_t hidden,
                                int64_t vocab);

 private:
  std::string CrossEntropy(const std::string& x, const std::string& labels, int64_t hidden,
                           int64_t vocab);
  std::string ParallelCrossEntropy(const std::string& x, const std::string& labels, int64_t hidden,
                                   int64_t vocab);

  ProgramBuilder& b_;
  int mp_;
  bool vocab_sharded_;
  uint64_t seed_;
};

}  // namespace pw::models
