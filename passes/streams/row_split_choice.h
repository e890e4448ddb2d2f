#pragma once
// Where row splits (row_split.h) pay, by the cost model: the choice overlap-1f1b makes for
// the forwards no other job hides, and overlap-row-split makes for every program of a plan
// whose jobs run alone (zero-bubble kinds, fthenb, plain 1f1b).

#include "ir/module.h"
#include "passes/pass_context.h"
#include "passes/streams/row_split.h"

namespace pw {

// The global rank whose placement prices `program`'s ops: its pipeline rank's first
// mp/dp replica.
int PricingRank(const Module& module, const Program& program);

enum class RowSplitMode {
  kForward,               // forward programs: the cost model's number of blocks
  kForwardBackwardInput,  // and backward-input programs (split backward's I)
  kAll,                   // every eligible matmul of every forward/backward program in two (tests)
};

struct RowSplitCounts {
  int matmuls = 0;           // matmuls cut into row blocks
  int wide_all_reduces = 0;  // of them, with an all-reduce of more than two ranks (exact too)
  int sequence_gathers = 0;  // sequence parallelism's all-gathers cut in chunks (sequence_chunks.h)
  int sequence_scatters = 0;  // and reduce-scatters
  RowSplitCounts& operator+=(const RowSplitCounts& other) {
    matmuls += other.matmuls;
    wide_all_reduces += other.wide_all_reduces;
    sequence_gathers += other.sequence_gathers;
    sequence_scatters += other.sequence_scatters;
    return *this;
  }
};

// Cuts the row-parallel matmuls of `program` (of `module`, whose mesh prices them; the
// cost model from `context`) whose all-reduce finishes sooner
// in row blocks, each with its row-wise tail, into the number of blocks that finishes
// soonest. Blocks of a previous cut are not cut again.
RowSplitCounts SplitRowParallelMatmuls(const Module& module, Program& program, RowSplitMode mode,
                                       PassContext& context);

}  // namespace pw
