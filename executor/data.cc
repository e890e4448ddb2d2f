#include "executor/data.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "ir/file_util.h"
#include "ops/dropout_mask.h"

namespace pw {

namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t RowHash(uint64_t seed, int64_t step, int64_t micro_batch, int64_t row) {
  uint64_t h = Mix(seed ^ 0x5eed);
  h = Mix(h ^ static_cast<uint64_t>(step));
  h = Mix(h ^ static_cast<uint64_t>(micro_batch));
  return Mix(h ^ static_cast<uint64_t>(row));
}

}  // namespace

StatusOr<TrainingData> TrainingData::Open(const DataConfig& config) {
  if (config.batch_size <= 0 || config.seq_len <= 0)
    return InvalidArgument("data: batch size ", config.batch_size, " and sequence length ",
                           config.seq_len, " must be positive");
  if (config.vocab < 2) return InvalidArgument("data: vocab ", config.vocab, " must be >= 2");
  TrainingData data(config);
  if (!config.file.empty()) {
    if (config.vocab < 256)
      return InvalidArgument(
          "data: --data reads byte tokens and needs vocab >= 256, the model has ", config.vocab);
    PW_ASSIGN_OR_RETURN(std::string text, ReadFile(config.file));
    if (static_cast<int64_t>(text.size()) < config.seq_len + 1)
      return InvalidArgument("data: ", config.file, " has ", text.size(),
                             " bytes, fewer than sequence length + 1 = ", config.seq_len + 1);
    data.text_ = std::make_shared<const std::string>(std::move(text));
    return data;
  }
  uint64_t h = Mix(config.seed ^ 0xda7a);
  do {  // any multiplier coprime with V makes the map a permutation
    h = Mix(h);
    data.mult_ = 1 + static_cast<int64_t>(h % static_cast<uint64_t>(config.vocab - 1));
  } while (std::gcd(data.mult_, config.vocab) != 1);
  data.incr_ = static_cast<int64_t>(Mix(h) % static_cast<uint64_t>(config.vocab));
  return data;
}

void TrainingData::FillRow(uint64_t row_hash, int64_t* out) const {
  const int64_t n = config_.seq_len + 1;
  if (text_) {
    uint64_t windows = text_->size() - config_.seq_len;  // start offsets with n bytes left
    size_t offset = row_hash % windows;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<unsigned char>((*text_)[offset + i]);
    return;
  }
  const int64_t v = config_.vocab;
  out[0] = static_cast<int64_t>(row_hash % static_cast<uint64_t>(v));
  // (mult*t + incr) fits in int64 for any vocab below 2^31.
  for (int64_t i = 1; i < n; ++i) out[i] = (mult_ * out[i - 1] + incr_) % v;
}

MicroBatch TrainingData::Get(int64_t step, int64_t micro_batch) const {
  const int64_t b = config_.batch_size, s = config_.seq_len;
  MicroBatch mb{Tensor(DataType::kInt64, {b, s}), Tensor(DataType::kInt64, {b, s}),
                Tensor(DataType::kInt64, {1})};
  mb.dropout_seed.i64()[0] =
      static_cast<int64_t>(ops::DropoutSeed(config_.seed, step, micro_batch));
  std::vector<int64_t> row(s + 1);
  for (int64_t r = 0; r < b; ++r) {
    FillRow(RowHash(config_.seed, step, micro_batch, r), row.data());
    std::copy(row.begin(), row.begin() + s, mb.tokens.i64() + r * s);
    std::copy(row.begin() + 1, row.end(), mb.labels.i64() + r * s);
  }
  return mb;
}

}  // namespace pw
