// The cost table: text and binary round trips, merging, and the errors bad tables give.

#include "cost_model/op_cost_table.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cost_model/comm_model.h"

namespace pw::cost {
namespace {

OpCostEntry Entry(const std::string& key, double median, int repeats) {
  OpCostEntry e;
  e.set_op_type(key.substr(0, key.find('(')));
  e.set_key(key);
  e.set_median(median);
  e.set_spread(median / 10);
  e.set_min(median * 0.9);
  e.set_max(median * 1.2);
  e.set_repeats(repeats);
  e.set_flops(1000);
  e.set_bytes(4000);
  return e;
}

OpCostTable SampleTable() {
  OpCostTable t;
  t.set_device("cpu");
  t.Add(Entry("matmul(X:f32[4,8];Y:f32[8,8])trans_x=0,trans_y=0", 2e-6, 20));
  t.Add(Entry("add(X:f32[4,8];Y:f32[4,8])", 5e-7, 40));
  t.AddComm(FitCommSamples("all_reduce", 2, {{1024, 30e-6, 1e-6}, {1 << 20, 530e-6, 5e-6}}));
  return t;
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("pw_cost_" + name)).string();
}

TEST(OpCostTable, RoundTripsThroughTextAndBinary) {
  OpCostTable table = SampleTable();
  for (const char* ext : {".pbtxt", ".pb"}) {
    std::string path = TempPath(std::string("table") + ext);
    ASSERT_TRUE(table.Save(path).ok());
    StatusOr<OpCostTable> loaded = OpCostTable::Load(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(table.proto(), loaded->proto()))
        << ext;
    ASSERT_NE(loaded->Find("add(X:f32[4,8];Y:f32[4,8])"), nullptr);
    EXPECT_DOUBLE_EQ(loaded->Find("add(X:f32[4,8];Y:f32[4,8])")->median(), 5e-7);
    std::filesystem::remove(path);
  }
}

TEST(OpCostTable, MergeWeighsByRepeatsAndKeepsBothSides) {
  OpCostTable a = SampleTable();
  OpCostTable b;
  b.set_device("cpu");
  b.Add(Entry("add(X:f32[4,8];Y:f32[4,8])", 1e-6, 10));  // 40 x 0.5us and 10 x 1us
  b.Add(Entry("gelu(X:f32[4,8])", 3e-6, 5));
  b.AddComm(FitCommSamples("all_reduce", 2, {{4096, 40e-6, 1e-6}}));
  ASSERT_TRUE(a.Merge(b).ok());
  EXPECT_EQ(a.size(), 3u);
  const OpCostEntry* add = a.Find("add(X:f32[4,8];Y:f32[4,8])");
  ASSERT_NE(add, nullptr);
  EXPECT_NEAR(add->median(), (40 * 0.5e-6 + 10 * 1e-6) / 50, 1e-15);
  EXPECT_EQ(add->repeats(), 50);
  EXPECT_DOUBLE_EQ(add->max(), 1.2e-6);
  ASSERT_NE(a.Find("gelu(X:f32[4,8])"), nullptr);
  const CommFit* fit = a.FindComm("all_reduce", 2);
  ASSERT_NE(fit, nullptr);
  EXPECT_EQ(fit->samples_size(), 3);  // refit over the union of samples
}

TEST(OpCostTable, MergeRefusesAnotherDevice) {
  OpCostTable a = SampleTable();
  OpCostTable b;
  b.set_device("h100-sxm");
  b.Add(Entry("gelu(X:f32[4,8])", 3e-6, 5));
  Status s = a.Merge(b);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("device 'h100-sxm'"), std::string::npos) << s.message();
}

TEST(OpCostTable, RejectsNegativeAndMissingCostsNamingTheEntry) {
  OpCostTable::Proto proto = SampleTable().proto();
  proto.mutable_entries(1)->set_median(-1e-6);
  StatusOr<OpCostTable> negative = OpCostTable::FromProto(proto);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("add(X:f32[4,8];Y:f32[4,8])"), std::string::npos)
      << negative.status().message();

  proto = SampleTable().proto();
  proto.mutable_entries(0)->clear_median();
  StatusOr<OpCostTable> missing = OpCostTable::FromProto(proto);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no measurement"), std::string::npos)
      << missing.status().message();

  proto = SampleTable().proto();
  proto.mutable_comm(0)->set_alpha(std::nan(""));
  EXPECT_FALSE(OpCostTable::FromProto(proto).ok());

  // Each straggle of a comm fit, the communication streams' one too.
  proto = SampleTable().proto();
  proto.mutable_comm(0)->set_comm_stream_straggle(-1e-6);
  StatusOr<OpCostTable> straggle = OpCostTable::FromProto(proto);
  ASSERT_FALSE(straggle.ok());
  EXPECT_NE(straggle.status().message().find("comm_stream_straggle must be finite and >= 0"),
            std::string::npos)
      << straggle.status().message();

  // The halves of an all-reduce are measured kinds of their own; other names are refused.
  for (const char* kind : {"all_gather", "reduce_scatter"}) {
    proto = SampleTable().proto();
    proto.mutable_comm(0)->set_kind(kind);
    EXPECT_TRUE(OpCostTable::FromProto(proto).ok()) << kind;
  }
  proto.mutable_comm(0)->set_kind("broadcast");
  StatusOr<OpCostTable> unknown = OpCostTable::FromProto(proto);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown kind 'broadcast'"), std::string::npos)
      << unknown.status().message();
}

TEST(OpCostTable, MalformedFilesGiveOneLineErrors) {
  std::string path = TempPath("bad.pbtxt");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("entries { key: \"x\" median: oops }\n", f);
    std::fclose(f);
  }
  StatusOr<OpCostTable> t = OpCostTable::Load(path);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("malformed cost table"), std::string::npos)
      << t.status().message();
  std::filesystem::remove(path);
  EXPECT_FALSE(OpCostTable::Load(TempPath("missing.pbtxt")).ok());
  EXPECT_FALSE(OpCostTable::Load(TempPath("table.json")).ok());  // unknown extension
}

}  // namespace
}  // namespace pw::cost
