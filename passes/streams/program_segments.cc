#include "passes/streams/program_segments.h"

#include <set>
#include <unordered_set>

namespace pw {
namespace {

Program MakeSegment(const Module& module, const Program& parent, const SegmentRange& range) {
  Program segment(SegmentName(range));
  const std::vector<Op>& ops = parent.ops();
  std::set<std::string> used, inputs, written;
  for (int k = range.begin; k < range.end; ++k) {
    ops[k].ForEachInput([&](const std::string& v) {
      used.insert(v);
      if (!written.count(v)) inputs.insert(v);
    });
    ops[k].ForEachOutput([&](const std::string& v) {
      used.insert(v);
      written.insert(v);
    });
    segment.AddOp(ops[k]);
  }
  for (const std::string& v : used)
    if (const Var* var = module.FindVar(v, &parent)) segment.AddVar(*var);

  // What later ops of the parent, or other programs, read of what the segment writes.
  std::unordered_set<std::string> read_later(parent.info().outputs.begin(),
                                             parent.info().outputs.end());
  for (size_t k = range.end; k < ops.size(); ++k)
    ops[k].ForEachInput([&](const std::string& v) { read_later.insert(v); });
  ProgramInfo& info = segment.info();
  const ProgramInfo& from = parent.info();
  info.kind = from.kind;
  info.stage = from.stage;
  info.chunk = from.chunk;
  info.segment_of = parent.name();
  info.segment_begin = range.begin;
  for (const std::string& v : inputs) {
    const Var* var = segment.FindVar(v);
    if (!var || !var->persistable) info.inputs.push_back(v);
  }
  for (const std::string& v : written)
    if (read_later.count(v)) info.outputs.push_back(v);
  for (const std::string& v : from.keep_alive)
    if (written.count(v)) info.keep_alive.push_back(v);
  return segment;
}

}  // namespace

std::string SegmentName(const SegmentRange& range) {
  return StrCat(range.parent, ".seg", range.begin, "_", range.end);
}

Status AddSegmentPrograms(Module& module, const std::vector<SegmentRange>& ranges) {
  std::vector<Program> added;
  std::set<std::string> names;
  for (const SegmentRange& range : ranges) {
    const Program* parent = module.FindProgram(range.parent);
    if (!parent) return NotFound("segment of a program that does not exist: '", range.parent, "'");
    const int n = static_cast<int>(parent->ops().size());
    if (range.begin < 0 || range.begin >= range.end || range.end > n)
      return InvalidArgument("segment [", range.begin, ", ", range.end, ") of '", range.parent,
                             "' is not inside its ", n, " ops");
    if (range.begin == 0 && range.end == n) continue;
    const std::string name = SegmentName(range);
    if (module.FindProgram(name) || !names.insert(name).second) continue;
    added.push_back(MakeSegment(module, *parent, range));
  }
  // Added last: adding programs moves the module's programs.
  for (Program& p : added) module.AddProgram(std::move(p));
  return OkStatus();
}

}  // namespace pw
