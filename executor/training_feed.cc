#include "executor/training_feed.h"

#include "ops/dropout_mask.h"

namespace pw {

StatusOr<std::unique_ptr<TrainingFeed>> TrainingFeed::Open(const Module& module, int dp_index,
                                                           int micro_batches,
                                                           const TrainingFeedOptions& options) {
  const Var* tokens = nullptr;
  for (const Program& p : module.programs())
    if (!tokens) tokens = p.FindVar("tokens");
  if (!tokens || tokens->dtype != DataType::kInt64 || tokens->shape.size() != 2)
    return FailedPrecondition("module input 'tokens' must be an i64 [batch, seq] var");
  int64_t vocab = module.metadata.GetInt("vocab", 0);
  if (vocab <= 0) return FailedPrecondition("module metadata has no positive 'vocab'");
  DataConfig config{tokens->shape[0], tokens->shape[1], vocab, options.data_seed,
                    options.data_file};
  PW_ASSIGN_OR_RETURN(TrainingData data, TrainingData::Open(config));
  return std::unique_ptr<TrainingFeed>(new TrainingFeed(std::move(data), dp_index, micro_batches));
}

Interpreter::FeedFn TrainingFeed::fn() {
  return [this](const std::string& var, int micro_batch) -> StatusOr<Tensor> {
    int64_t global = static_cast<int64_t>(dp_index_) * micro_batches_ + micro_batch;
    MicroBatch batch = data_.Get(step_, global);
    if (var == "tokens") return batch.tokens;
    if (var == "labels") return batch.labels;
    if (var == ops::kDropoutSeedVar) return batch.dropout_seed;
    return Unimplemented("module input '", var, "': training feeds only 'tokens', 'labels' and '",
                         ops::kDropoutSeedVar, "'");
  };
}

}  // namespace pw
