// Checkpoint folders: a checkpoint appears only when every rank has written its part, the
// newest N are kept, a folder is refused when it already holds a later step, and a reader
// cuts vars for another layout or names what is wrong: a missing, truncated or corrupted
// rank file, pieces that do not tile their var.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "executor/checkpoint_reader.h"
#include "executor/checkpoint_writer.h"
#include "executor/durable_file.h"
#include "executor/reshard.h"
#include "ir/file_util.h"

namespace pw {
namespace {
namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / ("checkpoint_files_" + name);
  fs::remove_all(dir);
  return dir.string();
}

// w: f32 [4, 6], cut into two column pieces on an mp = 2 mesh; b: whole on both ranks.
Tensor Whole() {
  Tensor t(DataType::kFloat32, {4, 6});
  for (int i = 0; i < 24; ++i) t.f32()[i] = 0.25f * i;
  return t;
}

Var WVar(int num_shards, int index, int axis = 1) {
  Var v;
  v.name = "w";
  v.shape = {4, 6};
  v.persistable = true;
  if (num_shards > 1) {
    v.init.full_shape = v.shape;
    v.shape[axis] /= num_shards;
    v.init.shard_axis = axis;
    v.init.num_shards = num_shards;
    v.init.shard_index = index;
  }
  return v;
}

CheckpointManifest Header(int64_t step) {
  CheckpointManifest h;
  h.set_format(kCheckpointFormat);
  h.set_step(step);
  h.set_dp(1);
  h.set_pp(1);
  h.set_mp(2);
  h.set_vpp(1);
  h.set_micro_batches(1);
  return h;
}

RankCheckpoint Rank(int rank) {
  RankCheckpoint r;
  r.rank = rank;
  r.coord.mp = rank;
  r.stages = {0};
  r.vars.emplace_back(PieceOf(WVar(2, rank)), CutShard(Whole(), 1, 2, rank).value());
  Tensor b(DataType::kFloat32, {2});
  b.f32()[0] = 1;
  b.f32()[1] = 2;
  Var bv;
  bv.name = "b";
  bv.shape = {2};
  r.vars.emplace_back(PieceOf(bv), b);
  return r;
}

Status WriteBoth(const std::string& dir, int64_t step, int keep = 0) {
  PW_RETURN_IF_ERROR(WriteRankCheckpoint(dir, Header(step), Rank(0), keep).status());
  return WriteRankCheckpoint(dir, Header(step), Rank(1), keep).status();
}

TEST(CheckpointFiles, CompleteOnlyWhenEveryRankHasWritten) {
  const std::string dir = FreshDir("complete");
  ASSERT_TRUE(WriteRankCheckpoint(dir, Header(3), Rank(1), 0).ok());
  EXPECT_TRUE(ListCheckpoints(dir).empty());
  auto none = CheckpointReader::Open(dir);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no complete checkpoint"), std::string::npos);
  ASSERT_TRUE(WriteRankCheckpoint(dir, Header(3), Rank(0), 0).ok());
  ASSERT_EQ(ListCheckpoints(dir).size(), 1u);
  EXPECT_EQ(ListCheckpoints(dir)[0].path, (fs::path(dir) / "step-00000003").string());
  EXPECT_FALSE(fs::exists(fs::path(dir) / "step-00000003.partial"));
  auto reader = CheckpointReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_TRUE((*reader)->VerifyFiles().ok());
  EXPECT_EQ((*reader)->manifest().ranks_size(), 2);
}

// A run killed while writing step 4 leaves a partial folder: step 2 stays the latest,
// and the next run removes the leftovers.
TEST(CheckpointFiles, APartialCheckpointIsInvisibleAndRemoved) {
  const std::string dir = FreshDir("partial");
  ASSERT_TRUE(WriteBoth(dir, 2).ok());
  ASSERT_TRUE(WriteRankCheckpoint(dir, Header(4), Rank(0), 0).ok());
  EXPECT_EQ(ResolveCheckpoint(dir).value(), (fs::path(dir) / "step-00000002").string());
  ASSERT_TRUE(fs::exists(fs::path(dir) / "step-00000004.partial"));
  ASSERT_TRUE(RemovePartialCheckpoints(dir).ok());
  EXPECT_FALSE(fs::exists(fs::path(dir) / "step-00000004.partial"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "step-00000002" / kManifestFile));
}

TEST(CheckpointFiles, KeepsTheNewest) {
  const std::string dir = FreshDir("keep");
  for (int step : {1, 2, 3}) ASSERT_TRUE(WriteBoth(dir, step, 2).ok());
  std::vector<CheckpointEntry> kept = ListCheckpoints(dir);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].step, 2);
  EXPECT_EQ(kept[1].step, 3);
}

