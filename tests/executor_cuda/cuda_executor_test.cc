// The CUDA backend running real plans (needs a GPU; skips with the reason otherwise):
// the small GPT on one rank against the CPU reference runner, two streams ordered only by
// a plan event, a device-side check failing a step, and — with two GPUs — ranks over NCCL
// (tensor and pipeline parallel) against the reference.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <thread>

#include "cuda_test_util.h"
#include "executor/backend_factory.h"
#include "executor/comm/kv_store.h"
#include "executor/cuda/cuda_backend.h"
#include "executor/interpreter.h"
#include "executor/rank_runner.h"
#include "executor/reference_runner.h"
#include "models/gpt.h"
#include "passes/pass_manager.h"

namespace pw::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr int kSteps = 3;
constexpr int kMicroBatches = 4;
constexpr double kLossTolerance = 1e-4;  // relative; GEMMs sum in another order

StatusOr<Module> Gpt(int mp, int pp, const std::string& passes) {
  models::GptConfig c;
  c.layers = 2;
  c.hidden = 64;
  c.heads = 4;
  c.ffn = 128;
  c.seq = 16;
  c.vocab = 128;
  c.micro_batch_size = 2;
  c.mp = mp;
  c.pp = pp;
  PW_ASSIGN_OR_RETURN(Module m, models::BuildGpt(c));
  PassManager pm;
  PW_RETURN_IF_ERROR(pm.AddPipeline(passes));
  PW_RETURN_IF_ERROR(pm.Run(m).status());
  return m;
}

std::vector<double> ReferenceLosses() {
  auto module = Gpt(1, 1, "append-backward");
  EXPECT_TRUE(module.ok()) << module.status().ToString();
  ReferenceOptions o;
  o.steps = kSteps;
  o.micro_batches = kMicroBatches;
  o.data_seed = 1;
  auto ref = RunReference(*module, o);
  EXPECT_TRUE(ref.ok()) << ref.status().ToString();
  return ref.ok() ? ref->losses : std::vector<double>{};
}

void ExpectLossesNear(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < want.size(); ++s)
    EXPECT_NEAR(got[s], want[s], kLossTolerance * std::fabs(want[s])) << "step " << s;
}

TEST(CudaExecutorTest, SmallGptOnOneRankMatchesTheReference) {
  PW_REQUIRE_CUDA_DEVICES(1);
  auto module = Gpt(1, 1, "append-backward");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  std::vector<double> losses;
  std::map<std::string, Tensor> gpu_params, cpu_params;
  RankRunOptions o;
  o.steps = kSteps;
  o.micro_batches = kMicroBatches;
  o.data.data_seed = 1;
  o.on_step = [&](const RankStepReport& r) { losses.push_back(r.loss_sum / r.loss_count); };
  o.backend = BackendKind::kCuda;
  o.final_params = &gpu_params;
  Status s = RunRank(*module, nullptr, o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectLossesNear(losses, ReferenceLosses());

  o.backend = BackendKind::kCpu;
  o.on_step = nullptr;
  o.final_params = &cpu_params;
  ASSERT_TRUE(RunRank(*module, nullptr, o).ok());
  ASSERT_EQ(gpu_params.size(), cpu_params.size());
  for (const auto& [name, want] : cpu_params) {
    const Tensor& got = gpu_params.at(name);
    ASSERT_TRUE(got.on_host()) << name;
    ASSERT_EQ(got.shape(), want.shape()) << name;
    double scale = 0, diff = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      scale = std::max(scale, std::fabs(double{want.f32()[i]}));
      diff = std::max(diff, std::fabs(double{got.f32()[i]} - want.f32()[i]));
    }
    EXPECT_LE(diff, 1e-4 * std::max(1.0, scale)) << name;
  }
}

Var F32(const std::string& name, Shape shape, bool persistable = false) {
  Var v;
  v.name = name;
  v.shape = std::move(shape);
  v.persistable = persistable;
  return v;
}

