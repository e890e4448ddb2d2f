#include "tools/threads_flag.h"

#include "executor/process_resources.h"

namespace pw::tools {

StatusOr<int> ReadThreadsFlag(const Flags& flags, int local_processes) {
  PW_ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads", 0));
  if (flags.Has("threads") && (threads < 1 || threads > 4096))
    return InvalidArgument("flag --threads must be in [1, 4096], got ", threads);
  return ComputeThreads(static_cast<int>(threads), local_processes);
}

}  // namespace pw::tools
