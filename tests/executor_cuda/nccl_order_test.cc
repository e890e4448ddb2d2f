// NCCL matches a send with a receive by their order on a communicator, not by tag, so the
// CUDA backend can run a pipeline plan only if, between every two ranks, the sender
// queues its transfers in the order the receiver queues the matching receives. The NCCL
// comm checks this when it connects; this test checks, without a GPU, which plans our
// schedules produce satisfy it: every rank is lowered with a backend that only records.

#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "executor/instr.h"
#include "executor/lowering.h"
#include "executor/training_feed.h"
#include "models/gpt.h"
#include "models/unet.h"
#include "passes/pass_manager.h"

namespace pw::testing {
namespace {

class NullEvent final : public Event {
 public:
  void Reset() override {}
};

// Records, per ordered pair of ranks, the tags of the transfers in queue order.
class RecordingBackend final : public Backend {
 public:
  std::string_view name() const override { return "recording"; }
  StatusOr<Stream*> GetStream(StreamType) override { return Internal("no streams"); }
  std::unique_ptr<Event> CreateEvent() override { return std::make_unique<NullEvent>(); }
  Status Prepare(Instr& instr) override {
    if (instr.kind == Instr::Kind::kSend) sends[{rank, instr.peer}].push_back(instr.tag);
    if (instr.kind == Instr::Kind::kRecv) recvs[{instr.peer, rank}].push_back(instr.tag);
    return OkStatus();
  }

  int rank = 0;
  std::map<std::pair<int, int>, std::vector<uint64_t>> sends, recvs;  // (from, to)
};

size_t FirstDifference(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

// The transfers of every pair, or the first pair whose two sides disagree.
Status CheckTransferOrder(const Module& module) {
  RecordingBackend backend;
  LoweringOptions options;
  options.feeds = ModuleInputs(module);
  options.loss = ModuleLoss(module);
  for (int rank = 0; rank < module.mesh.world_size(); ++rank) {
    backend.rank = rank;
    MemoryTracker memory;
    PW_ASSIGN_OR_RETURN(auto lowered, LowerRankPlan(module, rank, backend, memory, options));
  }
  if (backend.sends.empty()) return Internal("the plan has no transfers");
  if (backend.recvs.size() != backend.sends.size()) return FailedPrecondition("unmatched receives");
  for (const auto& [pair, tags] : backend.sends) {
    auto it = backend.recvs.find(pair);
    if (it == backend.recvs.end() || it->second != tags)
      return FailedPrecondition(
          "rank ", pair.first, " sends to rank ", pair.second, " in another order than rank ",
          pair.second, " receives (", tags.size(), " transfers; first difference at ",
          FirstDifference(tags, it == backend.recvs.end() ? std::vector<uint64_t>{} : it->second),
          ")");
  }
  return OkStatus();
}

StatusOr<Module> Planned(StatusOr<Module> built, const std::string& schedule, int micro_batches,
                         bool split_backward = false) {
  PW_ASSIGN_OR_RETURN(Module m, std::move(built));
  PassManager pm;
  PW_RETURN_IF_ERROR(pm.AddPipeline(
      StrCat("append-backward,split-program", split_backward ? "{split-backward=true}" : "",
             ",schedule{kind=", schedule, ",micro-batches=", micro_batches, "},insert-p2p")));
  PW_RETURN_IF_ERROR(pm.Run(m).status());
  return m;
}

struct OrderCase;
void PrintTo(const OrderCase& c, std::ostream* out);

struct OrderCase {
  const char* kind;
  int pp;
  int vpp;
  int mp;
  bool split_backward = false;  // zero-bubble schedules run B and W apart
  models::ChunkPlacement placement = models::ChunkPlacement::kLoop;
  // Why the plan's orders differ, when they do: NCCL then refuses it when connecting.
  const char* differs = nullptr;
};

// With the V placement, ranks 0 and 1 exchange chunk 0's activations and chunk 1's
// gradients over one pair in the same direction, and the schedule queues them in
// different orders on the two sides. Gloo matches by tag and runs it; NCCL cannot.
constexpr const char* kVOrder =
    "zb-v: forward and backward transfers between two ranks are queued in different orders";

void PrintTo(const OrderCase& c, std::ostream* out) {
  *out << c.kind << " pp=" << c.pp << " vpp=" << c.vpp << " mp=" << c.mp;
}

class TransferOrderTest : public ::testing::TestWithParam<OrderCase> {};

TEST_P(TransferOrderTest, GptPlanSendsInTheOrderItReceives) {
  const OrderCase& c = GetParam();
  models::GptConfig g;
  g.layers = 8;
  g.hidden = 32;
  g.heads = 2;
  g.ffn = 64;
  g.seq = 8;
  g.vocab = 32;
  g.pp = c.pp;
  g.vpp = c.vpp;
  g.mp = c.mp;
  g.placement = c.placement;
  auto module = Planned(models::BuildGpt(g), c.kind, 8, c.split_backward);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  Status order = CheckTransferOrder(*module);
  if (c.differs) {
    EXPECT_FALSE(order.ok()) << "the plan's transfer orders now agree: drop the note '" << c.differs
                             << "'";
  } else {
    EXPECT_TRUE(order.ok()) << order.ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, TransferOrderTest,
    ::testing::Values(OrderCase{"fthenb", 2, 1, 1}, OrderCase{"1f1b", 2, 1, 1},
                      OrderCase{"1f1b", 4, 1, 2}, OrderCase{"eager-1f1b", 4, 1, 1},
                      OrderCase{"interleaved-1f1b", 2, 2, 1},
                      OrderCase{"interleaved-1f1b", 4, 2, 1}, OrderCase{"zb-h1", 4, 1, 1, true},
                      OrderCase{"zb-h2", 4, 1, 1, true},
                      OrderCase{"zb-v", 4, 2, 1, true, models::ChunkPlacement::kV, kVOrder}),
    [](const auto& info) {
      std::string name = StrCat(info.param.kind, "_pp", info.param.pp, "_vpp", info.param.vpp,
                                "_mp", info.param.mp);
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

// Skip connections: transfers between ranks that are not neighbours, both directions.
TEST(TransferOrderTest, UnetPlanSendsInTheOrderItReceives) {
  models::UnetConfig u;
  u.layers = 8;
  u.hidden = 32;
  u.seq = 8;
  u.vocab = 32;
  u.pp = 4;
  auto module = Planned(models::BuildUnet(u), "1f1b", 8);
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  Status order = CheckTransferOrder(*module);
  EXPECT_TRUE(order.ok()) << order.ToString();
}

}  // namespace
}  // namespace pw::testing
