#include "tools/checkpoint_flags.h"

namespace pw::tools {

void DeclareCheckpointFlags(Flags& flags) {
  for (const char* name : kCheckpointFlags) flags.Value(name);
}

StatusOr<CheckpointOptions> ReadCheckpointFlags(const Flags& flags) {
  CheckpointOptions o;
  o.dir = flags.Get("checkpoint-dir");
  o.resume = flags.Get("resume");
  if (o.dir.empty())
    for (const char* name : {"checkpoint-every", "keep"})
      if (flags.Has(name)) return InvalidArgument("flag --", name, " needs --checkpoint-dir");
  if (flags.Has("checkpoint-dir") && o.dir.empty())
    return InvalidArgument("flag --checkpoint-dir needs a folder");
  if (flags.Has("resume") && o.resume.empty())
    return InvalidArgument("flag --resume needs a checkpoint");
  PW_ASSIGN_OR_RETURN(o.every, flags.GetInt("checkpoint-every", 0, 1, kInt64Max));
  PW_ASSIGN_OR_RETURN(int64_t keep, flags.GetInt("keep", 0, 1));
  o.keep = static_cast<int>(keep);
  return o;
}

StatusOr<uint64_t> ResumedDataSeed(const CheckpointOptions& options, uint64_t fallback) {
  if (options.resume.empty()) return fallback;
  PW_ASSIGN_OR_RETURN(auto reader, CheckpointReader::Open(options.resume));
  const CheckpointManifest& m = reader->manifest();
  return m.data_source() == "fed" ? fallback : m.data_seed();
}

StatusOr<int64_t> CheckCheckpointsBeforeRun(CheckpointOptions& options, const Module& module,
                                            const CheckpointManifest& header, int64_t steps) {
  int64_t start = 0;
  if (!options.resume.empty()) {
    PW_ASSIGN_OR_RETURN(auto reader, CheckpointReader::Open(options.resume));
    PW_RETURN_IF_ERROR(CheckCheckpointFits(*reader, module));
    PW_RETURN_IF_ERROR(CheckSameData(*reader, header));
    PW_RETURN_IF_ERROR(reader->VerifyFiles());
    start = reader->manifest().step();
    if (start >= steps)
      return FailedPrecondition(reader->path(), " holds step ", start, ": --steps ", steps,
                                " leaves nothing to train");
    options.resume = reader->path();
  }
  if (!options.dir.empty()) PW_RETURN_IF_ERROR(CheckContinuesRun(options.dir, start));
  return start;
}

}  // namespace pw::tools
