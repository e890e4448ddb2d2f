#include "tools/inspect_checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <map>

#include "executor/checkpoint_reader.h"

namespace pw::tools {
namespace {

std::string MiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", bytes / 1048576.0);
  return buf;
}

std::string Dims(const google::protobuf::RepeatedField<int64_t>& dims) {
  return ShapeToString(Shape(dims.begin(), dims.end()));
}

std::string Joined(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += StrCat(i ? "," : "", values[i]);
  return out.empty() ? "-" : out;
}

// Each var once: dtype, full shape, how it is cut, and the ranks holding a piece.
void PrintVars(const CheckpointManifest& m) {
  struct Row {
    const CheckpointVar* var = nullptr;
    std::vector<int> ranks;
  };
  std::map<std::string, Row> rows;
  for (const CheckpointRank& r : m.ranks())
    for (const CheckpointVar& v : r.vars()) {
      Row& row = rows[v.name()];
      if (!row.var) row.var = &v;
      row.ranks.push_back(r.rank());
    }
  std::printf("  %-40s %-5s %-18s %-22s %s\n", "var", "dtype", "full shape", "cut", "ranks");
  for (const auto& [name, row] : rows) {
    const CheckpointVar& v = *row.var;
    const std::string cut = v.num_shards() > 1
                                ? StrCat(v.num_shards(), " pieces along axis ", v.shard_axis())
                                : "whole";
    std::printf("  %-40s %-5s %-18s %-22s %s\n", name.c_str(), v.dtype().c_str(),
                Dims(v.full_shape()).c_str(), cut.c_str(), Joined(row.ranks).c_str());
  }
}

}  // namespace

StatusOr<int> InspectCheckpoint(const std::string& path, bool list_vars) {
  PW_ASSIGN_OR_RETURN(auto reader, CheckpointReader::Open(path));
  PW_RETURN_IF_ERROR(reader->VerifyFiles());
  const CheckpointManifest& m = reader->manifest();
  std::printf("checkpoint %s: step %lld of module '%s' (model %s)\n", reader->path().c_str(),
              static_cast<long long>(m.step()), m.module_name().c_str(), m.model_hash().c_str());
  if (reader->path() != path) {
    std::string steps;
    for (const CheckpointEntry& e : ListCheckpoints(path)) steps += StrCat(" ", e.step);
    std::printf("  the latest complete checkpoint in %s (steps%s)\n", path.c_str(), steps.c_str());
  }
  std::printf("  layout: dp=%d pp=%d mp=%d vpp=%d, %d stages, schedule %s\n", m.dp(), m.pp(),
              m.mp(), m.vpp(), m.num_stages(), m.schedule().c_str());
  std::printf("  data: %lld micro-batches per step, ", static_cast<long long>(m.micro_batches()));
  if (m.data_source() == "fed")
    std::printf("fed by the framework\n");
  else
    std::printf("%s tokens, seed %llu\n",
                m.data_source() == "file" ? m.data_file().c_str() : "synthetic",
                static_cast<unsigned long long>(m.data_seed()));
  std::printf("  %4s %3s %3s %3s  %-8s %5s %12s  %-8s\n", "rank", "dp", "pp", "mp", "stages",
              "vars", "size", "crc32c");
  int64_t total = 0;
  for (const CheckpointRank& r : m.ranks()) {
    std::vector<int> stages(r.stages().begin(), r.stages().end());
    std::printf("  %4d %3d %3d %3d  %-8s %5d %12s  %-8s verified\n", r.rank(), r.dp(), r.pp(),
                r.mp(), Joined(stages).c_str(), r.vars_size(), MiB(r.bytes()).c_str(),
                r.crc32c().c_str());
    total += r.bytes();
  }
  std::printf("  %d rank files, %s in all; every size and checksum verified\n", m.ranks_size(),
              MiB(total).c_str());
  if (list_vars) PrintVars(m);
  return 0;
}

}  // namespace pw::tools
