#pragma once
// PyTorch's schedule CSV (torch.distributed.pipelining `_dump_csv` / `_load_csv`): one row
// per rank, one cell per action in its notation (ir/action.h), an empty cell for an idle
// step. Reading infers the stage-to-rank placement, the stage count and the micro-batch
// count from the actions, as PyTorch's loader does.
//
// Printing and reading are inverses: ParseScheduleCsv(ScheduleToCsv(s)) == s for every
// schedule the reader can produce. An empty line is a rank with no actions, `""` a rank
// whose single action is idle (Python's csv module writes and reads them the same way).

#include <string>
#include <string_view>

#include "ir/action.h"
#include "ir/status.h"

namespace pw {

// Errors name the line and cell: "line 2, cell 5: malformed action '3X1': ...".
StatusOr<ActionSchedule> ParseScheduleCsv(std::string_view text);
StatusOr<ActionSchedule> ReadScheduleCsv(const std::string& path);
std::string ScheduleToCsv(const ActionSchedule& schedule);

// Fills stage_to_rank, num_stages, num_micro_batches and skip_edges from the actions of a
// schedule whose rank lists are set. A stage run by two ranks or by none is an error.
Status InferScheduleShape(ActionSchedule& schedule);

}  // namespace pw
