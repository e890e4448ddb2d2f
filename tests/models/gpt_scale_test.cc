// The GPT-3 175B-shaped module builds fast and stays small: it holds shapes and
// initializers, never parameter data.

#include <gtest/gtest.h>

#include <chrono>

#include "ir/proto_io.h"
#include "models/gpt.h"

namespace pw::models {
namespace {

TEST(GptScaleTest, Gpt175BBuildsInUnderASecondAndStaysSmall) {
  GptConfig c;
  c.layers = 96;
  c.hidden = 12288;
  c.heads = 96;
  c.ffn = 49152;
  c.seq = 2048;
  c.vocab = 51200;
  c.micro_batch_size = 1;
  c.mp = 8;
  c.pp = 16;
  auto start = std::chrono::steady_clock::now();
  StatusOr<Module> m = BuildGpt(c);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_LT(seconds, 1.0);

  const Program& p = m->main_program();
  // Vocabulary-parallel: the lookup is c_embedding + all-reduce, the head c_identity +
  // matmul + the parallel cross-entropy (6 ops) + mean.
  EXPECT_EQ(p.ops().size(), 3u + 96 * 18 + 10);
  int64_t params = 0;
  for (const Var& v : p.vars())
    if (v.is_parameter) params += v.num_elements();
  // One mp rank's share of the ~175B parameters (embeddings and head sharded too).
  EXPECT_GT(params, 20'000'000'000);
  EXPECT_LT(params, 25'000'000'000);

  StatusOr<std::string> bytes = SerializeModule(*m, ModuleFormat::kBinary);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_LT(bytes->size(), 2u << 20);
  for (int stage = 0; stage < 16; ++stage) {
    int ops_on_stage = 0;
    for (const Op& op : p.ops()) ops_on_stage += op.stage == stage;
    EXPECT_GE(ops_on_stage, 6 * 18) << "stage " << stage;
  }
}

}  // namespace
}  // namespace pw::models