TEST(CheckpointFiles, AFolderContinuesOneRun) {
  const std::string dir = FreshDir("continues");
  ASSERT_TRUE(WriteBoth(dir, 5).ok());
  EXPECT_TRUE(CheckContinuesRun(dir, 5).ok());
  Status later = CheckContinuesRun(dir, 0);
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.message().find("already holds step-00000005, after step 0"), std::string::npos);
  EXPECT_FALSE(WriteRankCheckpoint(dir, Header(5), Rank(0), 0).ok());  // never overwritten
}

// The column pieces of w read whole, as three column pieces and as two row pieces.
TEST(CheckpointFiles, ReadsVarsCutForAnotherLayout) {
  const std::string dir = FreshDir("reshard");
  ASSERT_TRUE(WriteBoth(dir, 1).ok());
  auto reader = std::move(CheckpointReader::Open(dir)).value();
  const Tensor whole = Whole();
  auto same = [](const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
  };
  auto read = [&](const Var& v, int prefer) {
    auto t = reader->Read(PieceOf(v), prefer);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : Tensor();
  };
  EXPECT_TRUE(same(read(WVar(1, 0), -1), whole));
  EXPECT_TRUE(same(read(WVar(2, 1), 1), CutShard(whole, 1, 2, 1).value()));
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(same(read(WVar(3, i), -1), CutShard(whole, 1, 3, i).value()));
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(same(read(WVar(2, i, 0), -1), CutShard(whole, 0, 2, i).value()));
  auto uneven = reader->CheckCanRead(PieceOf(WVar(4, 0)));  // 6 columns into 4
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.message().find("cannot cut 'w' [4, 6] into 4 equal pieces"), std::string::npos);
}

// The first line of an error, for comparing with what the tests expect.
std::string Error(const std::string& dir) {
  auto reader = CheckpointReader::Open(dir);
  if (!reader.ok()) return reader.status().message();
  Status verified = (*reader)->VerifyFiles();
  if (!verified.ok()) return verified.message();
  auto read = (*reader)->Read(PieceOf(WVar(1, 0)), -1);
  return read.ok() ? "" : read.status().message();
}

TEST(CheckpointFiles, NamesAMissingTruncatedOrCorruptedRankFile) {
  const std::string dir = FreshDir("damaged");
  ASSERT_TRUE(WriteBoth(dir, 1).ok());
  const fs::path file = fs::path(dir) / "step-00000001" / RankFileName(1);
  const std::string bytes = ReadFile(file.string()).value();

  ASSERT_TRUE(WriteFileDurably(file.string(), bytes.substr(0, bytes.size() - 5)).ok());
  EXPECT_NE(Error(dir).find("rank00001.tensors: truncated"), std::string::npos) << Error(dir);
  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x10;
  ASSERT_TRUE(WriteFileDurably(file.string(), flipped).ok());
  EXPECT_NE(Error(dir).find("rank00001.tensors: checksum mismatch"), std::string::npos)
      << Error(dir);
  fs::remove(file);
  EXPECT_NE(Error(dir).find(file.string() + ": rank 1's file is missing"), std::string::npos)
      << Error(dir);
}

// Manifests edited into layouts that cannot give w: a piece of the wrong shape, a shard
// that no rank holds.
TEST(CheckpointFiles, NamesPiecesThatDoNotTile) {
  const std::string dir = FreshDir("tiles");
  ASSERT_TRUE(WriteBoth(dir, 1).ok());
  const std::string manifest = (fs::path(dir) / "step-00000001" / kManifestFile).string();
  CheckpointManifest m = LoadManifest(fs::path(manifest).parent_path().string()).value();
  CheckpointManifest wrong_shape = m;
  wrong_shape.mutable_ranks(1)->mutable_vars(0)->set_shape(1, 2);
  ASSERT_TRUE(SaveManifest(wrong_shape, manifest).ok());
  Status tiles = std::move(CheckpointReader::Open(dir)).value()->CheckCanRead(PieceOf(WVar(1, 0)));
  EXPECT_NE(tiles.message().find("cannot re-shard 'w': rank 1 holds [4, 2], which is not shard 1 "
                                 "of 2 along axis 1 of [4, 6]"),
            std::string::npos)
      << tiles.message();
  CheckpointManifest missing = m;
  missing.mutable_ranks(1)->mutable_vars()->DeleteSubrange(0, 1);
  ASSERT_TRUE(SaveManifest(missing, manifest).ok());
  auto reader = std::move(CheckpointReader::Open(dir)).value();
  auto read = reader->Read(PieceOf(WVar(1, 0)), -1);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("cannot re-shard 'w': shard 1 of 2 along axis 1 is in no "
                                         "rank file"),
            std::string::npos)
      << read.status().message();
}

}  // namespace
}  // namespace pw
