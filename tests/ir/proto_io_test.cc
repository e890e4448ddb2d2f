#include "ir/proto_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "ir/file_util.h"

namespace pw {
namespace {

Module SampleModule() {
  Module m;
  m.name = "sample";
  m.mesh = Mesh{2, 4, 2, 2};
  m.metadata.Set("inputs", std::vector<std::string>{"x"});
  m.metadata.Set("layers", int64_t{4});
  Program p("main");
  Var x{"x", DataType::kInt64, {2, 16}};
  Var w{"w", DataType::kFloat32, {16, 8}, true, true};
  w.init.kind = Initializer::Kind::kNormal;
  w.init.std = 0.02;
  w.init.seed = 7;
  w.init.key = "layer0.w";
  w.init.full_shape = {16, 16};
  w.init.shard_axis = 1;
  w.init.shard_index = 1;
  w.init.num_shards = 2;
  w.stage = 3;
  p.AddVar(x);
  p.AddVar(w);
  Op op;
  op.type = "matmul";
  op.SetInput("X", {"x"}).SetInput("Y", {"w"}).SetOutput("Out", {"y"});
  op.SetAttr("trans_x", false).SetAttr("alpha", 0.5).SetAttr("n", int64_t{3});
  op.SetAttr("name", std::string("fc")).SetAttr("dims", std::vector<int64_t>{1, -1});
  op.SetAttr("ws", std::vector<double>{0.25, 2});
  op.SetAttr("tags", std::vector<std::string>{"a", "b"});
  op.role = OpRole::kBackward;
  op.stage = 3;
  op.chunk = 1;
  op.stream = "mp_comm";
  op.wait_events = {"e0", "e1"};
  op.record_events = {"e2"};
  op.weight_grad = true;
  p.AddOp(op);
  p.info().kind = "backward";
  p.info().stage = 3;
  p.info().inputs = {"x"};
  p.info().keep_alive = {"y"};
  m.AddProgram(p);
  m.plan.schedule = "1f1b";
  m.plan.num_micro_batches = 4;
  m.plan.num_stages = 2;
  m.plan.stage_to_rank = {0, 1};
  Job overlap{JobKind::kOverlapFB, 0, 0, "", -1, {}};
  overlap.sub_jobs = {Job{JobKind::kForward, 0, 7, "main"}, Job{JobKind::kBackward, 1, 3, "main"}};
  // A full backward on a split module: no program, its I and W as sub-jobs (also inside a
  // fused job).
  Job split_b{JobKind::kBackward, 1, 2, ""};
  split_b.sub_jobs = {Job{JobKind::kBackwardInput, 1, 2, "main"},
                      Job{JobKind::kBackwardWeight, 1, 2, "main"}};
  Job overlap_split{JobKind::kOverlapFB, -1, -1, ""};
  overlap_split.sub_jobs = {Job{JobKind::kForward, 1, 3, "main"}, split_b};
  overlap_split.sub_jobs[1].micro_batch = 1;
  for (Job& sub : overlap_split.sub_jobs[1].sub_jobs) sub.micro_batch = 1;
  m.plan.ranks = {RankPlan{0, {Job{JobKind::kForward, 0, 0, "main"}, overlap}},
                  RankPlan{1, {Job{JobKind::kRecvF, 1, 0, "", 0}, split_b, overlap_split}}};
  return m;
}

TEST(ProtoIoTest, FormatFromExtension) {
  EXPECT_EQ(*FormatFromPath("a/b.pbtxt"), ModuleFormat::kText);
  EXPECT_EQ(*FormatFromPath("a.PB"), ModuleFormat::kBinary);
  auto bad = FormatFromPath("model.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(".pbtxt"), std::string::npos);
}

TEST(ProtoIoTest, TextRoundTripPreservesEverythingAndIsStable) {
  Module m = SampleModule();
  std::string text = *SerializeModule(m, ModuleFormat::kText);
  auto parsed = ParseModule(text, ModuleFormat::kText);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(*parsed == m);
  EXPECT_EQ(*SerializeModule(*parsed, ModuleFormat::kText), text);
}

TEST(ProtoIoTest, SplitBackwardJobKeepsItsSubJobs) {
  Module m = SampleModule();
  for (ModuleFormat format : {ModuleFormat::kText, ModuleFormat::kBinary}) {
    auto parsed = ParseModule(*SerializeModule(m, format), format);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    const Job& b = parsed->plan.ranks[1].jobs[1];
    EXPECT_EQ(b.kind, JobKind::kBackward);
    EXPECT_EQ(b.program, "");
    EXPECT_EQ(b.micro_batch, 2);
    ASSERT_EQ(b.sub_jobs.size(), 2u);
    EXPECT_EQ(b.sub_jobs[0].kind, JobKind::kBackwardInput);
    EXPECT_EQ(b.sub_jobs[1].kind, JobKind::kBackwardWeight);
    EXPECT_TRUE(parsed->plan.ranks[1].jobs[2] == m.plan.ranks[1].jobs[2]);
  }
}

TEST(ProtoIoTest, BinaryRoundTripIsByteIdentical) {
  Module m = SampleModule();
  std::string bytes = *SerializeModule(m, ModuleFormat::kBinary);
  auto parsed = ParseModule(bytes, ModuleFormat::kBinary);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(*parsed == m);
  EXPECT_EQ(*SerializeModule(*parsed, ModuleFormat::kBinary), bytes);
}

TEST(ProtoIoTest, TextUnknownFieldIsRejectedWithItsName) {
  auto r = ParseModule("name: \"m\"\nbogus_field: 3\n", ModuleFormat::kText);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bogus_field"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos);
}

TEST(ProtoIoTest, BinaryUnknownFieldIsRejected) {
  std::string bytes = *SerializeModule(SampleModule(), ModuleFormat::kBinary);
  bytes += std::string("\xf8\x06\x01", 3);  // field 111, varint 1
  auto r = ParseModule(bytes, ModuleFormat::kBinary);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown field number 111"), std::string::npos)
      << r.status().message();
}

TEST(ProtoIoTest, TruncatedAndRandomBinaryGiveCleanErrors) {
  std::string bytes = *SerializeModule(SampleModule(), ModuleFormat::kBinary);
  for (size_t cut : {bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
    auto r = ParseModule(bytes.substr(0, cut), ModuleFormat::kBinary);
    EXPECT_FALSE(r.ok()) << "cut at " << cut;
  }
  std::mt19937 rng(1);
  int rejected = 0;
  for (int i = 0; i < 200; ++i) {
    std::string noise(64, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    rejected += !ParseModule(noise, ModuleFormat::kBinary).ok();
  }
  EXPECT_GT(rejected, 150);
}

TEST(ProtoIoTest, StructuralErrorsNameTheVar) {
  auto r =
      ParseModule("programs { name: \"main\" vars { name: \"v\" shape: 2 } }", ModuleFormat::kText);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "program 'main': var 'v' has no dtype");
  r = ParseModule("programs { name: \"main\" vars { name: \"v\" dtype: FLOAT32 shape: -2 } }",
                  ModuleFormat::kText);
  EXPECT_NE(r.status().message().find("negative dimension"), std::string::npos);
  r = ParseModule("programs { name: \"main\" ops { type: \"x\" attrs { name: \"a\" } } }",
                  ModuleFormat::kText);
  EXPECT_NE(r.status().message().find("attribute 'a' has no value"), std::string::npos);
}

TEST(ProtoIoTest, UnknownDtypeInABinaryFileIsAnError) {
  ::pipeweave::proto::ModuleDesc desc;
  auto* program = desc.add_programs();
  program->set_name("main");
  auto* var = program->add_vars();
  var->set_name("h");
  var->set_dtype(static_cast<::pipeweave::proto::DataType>(9));
  auto r = ParseModule(desc.SerializeAsString(), ModuleFormat::kBinary);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "program 'main': var 'h' has unknown dtype 9");
}

TEST(ProtoIoTest, LowPrecisionVarsRoundTrip) {
  Module m = SampleModule();
  m.programs()[0].AddVar(Var{"h", DataType::kBFloat16, {2, 8}});
  m.programs()[0].AddVar(Var{"g", DataType::kFloat16, {8}});
  auto text = SerializeModule(m, ModuleFormat::kText);
  ASSERT_TRUE(text.ok());
  auto back = ParseModule(*text, ModuleFormat::kText);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->programs()[0].FindVar("h")->dtype, DataType::kBFloat16);
  EXPECT_EQ(back->programs()[0].FindVar("g")->dtype, DataType::kFloat16);
}

TEST(ProtoIoTest, SaveIsAtomicAndLoadNamesTheFile) {
  std::string dir = ::testing::TempDir() + "/pw_io_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::string path = dir + "/m.pb";
  ASSERT_TRUE(SaveModule(SampleModule(), path).ok());
  auto loaded = LoadModule(path);
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(*loaded == SampleModule());
  // A failed save leaves no file behind.
  EXPECT_FALSE(SaveModule(SampleModule(), dir + "/missing/m.pb").ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/missing"));
  ASSERT_TRUE(WriteFileAtomically(dir + "/bad.pb", "garbage-bytes").ok());
  auto bad = LoadModule(dir + "/bad.pb");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.pb"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pw
