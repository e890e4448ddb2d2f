// The passes that only move ops between streams and reorder them (assign-streams,
// overlap-column-parallel-backward, insert-events) change nothing a step computes: the
// losses and every parameter are bit-identical to the same plan without them, for every
// schedule kind, with the executor adding no event of its own (--strict-events). Ranks run
// as threads; tests/executor_mt/launcher_test.cc repeats two kinds over Gloo processes.

#include <gtest/gtest.h>

#include <algorithm>

#include "cost_model/device_spec.h"
#include "cost_model/estimator.h"
#include "equivalence_util.h"
#include "executor/plan_check.h"
#include "models/gpt.h"
#include "ops/registry.h"
#include "passes/cost_inputs.h"
#include "tests/small_gpt.h"

namespace pw::testing {
namespace {

constexpr int kSteps = 2;
constexpr int kMicroBatches = 4;
constexpr const char* kOverlap = "assign-streams,overlap-column-parallel-backward,insert-events";
constexpr auto kLoop = models::ChunkPlacement::kLoop;
constexpr const char* k1F1B =
    "assign-streams,overlap-column-parallel-backward,overlap-1f1b,insert-events";
// Every eligible matmul cut in two (the model's seq 64 gives 128-row GEMMs, blocks of 64).
constexpr const char* k1F1BSplitAll =
    "assign-streams,overlap-column-parallel-backward,overlap-1f1b{split-ops=all},insert-events";
constexpr const char* kRowSplit =
    "assign-streams,overlap-column-parallel-backward,overlap-row-split,insert-events";
constexpr const char* kRowSplitAll =
    "assign-streams,overlap-column-parallel-backward,overlap-row-split{split-ops=all},"
    "insert-events";

struct Case {
  const char* kind;
  int vpp = 1;
  bool split_backward = false;
  models::ChunkPlacement placement = models::ChunkPlacement::kLoop;
  int dp = 1;
  const char* overlap = kOverlap;  // the passes B adds
  int seq = 16;
  int micro_batch_size = 2;  // 1: row blocks are views of their matmul's input (split{view})
  // Slows the H100's compute and links this much, so that on this small model the cost
  // model cuts forwards into row blocks (split-ops=auto) as it does at full size.
  double slower = 1;
  const char* after_backward = "";  // passes between append-backward and split-program
  int pp = 2;
  bool bias_fusion = false;  // row blocks carry the fused bias and residual add
  double dropout = 0;        // row blocks draw their rows' part of the dropout mask
};

void PrintTo(const Case& c, std::ostream* out) { *out << c.kind << " dp=" << c.dp; }

Module PlannedGpt(const Case& c) {
  models::GptConfig g = SmallGptConfig(2, c.pp, c.vpp, c.placement);
  g.seq = c.seq;
  g.micro_batch_size = c.micro_batch_size;
  g.bias_fusion = c.bias_fusion;
  g.dropout = c.dropout;
  g.unfused_attention = c.dropout > 0;  // the fused attention op has no dropout
  auto built = models::BuildGpt(g);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  built->mesh.dp = c.dp;
  std::string pipeline =
      StrCat("append-backward{optimizer=adam}", c.after_backward, ",split-program",
             c.split_backward ? "{split-backward=true}" : "", ",schedule{kind=", c.kind,
             ",micro-batches=", kMicroBatches, "},insert-p2p");
  auto planned = WithPasses(std::move(built).value(), pipeline);
  EXPECT_TRUE(planned.ok()) << pipeline << ": " << planned.status().ToString();
  return planned.ok() ? std::move(planned).value() : Module{};
}

StatusOr<LocalRunResult> Train(const Module& module, bool strict) {
  RankRunOptions o;
  o.steps = kSteps;
  o.data.data_seed = 1;
  o.strict_events = strict;
  return RunLocalRanks(module, o);
}

class OverlapEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(OverlapEquivalenceTest, BitIdenticalToThePlanWithoutThePasses) {
  Module plain = PlannedGpt(GetParam());
  ASSERT_FALSE(plain.plan.empty());
  // The passes price their choices on the H100 spec (overlap-1f1b needs a cost model).
  StatusOr<cost::DeviceSpec> spec = cost::BuiltinDeviceSpec("h100");
  ASSERT_TRUE(spec.ok());
  // The flat roofline, whose efficiency the slowdown scales (the kernel model's GEMM waves
  // would keep the tiny GEMMs of this GPT at their fixed overhead).
  spec->set_multiprocessors(0);
  spec->set_flops_efficiency(spec->flops_efficiency() / GetParam().slower);
  spec->set_intra_node_bandwidth(spec->intra_node_bandwidth() / GetParam().slower);
  auto estimator = cost::Estimator::Create(*spec, cost::OpCostTable{});
  ASSERT_TRUE(estimator.ok());
  PassContext context(ops::Registry());
  AttachCostModel(*estimator, context);
  PassManager pm;
  ASSERT_TRUE(pm.AddPipeline(GetParam().overlap).ok());
  StatusOr<Module> overlapped = plain;
  Status ran = pm.Run(*overlapped, context).status();
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  // What is compared is really rewritten: jobs cut into segments, matmuls into row blocks.
  auto count = [](const Module& m, auto pred) {
    int n = 0;
    for (const Program& p : m.programs()) n += pred(p);
    return n;
  };
  const std::string overlap = GetParam().overlap;
  const bool pairs = overlap.find("overlap-1f1b") != std::string::npos;
  const bool split_all = overlap == k1F1BSplitAll || overlap == kRowSplitAll;
  if (pairs)
    EXPECT_GT(count(*overlapped, [](const Program& p) { return !p.info().segment_of.empty(); }), 0);
  auto splits = [](const Program& p) {
    int n = 0;
    for (const Op& op : p.ops()) n += op.type == "split";
    return n;
  };
  if (split_all || GetParam().slower > 1) {
    EXPECT_GT(count(*overlapped, splits), count(plain, splits));
    // The bias and residual adds after a row-parallel all-reduce run per block too.
    auto tails = [](const Program& p) {
      int n = 0;
      for (const Op& op : p.ops())
        n += (op.type == "bias_add" || op.type == "add" || op.type == "bias_dropout_add") &&
             op.Output("Out").find("@ROWS") != std::string::npos;
      return n;
    };
    EXPECT_GT(count(*overlapped, tails), 0);
    // With dropout, the blocks carry it too, each drawing its rows of the whole mask.
    auto mask_blocks = [](const Program& p) {
      int n = 0;
      for (const Op& op : p.ops())
        n += (op.type == "dropout" || op.type == "bias_dropout_add") &&
             op.attrs.GetInt("block_count", 1) > 1;
      return n;
    };
    if (GetParam().dropout > 0) EXPECT_GT(count(*overlapped, mask_blocks), 0);
    // A split backward's input gradient has no weight gradient to hide its all-reduce under:
    // overlap-row-split cuts it too.
    if (GetParam().split_backward && !pairs)
      EXPECT_GT(count(*overlapped,
                      [&](const Program& p) {
                        return p.info().kind == "backward_input" ? splits(p) : 0;
                      }),
                0);
  }
  if (GetParam().micro_batch_size == 1) {
    auto views = [](const Program& p) {
      int n = 0;
      for (const Op& op : p.ops()) n += op.type == "split" && op.attrs.GetBool("view", false);
      return n;
    };
    EXPECT_GT(count(*overlapped, views), 0);
  }
  // Beyond two stages, warm-up forwards of a later stage run fused in pairs too.
  if (pairs && GetParam().pp > 2) {
    int later_stage_forward_pairs = 0;
    for (const RankPlan& rank : overlapped->plan.ranks)
      for (const Job& job : rank.jobs)
        later_stage_forward_pairs +=
            job.kind == JobKind::kOverlapFB &&
            std::all_of(job.sub_jobs.begin(), job.sub_jobs.end(), [](const Job& sub) {
              return sub.kind == JobKind::kForward && sub.stage > 0;
            });
    EXPECT_GT(later_stage_forward_pairs, 0);
  }
  if (pairs && GetParam().slower > 1)  // the row-split variants some forwards run
    EXPECT_GT(count(*overlapped, [](const Program& p) { return !p.info().variant_of.empty(); }), 0);

