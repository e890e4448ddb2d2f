#pragma once
// Programs cut into segments (overlap-1f1b): a run of a program's ops becomes a program
// of its own, so that the jobs of two micro-batches can alternate between their segments
// while the executor, the simulator and the checker see ordinary programs and jobs.

#include <string>
#include <vector>

#include "ir/module.h"
#include "ir/status.h"

namespace pw {

// One run of ops [begin, end) of a parent program.
struct SegmentRange {
  std::string parent;
  int begin = 0, end = 0;
  auto operator<=>(const SegmentRange&) const = default;
};

// "stage1_forward.seg12_25": the program of ops 12..24 of stage1_forward.
std::string SegmentName(const SegmentRange& range);

// Adds the program of each range that the module does not have yet: the ops of the range,
// the vars they use (declared as in the parent), and ProgramInfo with the parent's kind,
// stage and chunk, `segment_of` the parent, inputs the vars it reads before writing them
// (parameters and state excepted), outputs what it writes that the parent's later ops or
// another program read, keep_alive the parent's that it writes. A range covering the whole
// parent adds nothing (jobs run the parent).
Status AddSegmentPrograms(Module& module, const std::vector<SegmentRange>& ranges);

}  // namespace pw
