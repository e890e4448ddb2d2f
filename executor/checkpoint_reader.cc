#include "executor/checkpoint_reader.h"

#include <filesystem>

#include "executor/reshard.h"
#include "executor/tensor_file.h"

namespace pw {
namespace fs = std::filesystem;
namespace {

Shape ShapeOf(const google::protobuf::RepeatedField<int64_t>& dims) {
  return Shape(dims.begin(), dims.end());
}

bool SameCut(const CheckpointVar& a, const CheckpointVar& b) {
  return a.num_shards() == b.num_shards() && a.shard_index() == b.shard_index() &&
         (a.num_shards() == 1 || a.shard_axis() == b.shard_axis());
}

// Whether a piece is what its cut says it is: shard i of n equal pieces of its full shape.
bool Tiles(const CheckpointVar& p) {
  Shape expect = ShapeOf(p.full_shape());
  if (p.num_shards() > 1) {
    int64_t& along = expect[p.shard_axis()];
    if (along % p.num_shards() != 0) return false;
    along /= p.num_shards();
  }
  return ShapeOf(p.shape()) == expect;
}

// A rank's tensors, the file checked against the manifest's size and checksum.
StatusOr<std::map<std::string, Tensor>> LoadRankFile(const std::string& dir,
                                                     const CheckpointRank& r) {
  const std::string path = (fs::path(dir) / r.file()).string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return DataLoss(path, ": rank ", r.rank(), "'s file is missing");
  const FileDigest digest{r.bytes(), static_cast<uint32_t>(std::stoul(r.crc32c(), nullptr, 16))};
  return LoadTensors(path, &digest);
}

}  // namespace

StatusOr<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(const std::string& path) {
  std::unique_ptr<CheckpointReader> reader(new CheckpointReader());
  PW_ASSIGN_OR_RETURN(reader->path_, ResolveCheckpoint(path));
  PW_ASSIGN_OR_RETURN(reader->manifest_, LoadManifest(reader->path_));
  for (const CheckpointRank& r : reader->manifest_.ranks())
    for (const CheckpointVar& v : r.vars()) reader->holders_[v.name()].push_back({r.rank(), &v});
  return reader;
}

std::string CheckpointReader::manifest_path() const {
  return (fs::path(path_) / kManifestFile).string();
}

Status CheckpointReader::VerifyFiles() const {
  for (const CheckpointRank& r : manifest_.ranks()) {
    PW_ASSIGN_OR_RETURN(auto tensors, LoadRankFile(path_, r));
    for (const CheckpointVar& v : r.vars()) {
      auto it = tensors.find(v.name());
      if (it == tensors.end() || DataTypeName(it->second.dtype()) != v.dtype() ||
          it->second.shape() != ShapeOf(v.shape()))
        return DataLoss(path_, "/", r.file(), ": var '", v.name(), "' is not the ", v.dtype(), " ",
                        ShapeToString(ShapeOf(v.shape())), " the manifest lists");
    }
  }
  return OkStatus();
}

StatusOr<CheckpointReader::Source> CheckpointReader::Plan(const CheckpointVar& wanted,
                                                          int prefer_rank) const {
  auto it = holders_.find(wanted.name());
  if (it == holders_.end())
    return FailedPrecondition(manifest_path(), ": no rank holds var '", wanted.name(), "'");
  const Shape full = ShapeOf(wanted.full_shape());
  for (const Holder& h : it->second) {
    const CheckpointVar& p = *h.piece;
    if (p.dtype() != wanted.dtype() || ShapeOf(p.full_shape()) != full)
      return FailedPrecondition(manifest_path(), ": var '", wanted.name(), "' is ", p.dtype(), " ",
                                ShapeToString(ShapeOf(p.full_shape())), " there, ", wanted.dtype(),
                                " ", ShapeToString(full), " here");
    if (!Tiles(p))
      return FailedPrecondition(manifest_path(), ": cannot re-shard '", wanted.name(), "': rank ",
                                h.rank, " holds ", ShapeToString(ShapeOf(p.shape())),
                                ", which is not shard ", p.shard_index(), " of ", p.num_shards(),
                                " along axis ", p.shard_axis(), " of ", ShapeToString(full));
  }
  Source source;
  // The very piece: from the preferred rank when it holds it, else the lowest that does.
  for (const Holder& h : it->second)
    if (SameCut(*h.piece, wanted) && (source.pieces.empty() || h.rank == prefer_rank))
      source.pieces = {h};
  if (!source.pieces.empty()) return source;
  source.cut = wanted.num_shards() > 1;
  for (const Holder& h : it->second)
    if (h.piece->num_shards() == 1) {
      source.pieces = {h};  // the whole tensor, to cut
      return source;
    }
  // Every shard of the checkpoint's cut, to join.
  const CheckpointVar& first = *it->second.front().piece;
  source.pieces.assign(first.num_shards(), Holder{-1, nullptr});
  for (const Holder& h : it->second) {
    const CheckpointVar& p = *h.piece;
    if (p.num_shards() != first.num_shards() || p.shard_axis() != first.shard_axis())
      return FailedPrecondition(manifest_path(), ": cannot re-shard '", wanted.name(),
                                "': ranks cut it along axis ", first.shard_axis(), " into ",
                                first.num_shards(), " and along axis ", p.shard_axis(), " into ",
                                p.num_shards());
    if (!source.pieces[p.shard_index()].piece) source.pieces[p.shard_index()] = h;
  }
  for (int i = 0; i < first.num_shards(); ++i)
    if (!source.pieces[i].piece)
      return FailedPrecondition(manifest_path(), ": cannot re-shard '", wanted.name(), "': shard ",
                                i, " of ", first.num_shards(), " along axis ", first.shard_axis(),
                                " is in no rank file");
  return source;
}

Status CheckpointReader::CheckCanRead(const CheckpointVar& wanted) const {
  if (wanted.num_shards() > 1) {
    const int64_t along = wanted.full_shape(wanted.shard_axis());
    if (along % wanted.num_shards() != 0)
      return FailedPrecondition(
          "cannot cut '", wanted.name(), "' ", ShapeToString(ShapeOf(wanted.full_shape())),
          " into ", wanted.num_shards(), " equal pieces along axis ", wanted.shard_axis());
  }
  return Plan(wanted, -1).status();
}

StatusOr<const std::map<std::string, Tensor>*> CheckpointReader::RankTensors(int rank) {
  auto it = loaded_.find(rank);
  if (it != loaded_.end()) return &it->second;
  PW_ASSIGN_OR_RETURN(auto tensors, LoadRankFile(path_, manifest_.ranks(rank)));
  return &loaded_.emplace(rank, std::move(tensors)).first->second;
}

StatusOr<Tensor> CheckpointReader::PieceTensor(const Holder& holder) {
  PW_ASSIGN_OR_RETURN(const auto* tensors, RankTensors(holder.rank));
  const CheckpointVar& p = *holder.piece;
  auto it = tensors->find(p.name());
  if (it == tensors->end() || DataTypeName(it->second.dtype()) != p.dtype() ||
      it->second.shape() != ShapeOf(p.shape()))
    return DataLoss(path_, "/", manifest_.ranks(holder.rank).file(), ": var '", p.name(),
                    "' is not the ", p.dtype(), " ", ShapeToString(ShapeOf(p.shape())),
                    " the manifest lists");
  return it->second;
}

StatusOr<Tensor> CheckpointReader::Read(const CheckpointVar& wanted, int prefer_rank) {
  PW_ASSIGN_OR_RETURN(Source source, Plan(wanted, prefer_rank));
  std::vector<Tensor> pieces;
  for (const Holder& h : source.pieces) {
    PW_ASSIGN_OR_RETURN(Tensor t, PieceTensor(h));
    pieces.push_back(std::move(t));
  }
  Tensor whole = pieces[0];
  if (pieces.size() > 1) {
    std::vector<const Tensor*> parts;
    for (const Tensor& t : pieces) parts.push_back(&t);
    PW_ASSIGN_OR_RETURN(whole, JoinShards(parts, source.pieces[0].piece->shard_axis()));
  }
  if (!source.cut) return whole;
  return CutShard(whole, wanted.shard_axis(), wanted.num_shards(), wanted.shard_index());
}

}  // namespace pw
