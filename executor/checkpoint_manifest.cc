#include "executor/checkpoint_manifest.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <map>

#include "executor/durable_file.h"
#include "ir/file_util.h"
#include "ir/post_validation.h"
#include "ir/tensor_size.h"

namespace pw {
namespace fs = std::filesystem;
namespace {

// FNV-1a, 64 bits: identity of a text, not a defence against forgery.
uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Shape FullShape(const Var& v) { return v.init.num_shards > 1 ? v.init.full_shape : v.shape; }

Shape ShapeOf(const google::protobuf::RepeatedField<int64_t>& dims) {
  return Shape(dims.begin(), dims.end());
}

class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error.empty()) error = StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  std::string error;
};

bool IsHex8(const std::string& s) {
  return s.size() == 8 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

Status CheckPiece(const CheckpointVar& v) {
  DataType dtype;
  if (!ParseDataType(v.dtype(), &dtype) || dtype == DataType::kInvalid)
    return InvalidArgument("var '", v.name(), "' has unknown dtype '", v.dtype(), "'");
  const Shape shape = ShapeOf(v.shape()), full = ShapeOf(v.full_shape());
  if (!TensorFits(dtype, shape) || !TensorFits(dtype, full))
    return InvalidArgument("var '", v.name(), "' is too large (", TensorLimitText(), ")");
  if (v.num_shards() < 1 || v.shard_index() < 0 || v.shard_index() >= v.num_shards())
    return InvalidArgument("var '", v.name(), "' is shard ", v.shard_index(), " of ",
                           v.num_shards());
  if (v.num_shards() > 1 && (v.shard_axis() < 0 || v.shard_axis() >= static_cast<int>(full.size())))
    return InvalidArgument("var '", v.name(), "' is cut along axis ", v.shard_axis(), " of ",
                           ShapeToString(full));
  return OkStatus();
}

}  // namespace

std::string StepDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08" PRId64, step);
  return buf;
}

std::optional<int64_t> ParseStepDirName(const std::string& name) {
  constexpr size_t kPrefix = 5;  // "step-"
  if (name.size() < kPrefix + 8 || name.size() > kPrefix + 18 || name.rfind("step-", 0) != 0)
    return std::nullopt;
  int64_t step = 0;
  for (size_t i = kPrefix; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::string RankFileName(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "rank%05d.tensors", rank);
  return buf;
}

std::map<std::string, const Var*> CheckpointedVars(const Module& module) {
  std::map<std::string, const Var*> vars;
  for (const Program& p : module.programs())
    for (const Var& v : p.vars())
      if (v.persistable && !IsPostValidationVar(v.name)) vars.emplace(v.name, &v);
  return vars;
}

std::string ModelHash(const Module& module) {
  std::string text;
  for (const auto& [name, v] : CheckpointedVars(module)) {
    const Initializer& i = v->init;
    text += StrCat(name, " ", DataTypeName(v->dtype), " ", ShapeToString(FullShape(*v)), " ",
                   v->is_parameter, " ", static_cast<int>(i.kind), " ", i.value, " ", i.mean, " ",
                   i.std, " ", i.low, " ", i.high, " ", i.seed, " ", i.key.empty() ? name : i.key,
                   "\n");
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, Fnv1a(text));
  return buf;
}

CheckpointVar PieceOf(const Var& var) {
  CheckpointVar p;
  p.set_name(var.name);
  p.set_dtype(DataTypeName(var.dtype));
  for (int64_t d : var.shape) p.add_shape(d);
  for (int64_t d : FullShape(var)) p.add_full_shape(d);
  const bool sharded = var.init.num_shards > 1;
  p.set_shard_axis(sharded ? var.init.shard_axis : 0);
  p.set_num_shards(sharded ? var.init.num_shards : 1);
  p.set_shard_index(sharded ? var.init.shard_index : 0);
  return p;
}

std::vector<int> StagesOfRank(const Module& module, int rank) {
  if (module.plan.empty()) return {0};
  const int pipeline_rank = RankLayout(module.mesh).Coord(rank).pp;
  std::vector<int> stages;
  for (size_t s = 0; s < module.plan.stage_to_rank.size(); ++s)
    if (module.plan.stage_to_rank[s] == pipeline_rank) stages.push_back(static_cast<int>(s));
  return stages;
}

std::vector<CheckpointEntry> ListCheckpoints(const std::string& dir) {
  std::vector<CheckpointEntry> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    auto step = ParseStepDirName(entry.path().filename().string());
    if (step && fs::is_regular_file(entry.path() / kManifestFile, ec))
      found.push_back({*step, entry.path().string()});
  }
  std::sort(found.begin(), found.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step < b.step; });
  return found;
}

