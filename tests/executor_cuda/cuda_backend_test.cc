// The CUDA backend where no GPU is needed: choosing it by name, the clear error it gives
// on a machine without a device (API, training loop, embedding API, command line), and
// the NCCL communicator's declarations. Runs everywhere; the device parts skip or invert
// when a GPU is present.

#include "executor/cuda/cuda_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cuda_test_util.h"
#include "executor/backend_factory.h"
#include "executor/executor.h"
#include "executor/rank_runner.h"
#include "ir/proto_io.h"
#include "models/gpt.h"
#include "passes/pass_manager.h"

#if PW_HAVE_NCCL
#include "executor/comm/nccl_comm.h"
#include "executor/cuda/device_comm.h"
#endif

namespace pw::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace fs = std::filesystem;

Module SmallGpt() {
  models::GptConfig c;
  c.layers = 1;
  c.hidden = 32;
  c.heads = 2;
  c.ffn = 64;
  c.seq = 8;
  c.vocab = 32;
  auto built = models::BuildGpt(c);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  Module m = std::move(built).value();
  PassManager pm;
  EXPECT_TRUE(pm.AddPipeline("append-backward").ok());
  EXPECT_TRUE(pm.Run(m).ok());
  return m;
}

fs::path TempDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("pw-cuda-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(BackendKindTest, ParsesNames) {
  EXPECT_EQ(*ParseBackendKind("cpu"), BackendKind::kCpu);
  EXPECT_EQ(*ParseBackendKind("cuda"), BackendKind::kCuda);
  StatusOr<BackendKind> bad = ParseBackendKind("tpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("unknown backend 'tpu' (cpu, cuda)"));
  EXPECT_STREQ(BackendKindName(BackendKind::kCuda), "cuda");
  EXPECT_TRUE(CheckBackendAvailable(BackendKind::kCpu).ok());
}

class NoDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (HaveCudaDevice())
      GTEST_SKIP() << "a CUDA device is present: the no-device errors do not apply";
  }
};

TEST_F(NoDeviceTest, BackendCreationFailsWithAClearStatus) {
  Status available = CheckBackendAvailable(BackendKind::kCuda);
  ASSERT_FALSE(available.ok());
  EXPECT_THAT(available.message(), StartsWith("no CUDA device: "));

  BackendConfig config;
  config.kind = BackendKind::kCuda;
  auto backend = MakeBackend(config);
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(), StartsWith("no CUDA device: "));

  auto direct = cuda::CudaBackend::Create({});
  ASSERT_FALSE(direct.ok());
  EXPECT_THAT(direct.status().message(), StartsWith("no CUDA device: "));
  EXPECT_EQ(direct.status().message().find('\n'), std::string::npos);  // one line
}

TEST_F(NoDeviceTest, TrainingLoopAndEmbeddingApiRefuseCleanly) {
  RankRunOptions run;
  run.backend = BackendKind::kCuda;
  Status s = RunRank(SmallGpt(), nullptr, run);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith("no CUDA device: "));

  ExecutorOptions options;
  options.backend = BackendKind::kCuda;
  auto exec = Executor::Create(SmallGpt(), options);
  ASSERT_FALSE(exec.ok());
  EXPECT_THAT(exec.status().message(), StartsWith("no CUDA device: "));
}

// Runs the tool; returns its exit code and stderr.
std::pair<int, std::string> RunTool(const std::vector<std::string>& args, const fs::path& dir) {
  std::string command = std::string(PW_BINARY_DIR) + "/tools/pipeweave";
  for (const std::string& a : args) command += " '" + a + "'";
  fs::path err = dir / "stderr.txt";
  command += " >/dev/null 2>'" + err.string() + "'";
  int status = std::system(command.c_str());
  std::ifstream in(err);
  std::stringstream text;
  text << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), text.str()};
}

TEST_F(NoDeviceTest, CommandLineGivesOneLineAndFails) {
  fs::path dir = TempDir("cli");
  fs::path module = dir / "gpt.pb";
  ASSERT_TRUE(SaveModule(SmallGpt(), module.string()).ok());
  for (std::vector<std::string> args :
       {std::vector<std::string>{"run", module.string(), "--nproc", "1", "--backend", "cuda"},
        std::vector<std::string>{"run-parallel", module.string(), "--nproc", "1", "--steps", "2",
                                 "--backend", "cuda"}}) {
    auto [code, err] = RunTool(args, dir);
    EXPECT_GE(code, 1) << err;
    EXPECT_LE(code, 127) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_THAT(err, HasSubstr("no CUDA device: ")) << err;
  }
  auto [code, err] =
      RunTool({"run", module.string(), "--reference", "--steps", "1", "--backend", "cuda"}, dir);
  EXPECT_EQ(code, 2) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_THAT(err, HasSubstr("--reference runs on the CPU"));
  auto [bad_code, bad_err] =
      RunTool({"run", module.string(), "--nproc", "1", "--backend", "tpu"}, dir);
  EXPECT_EQ(bad_code, 2) << bad_err;
  EXPECT_THAT(bad_err, HasSubstr("unknown backend 'tpu'"));
  fs::remove_all(dir);
}

#if PW_HAVE_NCCL
// Declarations need no device: they are checked while the plan is lowered.
TEST(NcclCommTest, DeclarationsAreChecked) {
  fs::path dir = TempDir("nccl");
  auto store = OpenStore(dir.string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Mesh mesh;
  mesh.pp = 2;
  mesh.mp = 2;
  auto factory = MakeNcclCommFactory(**store, mesh, 0);
  ASSERT_TRUE(factory.ok()) << factory.status().ToString();
  auto send = (*factory)->Create(StreamType::kPpSend);
  auto recv = (*factory)->Create(StreamType::kPpRecv);
  auto compute = (*factory)->Create(StreamType::kCompute);
  ASSERT_TRUE(send.ok() && recv.ok() && compute.ok());
  auto* s = dynamic_cast<cuda::DeviceComm*>(send->get());
  auto* r = dynamic_cast<cuda::DeviceComm*>(recv->get());
  auto* c = dynamic_cast<cuda::DeviceComm*>(compute->get());
  ASSERT_TRUE(s && r && c) << "NCCL comms are device comms";

  EXPECT_TRUE(s->ExpectTransfer(2, true, 7, "SEND_F0").ok());  // rank 2: pipeline rank 1
  Status self = s->ExpectTransfer(0, true, 8, "SEND_F1");
  EXPECT_EQ(self.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(self.message(), HasSubstr("cannot send to itself"));
  Status two_streams = r->ExpectTransfer(2, false, 9, "RECV_B0");  // 2 -> 0: fine
  EXPECT_TRUE(two_streams.ok()) << two_streams.ToString();
  two_streams = c->ExpectTransfer(2, true, 10, "SEND_F2");  // 0 -> 2 on a second stream
  EXPECT_EQ(two_streams.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(two_streams.message(), HasSubstr("queued on two streams"));

  EXPECT_TRUE(c->ExpectCollective("mp").ok());
  EXPECT_TRUE(c->ExpectCollective("dp").ok());  // a group of one: nothing to connect
  Status bogus = c->ExpectCollective("xp");
  EXPECT_THAT(bogus.message(), HasSubstr("unknown group 'xp'"));
  // A group of one is the identity, with or without a device.
  float x = 3;
  EXPECT_TRUE(c->AllReduceSum("dp", &x, 1).ok());
  EXPECT_EQ(x, 3);
  fs::remove_all(dir);
}
#endif

}  // namespace
}  // namespace pw::testing