// One program run per micro-batch.
Module OneProgramModule(Program program, int micro_batches) {
  Module m;
  m.name = "test";
  std::string name = program.name();
  m.AddProgram(std::move(program));
  m.plan.num_micro_batches = micro_batches;
  m.plan.num_stages = 1;
  m.plan.stage_to_rank = {0};
  RankPlan r;
  for (int mb = 0; mb < micro_batches; ++mb) {
    Job j;
    j.kind = JobKind::kForward;
    j.stage = 0;
    j.micro_batch = mb;
    j.program = name;
    r.jobs.push_back(j);
  }
  m.plan.ranks.push_back(r);
  return m;
}

// compute makes y from x through a chain of large element-wise kernels and records
// "y_ready"; mp_comm waits on it and takes the mean. Without the wait the mean would read
// y before (or while) it is written.
Module TwoStreamModule(int64_t n) {
  Program p("p");
  p.info().kind = "forward";
  p.info().stage = 0;
  for (const char* v : {"x", "y0", "y1", "y2", "y3"}) p.AddVar(F32(v, {n}));
  p.AddVar(F32("loss", {}));
  const char* chain[] = {"x", "y0", "y1", "y2", "y3"};
  for (int i = 0; i < 4; ++i) {
    Op op;
    op.type = i % 2 ? "scale" : "gelu";
    op.SetInput("X", {chain[i]}).SetOutput("Out", {chain[i + 1]});
    if (i % 2) op.SetAttr("scale", 1.5).SetAttr("bias", 0.25);
    if (i == 3) op.record_events = {"y_ready"};
    p.AddOp(std::move(op));
  }
  Op mean;
  mean.type = "mean";
  mean.SetInput("X", {"y3"}).SetOutput("Out", {"loss"});
  mean.stream = "mp_comm";
  mean.wait_events = {"y_ready"};
  p.AddOp(std::move(mean));
  return OneProgramModule(std::move(p), 3);
}

StatusOr<std::vector<double>> RunSteps(const Module& module, Backend& backend, int steps,
                                       const Interpreter::FeedFn& feed, int64_t* held = nullptr) {
  InterpreterOptions o;
  o.lowering.feeds = {"x"};
  o.lowering.loss = "loss";
  PW_ASSIGN_OR_RETURN(auto interp, Interpreter::Create(module, 0, backend, o));
  EXPECT_EQ(interp->lowered().auto_events, 0);  // the plan's event orders the streams
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    PW_ASSIGN_OR_RETURN(StepStats stats, interp->RunStep(feed));
    losses.insert(losses.end(), stats.losses.begin(), stats.losses.end());
  }
  if (held) *held = interp->memory().current();
  return losses;
}

TEST(CudaExecutorTest, PlanEventOrdersTwoStreams) {
  PW_REQUIRE_CUDA_DEVICES(1);
  const int64_t n = int64_t{1} << 22;
  Module m = TwoStreamModule(n);
  auto feed = [n](const std::string&, int mb) -> StatusOr<Tensor> {
    Tensor t(DataType::kFloat32, {n});
    for (int64_t i = 0; i < n; ++i) t.f32()[i] = static_cast<float>((i % 97) * 0.01 - 0.4 + mb);
    return t;
  };
  auto gpu = cuda::CudaBackend::Create({});
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  int64_t held = -1;
  auto got = RunSteps(m, **gpu, 2, feed, &held);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(held, 0);  // every intermediate was freed
  auto cpu = MakeBackend({});
  ASSERT_TRUE(cpu.ok());
  auto want = RunSteps(m, **cpu, 2, feed);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < want->size(); ++i)
    EXPECT_NEAR((*got)[i], (*want)[i], 1e-5 * std::fabs((*want)[i])) << "micro-batch " << i;
}