  // The executor adds no event of its own to the overlapped plan; the plain one needs them.
  LoweringOptions strict{ModuleInputs(plain), ModuleLoss(plain), true};
  Status check = CheckPlanForAllRanks(*overlapped, strict);
  ASSERT_TRUE(check.ok()) << check.ToString();
  EXPECT_FALSE(CheckPlanForAllRanks(plain, strict).ok());

  auto want = Train(plain, false);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  auto got = Train(*overlapped, true);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  std::vector<double> want_losses = want->Losses(), got_losses = got->Losses();
  ASSERT_EQ(got_losses.size(), static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) EXPECT_EQ(got_losses[s], want_losses[s]) << "step " << s;
  ASSERT_EQ(got->params.size(), want->params.size());
  int compared = 0;
  for (size_t r = 0; r < want->params.size(); ++r)
    for (const auto& [name, tensor] : want->params[r]) {
      auto it = got->params[r].find(name);
      ASSERT_NE(it, got->params[r].end()) << name;
      EXPECT_TRUE(SameBits(it->second, tensor)) << "rank " << r << " " << name;
      ++compared;
    }
  EXPECT_GT(compared, 0);
}

constexpr auto kV = models::ChunkPlacement::kV;

INSTANTIATE_TEST_SUITE_P(Schedules, OverlapEquivalenceTest,
                         ::testing::Values(Case{"fthenb"}, Case{"1f1b"}, Case{"eager-1f1b"},
                                           Case{"interleaved-1f1b", 2}, Case{"zb-h1", 1, true},
                                           Case{"zb-v", 2, true, kV},
                                           Case{"dualpipe-v", 2, true, kV},
                                           Case{"1f1b", 1, false, kLoop, 2}),
                         [](const auto& info) {
                           std::string name = StrCat(info.param.kind, "_dp", info.param.dp);
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// overlap-1f1b: fused, interleaved jobs train bit-identically too, with forced row splits
// as well.
INSTANTIATE_TEST_SUITE_P(
    Overlap1F1B, OverlapEquivalenceTest,
    ::testing::Values(Case{"1f1b", 1, false, kLoop, 1, k1F1B},
                      Case{"eager-1f1b", 1, false, kLoop, 1, k1F1B},
                      Case{"interleaved-1f1b", 2, false, kLoop, 1, k1F1B},
                      Case{"dualpipe-v", 2, true, kV, 1, k1F1B},
                      Case{"1f1b", 1, false, kLoop, 2, k1F1B},
                      Case{"1f1b", 1, false, kLoop, 1, k1F1BSplitAll, 64},
                      Case{"interleaved-1f1b", 2, false, kLoop, 2, k1F1BSplitAll, 64},
                      // Row blocks as views of the matmul's input.
                      Case{"1f1b", 1, false, kLoop, 1, k1F1BSplitAll, 128, 1},
                      // Warm-up forwards on row-split variants.
                      Case{"1f1b", 1, false, kLoop, 1, k1F1B, 128, 1, 1e4},
                      // Later stages' warm-up forwards in pairs.
                      Case{"1f1b", 1, false, kLoop, 1, k1F1B, 16, 2, 1, "", 4}),
    [](const auto& info) {
      std::string name = StrCat(info.param.kind, "_dp", info.param.dp,
                                info.param.pp != 2 ? StrCat("_pp", info.param.pp) : "",
                                info.param.overlap == k1F1BSplitAll ? "_split_all" : "",
                                info.param.micro_batch_size == 1 ? "_views" : "",
                                info.param.slower > 1 ? "_variants" : "");
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

// overlap-row-split: plans whose jobs run alone, their forwards and (split backward) input
// gradients cut into row blocks; forced, and by the cost model on a slowed H100.
INSTANTIATE_TEST_SUITE_P(
    OverlapRowSplit, OverlapEquivalenceTest,
    ::testing::Values(Case{"zb-h1", 1, true, kLoop, 1, kRowSplitAll, 64},
                      Case{"zb-h1", 1, true, kLoop, 1, kRowSplit, 128, 1, 1e4},
                      Case{"fthenb", 1, false, kLoop, 1, kRowSplit, 128, 1, 1e4},
                      Case{"1f1b", 1, false, kLoop, 2, kRowSplit, 128, 1, 1e4},
                      // bf16 compute: the blocks' bias and residual adds round alike too.
                      Case{"zb-h1", 1, true, kLoop, 1, kRowSplitAll, 64, 2, 1, ",amp{dtype=bf16}"},
                      // Fused bias epilogues (no dropout): bias_dropout_add runs per block.
                      Case{"zb-h1", 1, true, kLoop, 1, kRowSplitAll, 64, 2, 1, "", 2, true},
                      // Dropout: each block's dropout (fused, or its own op) draws its rows'
                      // part of the whole tensor's mask.
                      Case{"zb-h1", 1, true, kLoop, 1, kRowSplitAll, 64, 2, 1, "", 2, true, 0.1},
                      Case{"1f1b", 1, false, kLoop, 1, kRowSplitAll, 64, 2, 1, "", 2, false, 0.1}),
    [](const auto& info) {
      std::string name = StrCat(info.param.kind, "_dp", info.param.dp,
                                info.param.overlap == kRowSplitAll ? "_split_all" : "_cost_model",
                                *info.param.after_backward ? "_bf16" : "",
                                info.param.bias_fusion ? "_bias_fusion" : "",
                                info.param.dropout > 0 ? "_dropout" : "");
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

}  // namespace
}  // namespace pw::testing
