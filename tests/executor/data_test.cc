// Training data: deterministic per (seed, step, micro-batch), labels shifted by one, the
// synthetic stream learnable, the file stream reading byte windows.

#include "executor/data.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

namespace pw {
namespace {

using ::testing::HasSubstr;

DataConfig Synthetic() {
  return DataConfig{.batch_size = 4, .seq_len = 16, .vocab = 50, .seed = 3};
}

bool SameTokens(const MicroBatch& a, const MicroBatch& b) {
  return std::memcmp(a.tokens.raw(), b.tokens.raw(), a.tokens.nbytes()) == 0 &&
         std::memcmp(a.labels.raw(), b.labels.raw(), a.labels.nbytes()) == 0;
}

TEST(DataTest, DeterministicPerStepAndMicroBatch) {
  StatusOr<TrainingData> d1 = TrainingData::Open(Synthetic());
  StatusOr<TrainingData> d2 = TrainingData::Open(Synthetic());
  ASSERT_TRUE(d1.ok() && d2.ok());
  EXPECT_TRUE(SameTokens(d1->Get(5, 2), d2->Get(5, 2)));
  EXPECT_TRUE(SameTokens(d1->Get(5, 2), d1->Get(5, 2)));
  EXPECT_FALSE(SameTokens(d1->Get(5, 2), d1->Get(5, 3)));
  EXPECT_FALSE(SameTokens(d1->Get(5, 2), d1->Get(6, 2)));
  DataConfig other = Synthetic();
  other.seed = 4;
  EXPECT_FALSE(SameTokens(d1->Get(0, 0), TrainingData::Open(other)->Get(0, 0)));
}

TEST(DataTest, RowsDoNotDependOnBatchSize) {
  // Row r of a micro-batch is the same whatever the batch holds around it.
  DataConfig small = Synthetic();
  small.batch_size = 2;
  MicroBatch a = TrainingData::Open(Synthetic())->Get(1, 1);
  MicroBatch b = TrainingData::Open(small)->Get(1, 1);
  EXPECT_EQ(std::memcmp(a.tokens.raw(), b.tokens.raw(), b.tokens.nbytes()), 0);
}

TEST(DataTest, LabelsAreTokensShiftedByOne) {
  MicroBatch mb = TrainingData::Open(Synthetic())->Get(0, 0);
  EXPECT_EQ(mb.tokens.shape(), (Shape{4, 16}));
  EXPECT_EQ(mb.labels.shape(), (Shape{4, 16}));
  EXPECT_EQ(mb.tokens.dtype(), DataType::kInt64);
  for (int r = 0; r < 4; ++r)
    for (int i = 0; i + 1 < 16; ++i)
      EXPECT_EQ(mb.labels.i64()[r * 16 + i], mb.tokens.i64()[r * 16 + i + 1]);
}

TEST(DataTest, SyntheticStreamIsLearnable) {
  // The next token is a fixed function of the current one, across rows, steps and
  // micro-batches; and the stream reaches much of the vocabulary.
  StatusOr<TrainingData> data = TrainingData::Open(Synthetic());
  std::map<int64_t, int64_t> next;
  for (int step = 0; step < 4; ++step) {
    MicroBatch mb = data->Get(step, step % 2);
    for (int64_t i = 0; i < mb.tokens.numel(); ++i) {
      int64_t t = mb.tokens.i64()[i], l = mb.labels.i64()[i];
      ASSERT_GE(t, 0);
      ASSERT_LT(t, 50);
      auto [it, inserted] = next.emplace(t, l);
      EXPECT_EQ(it->second, l) << "token " << t;
    }
  }
  EXPECT_GT(next.size(), 25u);
}

class FileDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/pw_data_test.txt";
    std::ofstream(path_) << text_;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
  std::string text_ = "the quick brown fox jumps over the lazy dog, again and again.";
};

TEST_F(FileDataTest, ReadsByteWindows) {
  DataConfig c{.batch_size = 3, .seq_len = 8, .vocab = 256, .seed = 1, .file = path_};
  StatusOr<TrainingData> data = TrainingData::Open(c);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  MicroBatch mb = data->Get(2, 1);
  for (int r = 0; r < 3; ++r) {
    std::string window;
    for (int i = 0; i < 8; ++i) window += static_cast<char>(mb.tokens.i64()[r * 8 + i]);
    window += static_cast<char>(mb.labels.i64()[r * 8 + 7]);
    EXPECT_NE(text_.find(window), std::string::npos) << window;
  }
  EXPECT_TRUE(SameTokens(mb, TrainingData::Open(c)->Get(2, 1)));
}

TEST_F(FileDataTest, RejectsSmallVocabAndShortFiles) {
  DataConfig c{.batch_size = 1, .seq_len = 8, .vocab = 128, .seed = 1, .file = path_};
  StatusOr<TrainingData> data = TrainingData::Open(c);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), HasSubstr("vocab >= 256"));
  c.vocab = 256;
  c.seq_len = 1000;
  data = TrainingData::Open(c);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), HasSubstr("fewer than sequence length + 1"));
  c.file = path_ + ".missing";
  EXPECT_FALSE(TrainingData::Open(c).ok());
}

}  // namespace
}  // namespace pw
