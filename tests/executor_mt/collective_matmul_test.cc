// overlap-collective-matmul (and defer-weight-grads, below) against the same plan without
// it: training is bit-identical (losses and every parameter byte) at mp 2, 4 and 8, f32 and bf16,
// one stage and 1f1b, zero-bubble and interleaved schedules, and behind overlap-1f1b. Ranks run as
// threads; the pass decomposes every all-gather and reduce-scatter it can (decompose=all), so each
// case runs the shifts, block matmuls and member-order joins.

#include <gtest/gtest.h>

#include <map>

#include "cost_model/device_spec.h"
#include "cost_model/estimator.h"
#include "equivalence_util.h"
#include "ops/kernel.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

constexpr int kSteps = 2;
constexpr int kMicroBatches = 4;
constexpr uint64_t kSeed = 5;

struct Case {
  int mp = 2;
  int pp = 1;
  bool bf16 = false;
  const char* kind = "1f1b";
  bool overlap_1f1b = false;
  int batch = 4;  // 1: each member's rows are a view of the matmul's input (c_split{view})
  int seq = 128;
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << "mp=" << c.mp << " pp=" << c.pp << (c.bf16 ? " bf16 " : " f32 ") << c.kind
       << (c.overlap_1f1b ? " overlap-1f1b" : "") << " batch " << c.batch << " seq " << c.seq;
}

// Blocks of at least 64 GEMM rows and 64 columns (row_split.h's floor): seq 128 x 4
// samples / 8 = 64 rows at mp 8; the QKV linear's 3 x 128 / 4 = 96 columns at mp 4 (hidden
// 256 at mp 8).
models::GptConfig Config(const Case& c) {
  models::GptConfig g =
      SmallGptConfig(c.mp, c.pp, std::string(c.kind) == "interleaved-1f1b" ? 2 : 1);
  g.layers = 2 * c.pp * g.vpp;
  g.hidden = c.mp == 8 ? 256 : 128;
  g.heads = 8;
  g.seq = c.seq;
  g.micro_batch_size = c.batch;
  return g;
}

// Runs `pipeline` on `m` with the H100 spec's cost model attached to `context`.
Status RunOnH100(Module& m, const std::string& pipeline, PassContext& context) {
  PW_ASSIGN_OR_RETURN(cost::DeviceSpec spec, cost::BuiltinDeviceSpec("h100"));
  PW_ASSIGN_OR_RETURN(auto estimator, cost::Estimator::Create(spec, cost::OpCostTable{}));
  AttachCostModel(estimator, context);
  PassManager pm;
  PW_RETURN_IF_ERROR(pm.AddPipeline(pipeline));
  return pm.Run(m, context).status();
}

StatusOr<Module> Planned(const Case& c, bool collective_matmul) {
  PW_ASSIGN_OR_RETURN(Module m, models::BuildGpt(Config(c)));
  const std::string kind = c.kind;
  const bool split_backward = kind.rfind("zb", 0) == 0;
  std::string pipeline = "sequence-parallel,append-backward{optimizer=adam,lr=0.01}";
  if (c.bf16) pipeline += ",amp{dtype=bf16}";
  pipeline += split_backward ? ",split-program{split-backward=true}" : ",split-program";
  pipeline += StrCat(",schedule{kind=", kind, ",micro-batches=", kMicroBatches, "},insert-p2p");
  pipeline += ",assign-streams";
  if (collective_matmul) pipeline += ",overlap-collective-matmul{decompose=all}";
  if (c.overlap_1f1b) pipeline += ",overlap-column-parallel-backward,overlap-1f1b";
  pipeline += ",insert-events";
  if (!c.overlap_1f1b) return WithPasses(std::move(m), pipeline);
  // overlap-1f1b prices its pairs.
  PassContext context(ops::Registry());
  PW_RETURN_IF_ERROR(RunOnH100(m, pipeline, context));
  return m;
}

std::map<std::string, int> CountOps(const Module& m) {
  std::map<std::string, int> counts;
  for (const Program& p : m.programs())
    for (const Op& op : p.ops()) ++counts[op.type];
  return counts;
}

