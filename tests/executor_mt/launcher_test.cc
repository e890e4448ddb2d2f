// Rank processes over TCP (the executor's own rings and links; Gloo's pairs on request):
// `pipeweave run-parallel` end to end. Losses match the single-rank reference, a rank
// killed with SIGKILL stops the run with a message naming it (never a hang), a bad plan is
// refused before any process starts, and ranks meet through a Redis store as they would
// across machines.

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "ir/proto_io.h"
#include "test_plans.h"
#include "tests/redis_server.h"

namespace pw::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

const std::string kTool = PW_BINARY_DIR "/tools/pipeweave";

struct Process {
  pid_t pid = -1;
  std::string out_path, err_path;
};

struct Finished {
  int exit_code = -1;  // 128+N for a signal; -1 on timeout
  std::string out, err;
  double seconds = 0;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh folder for test `name`; a parameterized test's "/" does not nest it in a folder
// that would outlive the test.
fs::path TempDir(std::string name) {
  std::replace(name.begin(), name.end(), '/', '_');
  fs::path dir = fs::temp_directory_path() / StrCat("pw_launcher_test_", getpid(), "_", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Process Start(const std::vector<std::string>& args, const fs::path& dir, const std::string& tag) {
  Process p;
  p.out_path = (dir / (tag + ".out")).string();
  p.err_path = (dir / (tag + ".err")).string();
  std::vector<std::string> full = {kTool};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  p.pid = fork();
  if (p.pid == 0) {
    int out = open(p.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(p.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return p;
}

Finished Wait(const Process& p, std::chrono::seconds timeout) {
  Finished f;
  auto start = Clock::now();
  int status = 0;
  for (;;) {
    pid_t r = waitpid(p.pid, &status, WNOHANG);
    if (r == p.pid) break;
    if (Clock::now() - start > timeout) {
      kill(p.pid, SIGKILL);
      waitpid(p.pid, &status, 0);
      f.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      f.out = ReadFile(p.out_path);
      f.err = ReadFile(p.err_path);
      return f;  // exit_code -1: it hung
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  f.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  f.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  f.out = ReadFile(p.out_path);
  f.err = ReadFile(p.err_path);
  return f;
}

Finished RunTool(const std::vector<std::string>& args, const fs::path& dir, const std::string& tag,
                 std::chrono::seconds timeout = std::chrono::seconds(240)) {
  return Wait(Start(args, dir, tag), timeout);
}

// A rank's pid as it publishes it in the store ("HOST PID").
pid_t PidOf(const fs::path& file) {
  std::string value = ReadFile(file.string());
  return static_cast<pid_t>(std::stol(value.substr(value.rfind(' ') + 1)));
}

// The numbers of the array `key` of a one-line JSON report.
std::vector<double> JsonArray(const std::string& json, const std::string& key) {
  std::smatch m;
  std::vector<double> out;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\": \\[([^\\]]*)\\]"))) return out;
  std::stringstream s(m[1].str());
  std::string item;
  while (std::getline(s, item, ',')) out.push_back(std::stod(item));
  return out;
}

std::vector<double> JsonLosses(const std::string& json) { return JsonArray(json, "losses"); }

std::string BuildGpt(const fs::path& dir, const std::string& name, int mp, int pp = 1, int vpp = 1,
                     const std::string& placement = "loop") {
  std::string path = (dir / name).string();
  Finished f = RunTool({"build-model",
                        "gpt",
                        "--layers",
                        "4",
                        "--hidden",
                        "64",
                        "--heads",
                        "4",
                        "--seq",
                        "16",
                        "--vocab",
                        "128",
                        "--micro-batch-size",
                        "2",
                        "--mp",
                        std::to_string(mp),
                        "--pp",
                        std::to_string(pp),
                        "--vpp",
                        std::to_string(vpp),
                        "--placement",
                        placement,
                        "-o",
                        path},
                       dir, "build_" + name);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  return path;
}

// Every rank's --save-params file of run `a` holds the same bytes as run `b`'s.
void ExpectSameParamBytes(const fs::path& a, const fs::path& b, int ranks) {
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string name = StrCat("rank", rank, ".params");
    const std::string pa = ReadFile((a / name).string()), pb = ReadFile((b / name).string());
    EXPECT_FALSE(pa.empty()) << name;
    EXPECT_TRUE(pa == pb) << name << ": parameters differ";
  }
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LauncherTest, TensorParallelOverGlooMatchesTheReference) {
  std::string mp1 = BuildGpt(dir_, "gpt1.pb", 1);
  std::string mp2 = BuildGpt(dir_, "gpt2.pb", 2);
  Finished ref = RunTool({"run", mp1, "--reference", "--steps", "3", "--micro-batches", "8",
                          "--seed", "1", "--report", "json"},
                         dir_, "reference");
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  Finished par = RunTool({"run-parallel", mp2, "--nproc", "2", "--steps", "3", "--micro-batches",
                          "8", "--seed", "1", "--report", "json"},
                         dir_, "parallel");
  ASSERT_EQ(par.exit_code, 0) << par.err;
  std::vector<double> want = JsonLosses(ref.out), got = JsonLosses(par.out);
  ASSERT_EQ(want.size(), 3u) << ref.out;
  ASSERT_EQ(got.size(), 3u) << par.out;
  for (int s = 0; s < 3; ++s) EXPECT_NEAR(got[s], want[s], 1e-5 * want[s]) << "step " << s;
  EXPECT_THAT(par.out, HasSubstr("\"peak_bytes\": ["));
  // Each step's CPU time: the reference's process, the two rank processes' summed. Both
  // did the whole model's work, so the ranks' CPU is not far below the reference's.
  const std::vector<double> ref_cpu = JsonArray(ref.out, "step_cpu_ms"),
                            par_cpu = JsonArray(par.out, "step_cpu_ms"),
                            par_ms = JsonArray(par.out, "step_time_ms");
  ASSERT_EQ(ref_cpu.size(), 3u) << ref.out;
  ASSERT_EQ(par_cpu.size(), 3u) << par.out;
  ASSERT_EQ(par_ms.size(), 3u) << par.out;
  for (int s = 0; s < 3; ++s) {
    EXPECT_GT(ref_cpu[s], 0) << "step " << s;
    EXPECT_GT(par_cpu[s], 0.5 * ref_cpu[s]) << "step " << s;
    // Two processes of at most a few busy threads each, over the slowest rank's step.
    EXPECT_LT(par_cpu[s], 16 * par_ms[s]) << "step " << s;
  }
}

// GPT mp=2 x pp=2 planned with each schedule kind, four rank processes over Gloo, next to
// the single-rank reference (the README demo runs the 1f1b case).
struct GlooSchedule {
  const char* kind;
  int vpp = 1;
  bool split_backward = false;
  const char* placement = "loop";
};

class PipelineOverGlooTest : public LauncherTest,
                             public ::testing::WithParamInterface<GlooSchedule> {};

TEST_P(PipelineOverGlooTest, MatchesTheReference) {
  const GlooSchedule& c = GetParam();
  std::string mp1 = BuildGpt(dir_, "gpt1.pb", 1);
  std::string path = BuildGpt(dir_, "gpt_mp2_pp2.pb", 2, 2, c.vpp, c.placement);
  Finished ref = RunTool({"run", mp1, "--reference", "--steps", "3", "--micro-batches", "8",
                          "--seed", "1", "--report", "json"},
                         dir_, "reference");
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const std::string pipeline =
      StrCat("append-backward,split-program", c.split_backward ? "{split-backward=true}" : "",
             ",schedule{kind=", c.kind, ",micro-batches=8},insert-p2p");
  Finished par = RunTool({"run-parallel", path, "--nproc", "4", "--steps", "3", "--seed", "1",
                          "--report", "json", "--pipeline", pipeline},
                         dir_, "parallel");
  ASSERT_EQ(par.exit_code, 0) << par.err;
  std::vector<double> want = JsonLosses(ref.out), got = JsonLosses(par.out);
  ASSERT_EQ(got.size(), 3u) << par.out;
  // mp = 2 splits matmul reductions across ranks: within 1e-5, not bitwise.
  for (int s = 0; s < 3; ++s) EXPECT_NEAR(got[s], want[s], 1e-5 * want[s]) << "step " << s;
  EXPECT_THAT(par.out, HasSubstr(StrCat("\"schedule\": \"", c.kind, "\"")));
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, PipelineOverGlooTest,
    ::testing::Values(GlooSchedule{"fthenb"}, GlooSchedule{"1f1b"}, GlooSchedule{"eager-1f1b"},
                      GlooSchedule{"interleaved-1f1b", 2}, GlooSchedule{"zb-h1", 1, true},
                      GlooSchedule{"zb-v", 2, true, "v"}, GlooSchedule{"dualpipe-v", 2, true, "v"}),
    [](const auto& info) {
      std::string name = info.param.kind;
      for (char& ch : name)
        if (ch == '-') ch = '_';
      return name;
    });

// The pipeline's transfers over this project's TCP links (the default) and over Gloo's
// pairs (--transfers gloo) move the same bytes: an interleaved plan, whose ranks both send
// and receive every few ops, trains the same losses and parameter bits either way.
TEST_F(LauncherTest, TransfersOverLinksAndOverGlooPairsTrainTheSameBits) {
  std::string path = BuildGpt(dir_, "gpt.pb", 2, 2, 2);
  const std::string pipeline =
      "append-backward{optimizer=adam},split-program,schedule{kind=interleaved-1f1b,"
      "micro-batches=4},insert-p2p";
  std::vector<std::vector<double>> losses;
  for (const char* transfers : {"tcp", "gloo"}) {
    Finished run = RunTool(
        {"run-parallel", path, "--nproc", "4", "--steps", "2", "--report", "json", "--pipeline",
         pipeline, "--transfers", transfers, "--save-params", (dir_ / transfers).string()},
        dir_, transfers);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    losses.push_back(JsonLosses(run.out));
    ASSERT_EQ(losses.back().size(), 2u) << run.out;
  }
  EXPECT_EQ(losses[0], losses[1]);
  ExpectSameParamBytes(dir_ / "tcp", dir_ / "gloo", 4);
  Finished bad = RunTool({"run-parallel", path, "--nproc", "4", "--steps", "1", "--pipeline",
                          pipeline, "--transfers", "udp"},
                         dir_, "bad");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("flag --transfers: unknown transport 'udp' (tcp, gloo)"));
}

// The stream passes over Gloo processes: the same plan with its collectives on mp_comm,
// the column-parallel backward overlapped and events inserted trains bit-identically,
// and the executor adds no event of its own (--strict-events).
class OverlapOverGlooTest : public LauncherTest,
                            public ::testing::WithParamInterface<GlooSchedule> {};

TEST_P(OverlapOverGlooTest, BitIdenticalToThePlanWithoutThePasses) {
  const GlooSchedule& c = GetParam();
  std::string path = BuildGpt(dir_, "gpt.pb", 2, 2, c.vpp, c.placement);
  const std::string plain = StrCat("append-backward{optimizer=adam},split-program",
                                   c.split_backward ? "{split-backward=true}" : "",
                                   ",schedule{kind=", c.kind, ",micro-batches=4},insert-p2p");
  const std::string overlapped =
      plain + ",assign-streams,overlap-column-parallel-backward,insert-events";
  std::vector<std::vector<double>> losses;
  for (bool strict : {false, true}) {
    const std::string& pipeline = strict ? overlapped : plain;
    std::vector<std::string> args = {
        "run-parallel", path,     "--nproc",       "4",
        "--steps",      "2",      "--report",      "json",
        "--pipeline",   pipeline, "--save-params", (dir_ / (strict ? "b" : "a")).string()};
    if (strict) args.push_back("--strict-events");
    Finished run = RunTool(args, dir_, strict ? "overlapped" : "plain");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    losses.push_back(JsonLosses(run.out));
    ASSERT_EQ(losses.back().size(), 2u) << run.out;
  }
  EXPECT_EQ(losses[0], losses[1]);
  ExpectSameParamBytes(dir_ / "a", dir_ / "b", 4);
}

INSTANTIATE_TEST_SUITE_P(Schedules, OverlapOverGlooTest,
                         ::testing::Values(GlooSchedule{"fthenb"}, GlooSchedule{"1f1b"},
                                           GlooSchedule{"interleaved-1f1b", 2},
                                           GlooSchedule{"zb-h1", 1, true},
                                           GlooSchedule{"zb-v", 2, true, "v"}),
                         [](const auto& info) {
                           std::string name = info.param.kind;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// overlap-1f1b over Gloo: the fused, interleaved plan (planned with the H100 cost model by
// `pipeweave opt`) trains bit-identically to the plain plan under --strict-events.
class Overlap1F1BOverGlooTest : public LauncherTest,
                                public ::testing::WithParamInterface<GlooSchedule> {};

TEST_P(Overlap1F1BOverGlooTest, BitIdenticalToThePlanWithoutThePass) {
  const GlooSchedule& c = GetParam();
  std::string path = BuildGpt(dir_, "gpt.pb", 2, 2, c.vpp, c.placement);
  const std::string plain = StrCat("append-backward{optimizer=adam},split-program",
                                   c.split_backward ? "{split-backward=true}" : "",
                                   ",schedule{kind=", c.kind, ",micro-batches=4},insert-p2p");
  const std::string plan = (dir_ / "overlapped.pb").string();
  Finished opt = RunTool({"opt", path, "-p",
                          plain + ",assign-streams,overlap-column-parallel-backward,overlap-1f1b,"
                                  "insert-events",
                          "--device", "h100", "-o", plan},
                         dir_, "opt");
  ASSERT_EQ(opt.exit_code, 0) << opt.err;
  Finished a = RunTool({"run-parallel", path, "--nproc", "4", "--steps", "2", "--report", "json",
                        "--pipeline", plain, "--save-params", (dir_ / "a").string()},
                       dir_, "plain");
  Finished b = RunTool({"run-parallel", plan, "--nproc", "4", "--steps", "2", "--report", "json",
                        "--strict-events", "--save-params", (dir_ / "b").string()},
                       dir_, "overlapped");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(JsonLosses(a.out), JsonLosses(b.out));
  ASSERT_EQ(JsonLosses(b.out).size(), 2u) << b.out;
  ExpectSameParamBytes(dir_ / "a", dir_ / "b", 4);
}

INSTANTIATE_TEST_SUITE_P(Schedules, Overlap1F1BOverGlooTest,
                         ::testing::Values(GlooSchedule{"1f1b"}, GlooSchedule{"eager-1f1b"},
                                           GlooSchedule{"interleaved-1f1b", 2},
                                           GlooSchedule{"dualpipe-v", 2, true, "v"}),
                         [](const auto& info) {
                           std::string name = info.param.kind;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// Recomputation over Gloo processes: the GPT at mp 2 x pp 2 planned by `pipeweave opt` with
// recompute (full or selective; f32 and bf16) trains the plain plan's losses and parameter
// bytes (executor_recompute_equivalence_test covers every schedule kind on threads).
struct GlooRecompute {
  GlooSchedule schedule;
  const char* policy;
  bool bf16 = false;
};

void PrintTo(const GlooRecompute& r, std::ostream* out) {
  *out << r.schedule.kind << " recompute{policy=" << r.policy << "}" << (r.bf16 ? " bf16" : "");
}

class RecomputeOverGlooTest : public LauncherTest,
                              public ::testing::WithParamInterface<GlooRecompute> {};

TEST_P(RecomputeOverGlooTest, BitIdenticalToThePlanWithoutIt) {
  const GlooSchedule& c = GetParam().schedule;
  std::string path = BuildGpt(dir_, "gpt.pb", 2, 2, c.vpp, c.placement);
  const std::string training =
      StrCat("append-backward{optimizer=adam}", GetParam().bf16 ? ",amp{dtype=bf16}" : "");
  const std::string plan = StrCat(",split-program", c.split_backward ? "{split-backward=true}" : "",
                                  ",schedule{kind=", c.kind, ",micro-batches=4},insert-p2p");
  std::vector<std::vector<double>> losses;
  for (const char* variant : {"a", "b"}) {
    const bool recompute = *variant == 'b';
    const std::string planned = (dir_ / StrCat(variant, ".pb")).string();
    Finished opt = RunTool(
        {"opt", path, "-p",
         StrCat(training, recompute ? StrCat(",recompute{policy=", GetParam().policy, "}") : "",
                plan),
         "--stats", "-o", planned},
        dir_, StrCat("opt_", variant));
    ASSERT_EQ(opt.exit_code, 0) << opt.err;
    if (recompute) EXPECT_THAT(opt.err, HasSubstr("layers-recomputed"));
    Finished run = RunTool({"run-parallel", planned, "--nproc", "4", "--steps", "2", "--report",
                            "json", "--save-params", (dir_ / variant).string()},
                           dir_, StrCat("run_", variant));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    losses.push_back(JsonLosses(run.out));
    ASSERT_EQ(losses.back().size(), 2u) << run.out;
  }
  EXPECT_EQ(losses[0], losses[1]);
  ExpectSameParamBytes(dir_ / "a", dir_ / "b", 4);
}

INSTANTIATE_TEST_SUITE_P(Schedules, RecomputeOverGlooTest,
                         ::testing::Values(GlooRecompute{{"1f1b"}, "full"},
                                           GlooRecompute{
                                               {"interleaved-1f1b", 2}, "selective", true},
                                           GlooRecompute{{"zb-h1", 1, true}, "full", true},
                                           GlooRecompute{{"zb-v", 2, true, "v"}, "selective"}),
                         [](const auto& info) {
                           std::string name =
                               StrCat(info.param.schedule.kind, "_", info.param.policy,
                                      info.param.bf16 ? "_bf16" : "_f32");
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// The small Llama (grouped-query attention, rotary embeddings, SwiGLU, RMSNorm) at mp 2 x
// pp 2 on four Gloo processes: 1f1b within rounding of the single-rank reference, and the
// overlap passes (input-gradient all-reduces of linears sharing an input, under their
// weight gradients) bit-identical to the plain plan under --strict-events.
TEST_F(LauncherTest, LlamaOverGlooMatchesTheReferenceAndOverlapsKeepItsBits) {
  auto build = [&](const std::string& name, int mp, int pp) {
    const std::string path = (dir_ / name).string();
    Finished f = RunTool({"build-model",
                          "llama",
                          "--layers",
                          "4",
                          "--hidden",
                          "64",
                          "--heads",
                          "4",
                          "--kv-heads",
                          "2",
                          "--ffn",
                          "128",
                          "--seq",
                          "16",
                          "--vocab",
                          "128",
                          "--micro-batch-size",
                          "2",
                          "--mp",
                          std::to_string(mp),
                          "--pp",
                          std::to_string(pp),
                          "-o",
                          path},
                         dir_, "build_" + name);
    EXPECT_EQ(f.exit_code, 0) << f.err;
    return path;
  };
  const std::string one = build("llama1.pb", 1, 1), four = build("llama4.pb", 2, 2);
  Finished ref = RunTool({"run", one, "--reference", "--steps", "2", "--micro-batches", "4",
                          "--seed", "1", "--report", "json"},
                         dir_, "reference");
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const std::string plain =
      "append-backward,split-program,schedule{kind=1f1b,micro-batches=4},insert-p2p";
  std::vector<std::vector<double>> losses;
  for (bool overlapped : {false, true}) {
    std::vector<std::string> args = {
        "run-parallel",
        four,
        "--nproc",
        "4",
        "--steps",
        "2",
        "--seed",
        "1",
        "--report",
        "json",
        "--pipeline",
        overlapped ? plain + ",assign-streams,overlap-column-parallel-backward,insert-events"
                   : plain,
        "--save-params",
        (dir_ / (overlapped ? "b" : "a")).string()};
    if (overlapped) args.push_back("--strict-events");
    Finished run = RunTool(args, dir_, overlapped ? "overlapped" : "plain");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    losses.push_back(JsonLosses(run.out));
  }
  std::vector<double> want = JsonLosses(ref.out);
  ASSERT_EQ(want.size(), 2u) << ref.out;
  ASSERT_EQ(losses[0].size(), 2u);
  for (int s = 0; s < 2; ++s) EXPECT_NEAR(losses[0][s], want[s], 1e-5 * want[s]) << "step " << s;
  EXPECT_EQ(losses[0], losses[1]);
  ExpectSameParamBytes(dir_ / "a", dir_ / "b", 4);
}

// sequence-parallel over Gloo processes: the GPT at mp 2 x pp 2 (4 ranks) and the Llama at
// mp 2 (kv heads split) train the plain plan's losses and parameter bytes: the TCP rings'
// reduce-scatter and all-gather carry the member-order sums of the all-reduces they replace.
TEST_F(LauncherTest, SequenceParallelOverGlooTrainsThePlainPlansBits) {
  const std::string llama = (dir_ / "llama.pb").string();
  Finished built =
      RunTool({"build-model",        "llama", "--layers", "2",   "--hidden", "64", "--heads", "4",
               "--kv-heads",         "2",     "--ffn",    "128", "--seq",    "16", "--vocab", "128",
               "--micro-batch-size", "2",     "--mp",     "2",   "-o",       llama},
              dir_, "build_llama");
  ASSERT_EQ(built.exit_code, 0) << built.err;
  struct Model {
    std::string path, schedule;
    int ranks;
  };
  const std::vector<Model> models = {
      {BuildGpt(dir_, "gpt.pb", 2, 2), "split-program,schedule{kind=1f1b,micro-batches=4}", 4},
      {llama, "split-program,schedule{kind=fthenb,micro-batches=4}", 2}};
  for (const Model& m : models) {
    SCOPED_TRACE(m.path);
    std::vector<std::vector<double>> losses;
    for (bool sp : {false, true}) {
      const std::string pipeline =
          StrCat(sp ? "sequence-parallel," : "", "append-backward{optimizer=adam},", m.schedule,
                 ",insert-p2p");
      const fs::path params = dir_ / StrCat(fs::path(m.path).stem().string(), sp ? "_sp" : "");
      Finished run = RunTool(
          {"run-parallel", m.path, "--nproc", std::to_string(m.ranks), "--steps", "2", "--seed",
           "1", "--report", "json", "--pipeline", pipeline, "--save-params", params.string()},
          dir_, sp ? "sp" : "plain");
      ASSERT_EQ(run.exit_code, 0) << run.err;
      losses.push_back(JsonLosses(run.out));
    }
    ASSERT_EQ(losses[0].size(), 2u);
    EXPECT_EQ(losses[0], losses[1]);
    const std::string stem = fs::path(m.path).stem().string();
    ExpectSameParamBytes(dir_ / stem, dir_ / (stem + "_sp"), m.ranks);
  }
}

// A row split cuts the all-reduces of a four-rank group too: the TCP transport sums each
// element in member order whatever its place in the buffer, so the cut plan trains the same
// bits as the plan without the pass over rank processes (the classic ring would not).
TEST_F(LauncherTest, CutsOfFourRankAllReducesTrainBitIdentically) {
  const std::string path = (dir_ / "gpt_mp4.pb").string();
  Finished built =
      RunTool({"build-model", "gpt", "--layers", "2",   "--hidden",           "64", "--heads", "4",
               "--seq",       "64",  "--vocab",  "128", "--micro-batch-size", "2",  "--mp",    "4",
               "--seed",      "1",   "-o",       path},
              dir_, "build");
  ASSERT_EQ(built.exit_code, 0) << built.err;
  const std::string plain =
      "append-backward{optimizer=adam},split-program,schedule{kind=fthenb,micro-batches=2},"
      "insert-p2p";
  const std::string cut_plan = (dir_ / "cut.pb").string();
  Finished opt = RunTool(
      {"opt", path, "-p", plain + ",assign-streams,overlap-row-split{split-ops=all},insert-events",
       "--device", "h100", "--stats", "-o", cut_plan},
      dir_, "opt");
  ASSERT_EQ(opt.exit_code, 0) << opt.err;
  EXPECT_THAT(opt.out + opt.err, ::testing::ContainsRegex("wide-all-reduces-cut +[1-9]"));
  const fs::path plain_params = dir_ / "plain_params", cut_params = dir_ / "cut_params";
  Finished a = RunTool({"run-parallel", path, "--nproc", "4", "--steps", "2", "--report", "json",
                        "--pipeline", plain, "--save-params", plain_params.string()},
                       dir_, "plain");
  Finished b = RunTool({"run-parallel", cut_plan, "--nproc", "4", "--steps", "2", "--report",
                        "json", "--strict-events", "--save-params", cut_params.string()},
                       dir_, "cut");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  std::vector<double> want = JsonLosses(a.out), got = JsonLosses(b.out);
  ASSERT_EQ(got.size(), 2u) << b.out;
  EXPECT_EQ(got, want);
  // The f32 losses hide last-bit differences of the activations; the parameters do not.
  ExpectSameParamBytes(plain_params, cut_params, 4);
}

// A sequence-parallel GPT at mp 4 (seq 128) planned fthenb with `passes` after
// assign-streams (their statistics matching `stats`), trained 2 steps on 4 Gloo processes:
// the same losses and every rank's parameter bytes as the plain SP plan.
void ExpectSequenceParallelPlanTrainsItsBits(const fs::path& dir, const std::string& passes,
                                             const std::vector<std::string>& stats) {
  const std::string path = (dir / "gpt_seq128_mp4.pb").string();
  Finished built =
      RunTool({"build-model", "gpt", "--layers", "2",   "--hidden",           "256", "--heads", "8",
               "--seq",       "128", "--vocab",  "128", "--micro-batch-size", "2",   "--mp",    "4",
               "--seed",      "1",   "-o",       path},
              dir, "build");
  ASSERT_EQ(built.exit_code, 0) << built.err;
  const std::string plain =
      "sequence-parallel,append-backward{optimizer=adam},split-program,"
      "schedule{kind=fthenb,micro-batches=2},insert-p2p,assign-streams";
  const std::string planned = (dir / "planned.pb").string();
  Finished opt = RunTool({"opt", path, "-p", plain + "," + passes + ",insert-events", "--stats",
                          "--device", "h100", "-o", planned},
                         dir, "opt");
  ASSERT_EQ(opt.exit_code, 0) << opt.err;
  for (const std::string& stat : stats)
    EXPECT_THAT(opt.out + opt.err, ::testing::ContainsRegex(stat + " +[1-9]"));
  const fs::path plain_params = dir / "sp_params", planned_params = dir / "planned_params";
  Finished a =
      RunTool({"run-parallel", path, "--nproc", "4", "--steps", "2", "--report", "json",
               "--pipeline", plain + ",insert-events", "--save-params", plain_params.string()},
              dir, "sp");
  Finished b = RunTool({"run-parallel", planned, "--nproc", "4", "--steps", "2", "--report", "json",
                        "--strict-events", "--save-params", planned_params.string()},
                       dir, "planned");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  std::vector<double> want = JsonLosses(a.out), got = JsonLosses(b.out);
  ASSERT_EQ(got.size(), 2u) << b.out;
  EXPECT_EQ(got, want);
  ExpectSameParamBytes(plain_params, planned_params, 4);
}

// overlap-collective-matmul over Gloo processes (64-row blocks at mp 4): the all-gathers and
// reduce-scatters decomposed into shifts (the TCP ring's all-gather carries them) and
// member-order sums train the same bits as without the pass.
TEST_F(LauncherTest, CollectiveMatmulOverGlooTrainsTheSequenceParallelPlansBits) {
  ExpectSequenceParallelPlanTrainsItsBits(dir_, "overlap-collective-matmul{decompose=all}",
                                          {"reduce-scatters-decomposed"});
}

// Sequence chunks over Gloo processes (overlap-row-split{split-ops=all}): each forward
// all-gather and reduce-scatter cut in two chunks of every member's rows with its matmuls,
// the rows put back in sequence order; the same bits as the whole collectives.
TEST_F(LauncherTest, SequenceChunksOverGlooTrainTheSequenceParallelPlansBits) {
  ExpectSequenceParallelPlanTrainsItsBits(
      dir_, "overlap-row-split{split-ops=all}",
      {"sequence-scatters-chunked", "sequence-gathers-chunked"});
}

// The amp module `training` makes of the small GPT, trained `steps` steps by the reference
// runner (with `extra` flags) and as mp x pp 2 plans (1f1b, 8 micro-batches) on rank
// processes over Gloo. pp = 2 keeps every reduction's order, so its losses are bit-identical
// (the JSON report has 17 digits); mp = 2 x pp = 2 rounds partial products per rank, so it
// is compared within the tolerance executor_amp_equivalence_test states and explains
// (2e-4). Returns the reference's report.
std::string ExpectAmpPlansMatchTheReference(const fs::path& dir, const std::string& training,
                                            int steps, std::vector<std::string> extra = {}) {
  std::string amp1 = (dir / "amp1.pb").string();
  Finished opt =
      RunTool({"opt", BuildGpt(dir, "gpt1.pb", 1), "-p", training, "-o", amp1}, dir, "opt");
  EXPECT_EQ(opt.exit_code, 0) << opt.err;
  std::vector<std::string> args = {
      "run",    amp1, "--reference", "--steps", std::to_string(steps), "--micro-batches", "8",
      "--seed", "1",  "--report",    "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  Finished ref = RunTool(args, dir, "reference");
  EXPECT_EQ(ref.exit_code, 0) << ref.err;
  std::vector<double> want = JsonLosses(ref.out);
  EXPECT_EQ(want.size(), static_cast<size_t>(steps)) << ref.out;
  for (int mp : {1, 2}) {
    std::string path = BuildGpt(dir, StrCat("gpt_mp", mp, ".pb"), mp, 2);
    Finished par =
        RunTool({"run-parallel", path, "--nproc", std::to_string(2 * mp), "--steps",
                 std::to_string(steps), "--seed", "1", "--report", "json", "--pipeline",
                 training + ",split-program,schedule{kind=1f1b,micro-batches=8},insert-p2p"},
                dir, StrCat("parallel_mp", mp));
    EXPECT_EQ(par.exit_code, 0) << par.err;
    std::vector<double> got = JsonLosses(par.out);
    if (got.size() != want.size()) {
      ADD_FAILURE() << "mp " << mp << ": " << par.out;
      continue;
    }
    for (size_t s = 0; s < want.size(); ++s) {
      if (mp == 1) {
        EXPECT_EQ(got[s], want[s]) << "step " << s;
      } else {
        EXPECT_NEAR(got[s], want[s], 2e-4 * want[s]) << "mp 2, step " << s;
      }
    }
  }
  return ref.out;
}

TEST_F(LauncherTest, MixedPrecisionOverGlooMatchesTheBf16Reference) {
  ExpectAmpPlansMatchTheReference(dir_, "append-backward{optimizer=sgd,lr=0.1},amp{dtype=bf16}", 3);
}

// fp16 with a loss scale that overflows the first steps: the overflow flags meet over the mp
// and pp groups over Gloo, and every rank skips the same steps as the reference.
TEST_F(LauncherTest, Fp16LossScalingOverGlooSkipsTheSameSteps) {
  std::string ref = ExpectAmpPlansMatchTheReference(
      dir_, "append-backward{optimizer=adam,lr=0.01},amp{dtype=fp16,init-scale=1e6}", 5,
      {"--track", "amp.skipped_steps"});
  EXPECT_THAT(ref, HasSubstr("\"amp.skipped_steps\": [1, "));
}

// A rank killed mid-run: the others stop, and the run exits non-zero naming it, within 60 s.
TEST_F(LauncherTest, AKilledRankStopsTheRunNamingIt) {
  std::string mp2 = BuildGpt(dir_, "gpt2.pb", 2);
  // dp = 2 x mp = 2: four ranks, gradients all-reduced across replicas every step.
  Module m = *LoadModule(mp2);
  m.mesh.dp = 2;
  std::string dp2 = (dir_ / "gpt_dp2_mp2.pb").string();
  ASSERT_TRUE(SaveModule(m, dp2).ok());
  fs::path run_dir = dir_ / "run";
  Process launcher = Start({"run-parallel", dp2, "--nproc", "4", "--steps", "100000",
                            "--micro-batches", "2", "--run-dir", run_dir.string()},
                           dir_, "launcher");
  // Wait for rank 2 to be up and a few steps to have run.
  fs::path pid_file = run_dir / "store" / "pid%2F2";
  auto start = Clock::now();
  while (!fs::exists(pid_file) && Clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(fs::exists(pid_file)) << ReadFile(launcher.err_path);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  pid_t victim = PidOf(pid_file);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  Finished f = Wait(launcher, std::chrono::seconds(60));
  ASSERT_NE(f.exit_code, -1) << "the launcher hung; stderr:\n" << f.err;
  EXPECT_NE(f.exit_code, 0);
  EXPECT_LT(f.seconds, 60);
  EXPECT_THAT(f.err, HasSubstr("rank 2 was killed by signal 9"));
  // Every surviving rank said why it stopped.
  for (int rank : {0, 1, 3})
    EXPECT_THAT(f.err, HasSubstr(StrCat("rank ", rank, ": stopping: rank 2")));
  for (int rank : {0, 1, 3}) {
    pid_t pid = PidOf(run_dir / "store" / StrCat("pid%2F", rank));
    EXPECT_NE(kill(pid, 0), 0) << "rank " << rank << " is still running";
  }
}

// Ranks started by hand (no launcher watches them): when one is killed, the other finds out
// through its failed communication and names the dead rank.
TEST_F(LauncherTest, RanksWithoutALauncherNameADeadPeer) {
  std::string mp2 = BuildGpt(dir_, "gpt2.pb", 2);
  std::string store = (dir_ / "store").string();
  std::vector<Process> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(Start({"run-parallel", mp2, "--rank", std::to_string(r), "--world-size", "2",
                           "--store", store, "--steps", "100000", "--micro-batches", "2"},
                          dir_, StrCat("rank", r)));
  fs::path pid_file = fs::path(store) / "pid%2F1";
  auto start = Clock::now();
  while (!fs::exists(pid_file) && Clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_EQ(kill(ranks[1].pid, SIGKILL), 0);
  Finished survivor = Wait(ranks[0], std::chrono::seconds(60));
  Wait(ranks[1], std::chrono::seconds(5));
  EXPECT_LT(survivor.seconds, 5);  // the watchdog sees the process go, no heartbeat timeout
  ASSERT_NE(survivor.exit_code, -1) << "rank 0 hung; stderr:\n" << survivor.err;
  EXPECT_NE(survivor.exit_code, 0);
  EXPECT_THAT(survivor.err, HasSubstr("rank 0: stopping: rank 1 died"));
}

TEST_F(LauncherTest, RefusesAPlanWhoseSendHasNoRecvBeforeStarting) {
  Module m;
  m.mesh.pp = 2;
  m.AddProgram(MakeProgram("f0", "forward", 0, {F32("x"), F32("h")},
                           {{"scale", {{"X", {"x"}}}, {{"Out", {"h"}}}}}));
  m.AddProgram(MakeProgram("f1", "forward", 1, {F32("h"), F32("loss")},
                           {{"add", {{"X", {"h"}}, {"Y", {"h"}}}, {{"Out", {"loss"}}}}}));
  // Real ops: the tool verifies the module before it checks the plan.
  m.metadata.Set("inputs", std::vector<std::string>{"x", "h"});
  m.plan.num_micro_batches = 1;
  m.plan.num_stages = 2;
  m.plan.stage_to_rank = {0, 1};
  m.plan.ranks = {
      RankPlan{0,
               {MakeJob(JobKind::kForward, 0, 0, "f0"), MakeJob(JobKind::kSendF, 0, 0, "f0", 1)}},
      RankPlan{1, {MakeJob(JobKind::kForward, 1, 0, "f1")}}};
  std::string path = (dir_ / "bad_plan.pbtxt").string();
  ASSERT_TRUE(SaveModule(m, path).ok());
  fs::path run_dir = dir_ / "run";
  Finished f =
      RunTool({"run-parallel", path, "--nproc", "2", "--run-dir", run_dir.string()}, dir_, "bad");
  EXPECT_NE(f.exit_code, 0);
  EXPECT_THAT(f.err, HasSubstr("has no matching RECV_F on pipeline rank 1"));
  EXPECT_FALSE(fs::exists(run_dir / "store"));  // no rank was started
}

// Two ranks started by hand, as on two machines, meeting through Redis on loopback.
TEST_F(LauncherTest, RanksMeetThroughARedisStore) {
  RedisServer redis(/*base_port=*/20000);
  if (!redis.running())
    GTEST_SKIP() << "redis-server is not installed (scripts/install-deps.sh installs it)";
  std::string mp2 = BuildGpt(dir_, "gpt2.pb", 2);
  std::string store = redis.Spec("test");
  std::vector<Process> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(Start({"run-parallel", mp2, "--rank", std::to_string(r), "--world-size", "2",
                           "--store", store, "--steps", "2", "--micro-batches", "2"},
                          dir_, StrCat("rank", r)));
  Finished r0 = Wait(ranks[0], std::chrono::seconds(120));
  Finished r1 = Wait(ranks[1], std::chrono::seconds(120));
  EXPECT_EQ(r0.exit_code, 0) << r0.err;
  EXPECT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_THAT(r0.out, HasSubstr("step 2 loss"));  // mp rank 0 of the last stage reports
}

}  // namespace
}  // namespace pw::testing