StatusOr<std::string> ResolveCheckpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return NotFound(path, ": no such checkpoint folder");
  if (fs::exists(fs::path(path) / kManifestFile, ec)) return path;
  std::vector<CheckpointEntry> all = ListCheckpoints(path);
  if (all.empty())
    return NotFound(path, ": no complete checkpoint (a step-N folder with its ", kManifestFile,
                    ")");
  return all.back().path;
}

std::string ToText(const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(message, &text);
  return text;
}

Status FromText(const std::string& text, const std::string& path,
                google::protobuf::Message* message) {
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, message))
    return DataLoss(path, ": malformed: ", errors.error.empty() ? "parse failed" : errors.error);
  return OkStatus();
}

StatusOr<CheckpointManifest> LoadManifest(const std::string& checkpoint) {
  const std::string path = (fs::path(checkpoint) / kManifestFile).string();
  PW_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  CheckpointManifest m;
  PW_RETURN_IF_ERROR(FromText(text, path, &m));
  auto bad = [&path](auto&&... what) { return DataLoss(path, ": ", what...); };
  if (m.format() != kCheckpointFormat)
    return bad("format ", m.format(), ", this build reads format ", kCheckpointFormat);
  if (m.step() < 0) return bad("step ", m.step());
  if (m.dp() < 1 || m.pp() < 1 || m.mp() < 1 || m.vpp() < 1 || m.micro_batches() < 1)
    return bad("mesh dp=", m.dp(), " pp=", m.pp(), " mp=", m.mp(), " vpp=", m.vpp(), " with ",
               m.micro_batches(), " micro-batches per step");
  const int64_t world = int64_t{m.dp()} * m.pp() * m.mp();
  if (m.ranks_size() != world)
    return bad(m.ranks_size(), " rank entries for a mesh of ", world, " ranks");
  for (int r = 0; r < m.ranks_size(); ++r) {
    const CheckpointRank& rank = m.ranks(r);
    if (rank.rank() != r) return bad("rank entry ", r, " is for rank ", rank.rank());
    const std::string& file = rank.file();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      return bad("rank ", r, " has file name '", file, "'");
    if (rank.bytes() < 0 || !IsHex8(rank.crc32c()))
      return bad("rank ", r, " has size ", rank.bytes(), " and crc32c '", rank.crc32c(), "'");
    for (const CheckpointVar& v : rank.vars())
      if (Status s = CheckPiece(v); !s.ok()) return bad("rank ", r, ": ", s.message());
  }
  return m;
}

Status SaveManifest(const CheckpointManifest& manifest, const std::string& path) {
  return WriteFileDurably(path, ToText(manifest));
}

Status CheckSameModel(const CheckpointManifest& manifest, const Module& module,
                      const std::string& manifest_path) {
  const std::string here = ModelHash(module);
  if (manifest.model_hash() == here) return OkStatus();
  auto other = [&](auto&&... why) {
    return FailedPrecondition(manifest_path, " is a checkpoint of another module (", why..., ")");
  };
  std::map<std::string, const CheckpointVar*> there;
  for (const CheckpointRank& r : manifest.ranks())
    for (const CheckpointVar& v : r.vars()) there.emplace(v.name(), &v);
  const auto mine = CheckpointedVars(module);
  for (const auto& [name, v] : mine) {
    auto it = there.find(name);
    if (it == there.end()) return other("it has no var '", name, "'");
    const Shape full = ShapeOf(it->second->full_shape());
    if (it->second->dtype() != DataTypeName(v->dtype) || full != FullShape(*v))
      return other("'", name, "' is ", it->second->dtype(), " ", ShapeToString(full), " there, ",
                   DataTypeName(v->dtype), " ", ShapeToString(FullShape(*v)), " here");
  }
  for (const auto& [name, v] : there)
    if (!mine.count(name)) return other("this module has no var '", name, "'");
  return other("model hash ", manifest.model_hash(), " there, ", here,
               " here: initializers or optimizer settings differ");
}

}  // namespace pw