// `rewritten` trains to the bit like `plain`: losses and every parameter byte.
void ExpectTrainsLike(const Module& plain, const Module& rewritten) {
  auto base = RunAsThreads(plain, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  auto run = RunAsThreads(rewritten, kSteps, kMicroBatches, kSeed);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectSameTraining(rewritten, *run, plain, *base, Match::kBitIdentical);
}

class CollectiveMatmul : public ::testing::TestWithParam<Case> {};

TEST_P(CollectiveMatmul, TrainsBitIdenticallyToTheSequenceParallelPlan) {
  ops::SetKernelThreads(1);
  const Case c = GetParam();
  auto plain = Planned(c, false);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  auto cm = Planned(c, true);
  ASSERT_TRUE(cm.ok()) << cm.status().ToString();
  // Every all-gather feeding the QKV and FC1 linears and every reduce-scatter after the
  // projection and FC2 linears is decomposed, forward and backward.
  std::map<std::string, int> before = CountOps(*plain), after = CountOps(*cm);
  EXPECT_GT(after["c_member_concat"], 0);
  EXPECT_GT(after["c_member_sum"], 0);
  EXPECT_LT(after["c_all_gather"], before["c_all_gather"]);
  EXPECT_LT(after["c_reduce_scatter_sum"], before["c_reduce_scatter_sum"]);
  EXPECT_GT(after["c_shift"], 0);
  int views = 0;
  for (const Program& p : cm->programs())
    for (const Op& op : p.ops()) views += op.type == "c_split" && op.attrs.GetBool("view", false);
  if (c.batch == 1) EXPECT_GT(views, 0);
  ExpectTrainsLike(*plain, *cm);
}

INSTANTIATE_TEST_SUITE_P(Layouts, CollectiveMatmul,
                         ::testing::Values(Case{2}, Case{4}, Case{8}, Case{4, 2, true},
                                           Case{2, 2, false, "zb-h1"},
                                           Case{2, 2, false, "interleaved-1f1b"},
                                           Case{2, 2, false, "1f1b", true},
                                           Case{4, 1, false, "1f1b", false, 1, 256}));

// Sequence chunks (passes/streams/sequence_chunks.h, through overlap-1f1b{split-ops=all}):
// every forward's all-gathers and reduce-scatters cut in two chunks of every member's rows
// with their matmuls, and the rows put back in sequence order, train to the bit like the
// plan without overlap-1f1b. Batch 1: the slices are views; batch 4: copies.
StatusOr<Module> PlannedWithChunks(const Case& c, bool chunked, int64_t* gathers,
                                   int64_t* scatters) {
  PW_ASSIGN_OR_RETURN(Module m, models::BuildGpt(Config(c)));
  std::string pipeline = "sequence-parallel,append-backward{optimizer=adam,lr=0.01}";
  if (c.bf16) pipeline += ",amp{dtype=bf16}";
  pipeline += StrCat(",split-program,schedule{kind=", c.kind, ",micro-batches=", kMicroBatches,
                     "},insert-p2p,assign-streams");
  if (chunked) pipeline += ",overlap-1f1b{split-ops=all}";
  pipeline += ",insert-events";
  PassContext context(ops::Registry());
  PW_RETURN_IF_ERROR(RunOnH100(m, pipeline, context));
  for (const PassStatistics& s : context.statistics())
    for (const auto& [name, value] : s.counters) {
      if (name == "sequence-gathers-chunked") *gathers = value;
      if (name == "sequence-scatters-chunked") *scatters = value;
    }
  return m;
}

class SequenceChunks : public ::testing::TestWithParam<Case> {};

TEST_P(SequenceChunks, TrainBitIdenticallyToTheWholeCollectives) {
  ops::SetKernelThreads(1);
  const Case c = GetParam();
  int64_t gathers = 0, scatters = 0;
  auto plain = PlannedWithChunks(c, false, &gathers, &scatters);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  auto chunked = PlannedWithChunks(c, true, &gathers, &scatters);
  ASSERT_TRUE(chunked.ok()) << chunked.status().ToString();
  // At least the QKV gather (FC1's too where its 256 / mp columns reach 64, and the
  // head's) and the projection and FC2 scatters of every layer.
  const int layers = Config(c).layers;
  EXPECT_GE(gathers, c.mp == 8 ? layers : 2 * layers);
  EXPECT_EQ(scatters, 2 * layers);
  ExpectTrainsLike(*plain, *chunked);
}

INSTANTIATE_TEST_SUITE_P(Layouts, SequenceChunks,
                         ::testing::Values(Case{2, 2}, Case{4, 1, true}, Case{8},
                                           Case{4, 2, false, "1f1b", false, 1, 256},
                                           Case{2, 2, true, "interleaved-1f1b"}));

// defer-weight-grads moves weight-gradient work under the collectives that follow it: the
// same training, to the bit, as the plan without it (with and without sequence parallelism,
// f32 and bf16, and behind overlap-1f1b).
struct DeferCase {
  Case layout;
  bool sequence_parallel = true;
};

void PrintTo(const DeferCase& c, std::ostream* out) {
  PrintTo(c.layout, out);
  *out << (c.sequence_parallel ? " sp" : " no sp");
}

class DeferWeightGrads : public ::testing::TestWithParam<DeferCase> {};

StatusOr<Module> PlannedForDefer(const DeferCase& c, bool defer, int64_t* moved) {
  PW_ASSIGN_OR_RETURN(Module m, models::BuildGpt(Config(c.layout)));
  std::string pipeline = c.sequence_parallel ? "sequence-parallel," : "";
  pipeline += "append-backward{optimizer=adam,lr=0.01}";
  if (c.layout.bf16) pipeline += ",amp{dtype=bf16}";
  pipeline += StrCat(",split-program,schedule{kind=", c.layout.kind,
                     ",micro-batches=", kMicroBatches, "},insert-p2p,assign-streams");
  pipeline += ",overlap-column-parallel-backward";
  if (defer) pipeline += ",defer-weight-grads";
  if (c.layout.overlap_1f1b) pipeline += ",overlap-1f1b";
  pipeline += ",insert-events";
  PassContext context(ops::Registry());
  PW_RETURN_IF_ERROR(RunOnH100(m, pipeline, context));
  for (const PassStatistics& s : context.statistics())
    for (const auto& [name, value] : s.counters)
      if (s.pass == "defer-weight-grads" && name == "weight-grad-ops-moved") *moved = value;
  return m;
}

TEST_P(DeferWeightGrads, TrainsBitIdenticallyToThePlanWithoutIt) {
  ops::SetKernelThreads(1);
  const DeferCase c = GetParam();
  int64_t moved = 0;
  auto plain = PlannedForDefer(c, false, &moved);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  auto deferred = PlannedForDefer(c, true, &moved);
  ASSERT_TRUE(deferred.ok()) << deferred.status().ToString();
  EXPECT_GT(moved, 0);
  ExpectTrainsLike(*plain, *deferred);
}

INSTANTIATE_TEST_SUITE_P(Layouts, DeferWeightGrads,
                         ::testing::Values(DeferCase{Case{2, 2}}, DeferCase{Case{4, 1, true}},
                                           DeferCase{Case{2, 2, false, "1f1b", true}},
                                           DeferCase{Case{2, 2}, false}));

}  // namespace
}  // namespace pw::testing
