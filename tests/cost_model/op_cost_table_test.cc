// The cost table: text and binary round trips, merging, and the errors bad tables give.

#include "cost_model/op_cost_table.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include "cost_model/comm_model.h"
#include "cost_model/device_spec.h"

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

// A table profiled in runs of two schedules: the default entries (both runs pooled) and
// each schedule's own beside them.
OpCostTable TwoScheduleTable() {
  OpCostTable t;
  t.set_device("cpu");
  t.Add(Entry("add(X:f32[4,8];Y:f32[4,8])", 6e-7, 20));
  OpCostEntry one_f_one_b = Entry("add(X:f32[4,8];Y:f32[4,8])", 5e-7, 10);
  one_f_one_b.set_schedule("1f1b");
  OpCostEntry f_then_b = Entry("add(X:f32[4,8];Y:f32[4,8])", 7e-7, 10);
  f_then_b.set_schedule("fthenb");
  t.Add(one_f_one_b);
  t.Add(f_then_b);
  t.Add(Entry("gelu(X:f32[4,8])", 3e-6, 5));  // timed alone: no schedule's own
  t.mutable_proto().add_in_run_schedules("1f1b");
  t.mutable_proto().add_in_run_schedules("fthenb");
  return t;
}

TEST(OpCostTable, KeepsEachSchedulesEntriesApartFromTheDefault) {
  OpCostTable t = TwoScheduleTable();
  EXPECT_EQ(t.size(), 4u);
  ASSERT_NE(t.Find("add(X:f32[4,8];Y:f32[4,8])"), nullptr);
  EXPECT_DOUBLE_EQ(t.Find("add(X:f32[4,8];Y:f32[4,8])")->median(), 6e-7);
  EXPECT_EQ(t.EntriesOf("add").size(), 1u);  // interpolation sees the default alone
  EXPECT_TRUE(t.ProfiledInRunOf("fthenb"));
  EXPECT_FALSE(t.ProfiledInRunOf("zb-h1"));

  // Adding a schedule's entry again replaces that one, not the default.
  OpCostEntry again = Entry("add(X:f32[4,8];Y:f32[4,8])", 8e-7, 10);
  again.set_schedule("fthenb");
  t.Add(again);
  EXPECT_EQ(t.size(), 4u);
  EXPECT_DOUBLE_EQ(t.Find("add(X:f32[4,8];Y:f32[4,8])")->median(), 6e-7);
  EXPECT_DOUBLE_EQ(t.ForSchedule("fthenb").Find("add(X:f32[4,8];Y:f32[4,8])")->median(), 8e-7);
}

TEST(OpCostTable, ForScheduleSwapsInThatSchedulesEntries) {
  const OpCostTable t = TwoScheduleTable();
  for (const auto& [schedule, median] : std::vector<std::pair<std::string, double>>{
           {"1f1b", 5e-7}, {"fthenb", 7e-7}, {"zb-h1", 6e-7}}) {
    OpCostTable view = t.ForSchedule(schedule);
    EXPECT_EQ(view.size(), 2u) << schedule;  // the other schedules' entries left out
    ASSERT_NE(view.Find("add(X:f32[4,8];Y:f32[4,8])"), nullptr) << schedule;
    EXPECT_DOUBLE_EQ(view.Find("add(X:f32[4,8];Y:f32[4,8])")->median(), median) << schedule;
    EXPECT_DOUBLE_EQ(view.Find("gelu(X:f32[4,8])")->median(), 3e-6) << schedule;
    EXPECT_EQ(view.proto().in_run_schedules_size(), 2) << schedule;
  }
}

