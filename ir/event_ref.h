#pragma once
// How an op names an event in `wait_events` / `record_events`. Events are keyed by
// (name, micro-batch), so the same name recorded by every micro-batch's job gives one
// event per micro-batch. A reference picks the micro-batch:
//   "name"      the micro-batch of the job the op runs in
//   "name@-2"   two micro-batches before it (a signed offset is relative)
//   "name@+1"   one after it
//   "name@3"    micro-batch 3 (an unsigned number is absolute)
// A relative reference that lands outside [0, micro-batches) names no event: the wait
// is dropped (the first micro-batches have nothing before them to wait for).

#include <string>
#include <string_view>

#include "ir/status.h"

namespace pw {

struct EventRef {
  std::string name;
  bool relative = true;
  int offset = 0;  // relative: added to the job's micro-batch; absolute: the micro-batch

  int MicroBatch(int job_micro_batch) const { return relative ? job_micro_batch + offset : offset; }
};

StatusOr<EventRef> ParseEventRef(std::string_view text);

}  // namespace pw
