// sequence-parallel against the same module without it: training is bit-identical (losses
// and every parameter byte), GPT and Llama, mp 2, 4 and 8, one program and a 1f1b plan over
// two stages, f32 and bf16. Norm and bias parameter gradients add the ranks' row-group
// partial sums (mp dividing gcd(seq, 8)); at mp 3 the shards cut the groups and the
// activations are all-gathered instead. The same with the fused bias epilogues (the
// bias_dropout_add on the shards). Ranks run as threads; launcher_test repeats mp 2
// over Gloo processes.

#include <gtest/gtest.h>

#include <set>

#include "equivalence_util.h"
#include "ops/kernel.h"
#include "tests/small_gpt.h"
#include "tests/small_llama.h"

namespace pw::testing {
namespace {

constexpr int kSteps = 3;
constexpr int kMicroBatches = 4;
constexpr uint64_t kSeed = 3;

struct Case {
  const char* model = "gpt";
  int mp = 2;
  int pp = 1;
  bool bf16 = false;
  bool recompute = false;    // recompute{policy=selective}: re-gathers in the backward
  bool bias_fusion = false;  // gpt: bias_dropout_add runs on the shards
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.model << " mp=" << c.mp << " pp=" << c.pp << (c.bf16 ? " bf16" : " f32")
       << (c.recompute ? " selective recompute" : "") << (c.bias_fusion ? " bias fusion" : "");
}

StatusOr<Module> Build(const Case& c) {
  if (std::string(c.model) == "llama") {
    models::LlamaConfig l = SmallLlamaConfig(c.mp, c.pp);
    if (c.mp > l.heads) l.heads = l.kv_heads = c.mp;
    if (c.mp > l.kv_heads) l.kv_heads = c.mp;
    return models::BuildLlama(l);
  }
  models::GptConfig g = SmallGptConfig(c.mp, c.pp);
  g.bias_fusion = c.bias_fusion;
  if (c.mp > g.heads) g.heads = c.mp;
  if (c.mp == 3) {  // 3 heads of 16, vocabulary 3 x 32, sequence 24: 8 groups, 3 shards
    g.hidden = 48;
    g.heads = 3;
    g.ffn = 192;
    g.vocab = 96;
    g.seq = 24;
  }
  return models::BuildGpt(g);
}

StatusOr<Module> Planned(const Case& c, bool sequence_parallel) {
  PW_ASSIGN_OR_RETURN(Module m, Build(c));
  std::string pipeline = sequence_parallel ? "sequence-parallel," : "";
  pipeline += "append-backward{optimizer=adam,lr=0.01}";
  if (c.bf16) pipeline += ",amp{dtype=bf16}";
  if (c.recompute) pipeline += ",recompute{policy=selective}";
  if (c.pp > 1)
    pipeline +=
        StrCat(",split-program,schedule{kind=1f1b,micro-batches=", kMicroBatches, "},insert-p2p");
  return WithPasses(std::move(m), pipeline);
}

class SequenceParallel : public ::testing::TestWithParam<Case> {};

TEST_P(SequenceParallel, TrainsBitIdenticallyToThePlainModel) {
  ops::SetKernelThreads(1);
  const Case c = GetParam();
  auto plain = Planned(c, false);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  auto sp = Planned(c, true);
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  // Partial sums where mp divides the sequence's row groups, else the gathered sequence.
  int partial_sums = 0;
  for (const Program& p : sp->programs())
    for (const Op& op : p.ops()) partial_sums += op.type == "sum_row_partials";
  EXPECT_EQ(partial_sums > 0, c.mp != 3) << partial_sums << " sum_row_partials";
  auto base = RunAsThreads(*plain, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  auto run = RunAsThreads(*sp, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_LT(base->losses.back(), base->losses.front());  // it trains
  ExpectSameTraining(*sp, *run, *plain, *base, Match::kBitIdentical);
  // Activations held between the linears shrink: every rank's peak is lower.
  for (size_t r = 0; r < run->peak_bytes.size(); ++r)
    EXPECT_LT(run->peak_bytes[r], base->peak_bytes[r]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, SequenceParallel,
    ::testing::Values(Case{"gpt", 2}, Case{"gpt", 4}, Case{"gpt", 8}, Case{"gpt", 2, 2},
                      Case{"gpt", 2, 1, true}, Case{"llama", 2}, Case{"llama", 4},
                      Case{"llama", 2, 2}, Case{"llama", 4, 1, true},
                      Case{"gpt", 4, 2, false, true}, Case{"llama", 2, 1, true, true},
                      Case{"gpt", 3}, Case{"gpt", 2, 2, false, false, true},
                      Case{"gpt", 4, 1, true, true, true}, Case{"gpt", 3, 1, false, false, true}));

// With selective recomputation the all-gathers run again in the backward: no backward op
// reads a forward all-gather's output (the layer holds its sequence shard instead of the
// gathered input of its column-parallel linears), and the peak drops below sequence
// parallelism with the attention core recomputed alone (measured in the figures).
TEST(SequenceParallelRecompute, RegathersInTheBackward) {
  Case c{"gpt", 4};
  c.recompute = true;
  auto m = Planned(c, true);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::set<std::string> gathered;
  int regathers = 0;
  for (const Op& op : m->main_program().ops()) {
    // A layer's (the LM head's input is outside the layers, used right away by its backward).
    if (op.type == "c_all_gather" && op.role == OpRole::kForward &&
        op.Output("Out").rfind("layer", 0) == 0)
      gathered.insert(op.Output("Out"));
    if (op.type == "c_all_gather" && op.role == OpRole::kBackward &&
        op.Output("Out").find("@RECOMPUTE") != std::string::npos)
      ++regathers;
    if (op.role != OpRole::kBackward) continue;
    op.ForEachInput([&](const std::string& v) {
      EXPECT_FALSE(gathered.count(v)) << op.type << " reads the forward's gathered '" << v << "'";
    });
  }
  EXPECT_EQ(gathered.size(), 4u * 2);  // the QKV and FC1 inputs of 4 layers
  EXPECT_EQ(regathers, 4 * 2);
}

}  // namespace
}  // namespace pw::testing