TEST(CudaExecutorTest, DeviceCheckFailsTheStepAndTheNextStepRuns) {
  PW_REQUIRE_CUDA_DEVICES(1);
  Program p("p");
  p.info().kind = "forward";
  p.info().stage = 0;
  Var ids = F32("x", {2, 4});
  ids.dtype = DataType::kInt64;
  p.AddVar(ids);
  p.AddVar(F32("w", {10, 8}, true));
  p.AddVar(F32("e", {2, 4, 8}));
  p.AddVar(F32("loss", {}));
  Op embed;
  embed.type = "embedding";
  embed.SetInput("Ids", {"x"}).SetInput("W", {"w"}).SetOutput("Out", {"e"});
  p.AddOp(std::move(embed));
  Op mean;
  mean.type = "mean";
  mean.SetInput("X", {"e"}).SetOutput("Out", {"loss"});
  p.AddOp(std::move(mean));
  Module m = OneProgramModule(std::move(p), 1);

  auto gpu = cuda::CudaBackend::Create({});
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  InterpreterOptions o;
  o.lowering.feeds = {"x"};
  o.lowering.loss = "loss";
  auto interp = Interpreter::Create(m, 0, **gpu, o);
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  Tensor w(DataType::kFloat32, {10, 8});
  w.Fill(0.5f);
  ASSERT_TRUE((*interp)->SetPersistent("w", w).ok());
  int64_t bad_id = 10;
  auto feed = [&bad_id](const std::string&, int) -> StatusOr<Tensor> {
    Tensor t(DataType::kInt64, {2, 4});
    for (int64_t i = 0; i < 8; ++i) t.i64()[i] = i;
    t.i64()[5] = bad_id;
    return t;
  };
  auto failed = (*interp)->RunStep(feed);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("op 0 (embedding)"));
  EXPECT_THAT(failed.status().message(),
              HasSubstr("embedding: Ids[5] = 10 is out of range [0, 10)"));
  bad_id = 3;
  auto ok = (*interp)->RunStep(feed);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->losses.size(), 1u);
  EXPECT_FLOAT_EQ(ok->losses[0], 0.5);
  auto host = (*interp)->PersistentOnHost("w");
  ASSERT_TRUE(host.ok());
  EXPECT_TRUE(host->on_host());
  EXPECT_EQ(host->f32()[79], 0.5f);
}

// Ranks as threads, one GPU each, NCCL between them through a directory store.
StatusOr<std::vector<double>> RunOverNccl(const Module& module) {
  const int world = module.mesh.world_size();
  fs::path dir = fs::temp_directory_path() / ("pw-nccl-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::vector<std::vector<RankStepReport>> reports(world);
  std::vector<Status> status(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      auto store = OpenStore(dir.string());
      if (!store.ok()) {
        status[rank] = store.status();
        return;
      }
      auto comm = MakeCommFactory(BackendKind::kCuda, **store, module.mesh, rank, GlooOptions{});
      if (!comm.ok()) {
        status[rank] = comm.status();
        return;
      }
      RankRunOptions o;
      o.rank = rank;
      o.steps = kSteps;
      o.micro_batches = kMicroBatches;
      o.data.data_seed = 1;
      o.backend = BackendKind::kCuda;
      o.device = rank;
      o.on_step = [&reports, rank](const RankStepReport& r) { reports[rank].push_back(r); };
      status[rank] = RunRank(module, comm->get(), o);
    });
  }
  for (auto& t : threads) t.join();
  fs::remove_all(dir);
  for (const Status& s : status) PW_RETURN_IF_ERROR(s);
  std::vector<double> losses(kSteps, 0.0);
  std::vector<int> counts(kSteps, 0);
  for (const auto& rank_reports : reports)
    for (const RankStepReport& r : rank_reports) {
      losses[r.step] += r.loss_sum;
      counts[r.step] += r.loss_count;
    }
  for (int s = 0; s < kSteps; ++s) losses[s] /= std::max(1, counts[s]);
  return losses;
}

TEST(CudaExecutorTest, TensorParallelRanksOverNcclMatchTheReference) {
  PW_REQUIRE_CUDA_DEVICES(2);
  auto module = Gpt(2, 1, "append-backward");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto losses = RunOverNccl(*module);
  ASSERT_TRUE(losses.ok()) << losses.status().ToString();
  ExpectLossesNear(*losses, ReferenceLosses());
}

TEST(CudaExecutorTest, PipelineRanksOverNcclMatchTheReference) {
  PW_REQUIRE_CUDA_DEVICES(2);
  auto module =
      Gpt(1, 2,
          StrCat("append-backward,split-program,schedule{kind=1f1b,micro-batches=", kMicroBatches,
                 "},insert-p2p"));
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  auto losses = RunOverNccl(*module);
  ASSERT_TRUE(losses.ok()) << losses.status().ToString();
  ExpectLossesNear(*losses, ReferenceLosses());
}

}  // namespace
}  // namespace pw::testing
