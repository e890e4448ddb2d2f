#include "executor/checkpoint_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "executor/crc32c.h"
#include "executor/durable_file.h"
#include "executor/tensor_file.h"
#include "ir/file_util.h"

namespace pw {
namespace fs = std::filesystem;
namespace {

constexpr const char* kDroppedSuffix = ".dropped";
constexpr const char* kFinishLock = "finish.lock";

std::string EntryName(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "rank%05d.entry", rank);
  return buf;
}

// Claims the right to finish a checkpoint: only one of the ranks that saw it whole does.
StatusOr<bool> ClaimFinish(const fs::path& partial) {
  const std::string lock = (partial / kFinishLock).string();
  int fd = ::open(lock.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  if (errno == EEXIST) return false;
  return Unavailable("cannot create ", lock, ": ", std::strerror(errno));
}

// Drops all but the newest `keep` checkpoints. Renamed first, so that a reader never
// sees a checkpoint half removed.
void DropOld(const fs::path& dir, int keep) {
  if (keep <= 0) return;
  std::vector<CheckpointEntry> all = ListCheckpoints(dir.string());
  for (size_t i = 0; i + keep < all.size(); ++i) {
    const std::string dropped = all[i].path + kDroppedSuffix;
    if (std::rename(all[i].path.c_str(), dropped.c_str()) != 0) continue;  // another rank's
    std::error_code ec;
    fs::remove_all(dropped, ec);
  }
}

Status Finish(const fs::path& dir, const fs::path& partial, const CheckpointManifest& header,
              int world, int keep) {
  CheckpointManifest manifest = header;
  for (int r = 0; r < world; ++r) {
    const std::string path = (partial / EntryName(r)).string();
    PW_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    PW_RETURN_IF_ERROR(FromText(text, path, manifest.add_ranks()));
  }
  PW_RETURN_IF_ERROR(SaveManifest(manifest, (partial / kManifestFile).string()));
  std::error_code ec;
  for (int r = 0; r < world; ++r) fs::remove(partial / EntryName(r), ec);
  fs::remove(partial / kFinishLock, ec);
  PW_RETURN_IF_ERROR(SyncDirectory(partial.string()));
  const fs::path final_dir = dir / StepDirName(header.step());
  if (std::rename(partial.c_str(), final_dir.c_str()) != 0)
    return Unavailable("cannot rename ", partial.string(), " to ", final_dir.string(), ": ",
                       std::strerror(errno));
  PW_RETURN_IF_ERROR(SyncDirectory(dir.string()));
  DropOld(dir, keep);
  return OkStatus();
}

}  // namespace

StatusOr<int64_t> WriteRankCheckpoint(const std::string& dir_name, const CheckpointManifest& header,
                                      const RankCheckpoint& rank, int keep) {
  const fs::path dir(dir_name);
  const fs::path partial = dir / (StepDirName(header.step()) + kPartialSuffix);
  std::vector<CheckpointEntry> done = ListCheckpoints(dir_name);
  if (!done.empty() && done.back().step >= header.step())
    return FailedPrecondition("checkpoint folder ", dir_name, " already holds ",
                              fs::path(done.back().path).filename().string(),
                              ": a checkpoint of step ", header.step(), " would not be its newest");
  std::error_code ec;
  fs::create_directories(partial, ec);
  if (ec) return Unavailable("cannot create ", partial.string(), ": ", ec.message());

  std::map<std::string, Tensor> tensors;
  CheckpointRank entry;
  entry.set_rank(rank.rank);
  entry.set_dp(rank.coord.dp);
  entry.set_pp(rank.coord.pp);
  entry.set_mp(rank.coord.mp);
  for (int s : rank.stages) entry.add_stages(s);
  for (const auto& [piece, tensor] : rank.vars) {
    tensors.emplace(piece.name(), tensor);
    *entry.add_vars() = piece;
  }
  entry.set_file(RankFileName(rank.rank));
  FileDigest digest;
  PW_RETURN_IF_ERROR(SaveTensors((partial / entry.file()).string(), tensors, &digest));
  entry.set_bytes(digest.bytes);
  entry.set_crc32c(Crc32cHex(digest.crc32c));
  PW_RETURN_IF_ERROR(WriteFileDurably((partial / EntryName(rank.rank)).string(), ToText(entry)));
  PW_RETURN_IF_ERROR(SyncDirectory(partial.string()));

  // Each rank looks after writing its own entry, so the last one to finish sees them all.
  const int world = header.dp() * header.pp() * header.mp();
  for (int r = 0; r < world; ++r)
    if (!fs::exists(partial / EntryName(r), ec)) return digest.bytes;
  PW_ASSIGN_OR_RETURN(bool mine, ClaimFinish(partial));
  if (mine) PW_RETURN_IF_ERROR(Finish(dir, partial, header, world, keep));
  return digest.bytes;
}

Status CheckContinuesRun(const std::string& dir, int64_t start_step) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    return InvalidArgument("checkpoint folder ", dir, " is a file");
  std::vector<CheckpointEntry> all = ListCheckpoints(dir);
  if (all.empty() || all.back().step <= start_step) return OkStatus();
  return FailedPrecondition("checkpoint folder ", dir, " already holds ",
                            fs::path(all.back().path).filename().string(), ", after step ",
                            start_step, " where this run starts: resume from it (--resume ", dir,
                            ") or write into another folder");
}

Status RemovePartialCheckpoints(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) != 0) continue;
    auto ends_with = [&name](const std::string& suffix) {
      return name.size() > suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (!ends_with(kPartialSuffix) && !ends_with(kDroppedSuffix)) continue;
    fs::remove_all(entry.path(), ec);
    if (ec) return Unavailable("cannot remove ", entry.path().string(), ": ", ec.message());
  }
  return OkStatus();
}

}  // namespace pw