TEST(OpCostTable, SchedulesEntriesSurviveSavingAndMerging) {
  OpCostTable t = TwoScheduleTable();
  std::string path = TempPath("schedules.pb");
  ASSERT_TRUE(t.Save(path).ok());
  StatusOr<OpCostTable> loaded = OpCostTable::Load(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_DOUBLE_EQ(loaded->ForSchedule("1f1b").Find("add(X:f32[4,8];Y:f32[4,8])")->median(), 5e-7);

  // Tables of the same schedules pool entry by entry, each schedule's with its own.
  ASSERT_TRUE(loaded->Merge(TwoScheduleTable()).ok());
  EXPECT_EQ(loaded->size(), 4u);
  EXPECT_EQ(loaded->ForSchedule("fthenb").Find("add(X:f32[4,8];Y:f32[4,8])")->repeats(), 20);
}

TEST(OpCostTable, MergeRefusesCostsOfOtherSchedulesRuns) {
  OpCostTable a = TwoScheduleTable();
  OpCostTable b;
  b.set_device("cpu");
  b.Add(Entry("add(X:f32[4,8];Y:f32[4,8])", 9e-7, 10));
  b.mutable_proto().add_in_run_schedules("interleaved-1f1b");
  Status s = a.Merge(b);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("profile the plans together"), std::string::npos) << s.message();
  // A table timed alone (no runs) merges into either.
  OpCostTable alone;
  alone.set_device("cpu");
  alone.Add(Entry("gelu(X:f32[4,8])", 1e-6, 5));
  EXPECT_TRUE(a.Merge(alone).ok());
}

// Whether FromProto refuses `proto` with a message that holds `text`.
::testing::AssertionResult RefusedNaming(const OpCostTable::Proto& proto, const std::string& text) {
  StatusOr<OpCostTable> table = OpCostTable::FromProto(proto);
  if (table.ok()) return ::testing::AssertionFailure() << "accepted";
  if (table.status().message().find(text) == std::string::npos)
    return ::testing::AssertionFailure() << table.status().message();
  return ::testing::AssertionSuccess();
}

TEST(OpCostTable, RejectsNegativeAndMissingCostsNamingTheEntry) {
  OpCostTable::Proto proto = SampleTable().proto();
  proto.mutable_entries(1)->set_median(-1e-6);
  EXPECT_TRUE(RefusedNaming(proto, "add(X:f32[4,8];Y:f32[4,8])"));

  proto = SampleTable().proto();
  proto.mutable_entries(0)->clear_median();
  EXPECT_TRUE(RefusedNaming(proto, "no measurement"));

  proto = SampleTable().proto();
  proto.mutable_comm(0)->set_alpha(std::nan(""));
  EXPECT_FALSE(OpCostTable::FromProto(proto).ok());

  // Each straggle of a comm fit, the communication streams' one too.
  proto = SampleTable().proto();
  proto.mutable_comm(0)->set_comm_stream_straggle(-1e-6);
  EXPECT_TRUE(RefusedNaming(proto, "comm_stream_straggle must be finite and >= 0"));

  // What an entry's runs found beyond the cache, and the table's cache and price.
  proto = SampleTable().proto();
  proto.mutable_entries(1)->set_stale_bytes(-1);
  EXPECT_TRUE(RefusedNaming(proto, "add(X:f32[4,8];Y:f32[4,8])"));
  proto = SampleTable().proto();
  proto.set_stale_price(std::nan(""));
  EXPECT_TRUE(RefusedNaming(proto, "stale_capacity and stale_price must be finite and >= 0"));
  proto = SampleTable().proto();
  proto.set_stale_capacity(-1);
  EXPECT_FALSE(OpCostTable::FromProto(proto).ok());

  // The share of the straggle ranks taking turns wait is a fraction.
  proto = SampleTable().proto();
  *proto.mutable_device_spec() = *BuiltinDeviceSpec("cpu");
  ASSERT_TRUE(OpCostTable::FromProto(proto).ok());
  proto.mutable_device_spec()->set_turn_straggle(2);
  EXPECT_TRUE(RefusedNaming(
      proto, "the cost table's device_spec: device spec 'cpu': turn_straggle must be in [0, 1]"));
  // So is a spinning thread's share of a core.
  proto.mutable_device_spec()->set_turn_straggle(0.5);
  proto.mutable_device_spec()->set_spin_cpu_share(-0.1);
  EXPECT_TRUE(RefusedNaming(
      proto, "the cost table's device_spec: device spec 'cpu': spin_cpu_share must be in [0, 1]"));

  // The halves of an all-reduce are measured kinds of their own; other names are refused.
  for (const char* kind : {"all_gather", "reduce_scatter"}) {
    proto = SampleTable().proto();
    proto.mutable_comm(0)->set_kind(kind);
    EXPECT_TRUE(OpCostTable::FromProto(proto).ok()) << kind;
  }
  proto.mutable_comm(0)->set_kind("broadcast");
  EXPECT_TRUE(RefusedNaming(proto, "unknown kind 'broadcast'"));
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
