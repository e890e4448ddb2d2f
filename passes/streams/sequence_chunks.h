#pragma once
// Sequence chunks: sequence parallelism's all-gathers and reduce-scatters cut, with the
// matmuls they feed or are fed by, into k chunks of every member's rows, so that each
// chunk's collective runs under the next (or the previous) chunk's matmul. The chunked
// forward a lone job runs (overlap-1f1b's variants), where no other job hides them.
//
//   c_all_gather(X) -> matmul      X's rows in k slices (views), each gathered on its own
//                                  ([member 0's slice j, member 1's slice j, ...]) while the
//                                  matmul of the slice before runs; the products' rows put
//                                  back in sequence order by one concat.
//   matmul -> c_reduce_scatter_sum the matmul's rows regrouped into k chunks of each
//                                  member's slice j, each multiplied and reduce-scattered
//                                  while the next chunk multiplies; a member's reduced
//                                  slices joined in order are its rows of the whole.
//
// Against collective matmul (overlap-collective-matmul: one block per member, 1/mp of the
// rows each) a chunk holds mp times the rows of a member's slice: at mp 8 and 2048 tokens,
// GEMMs of 1024 or 512 rows instead of 256, which run near the device's full rate. What is
// left exposed is the first gather chunk and the last scatter chunk: 1/k of each.
//
// Bits: a gather and a reduce-scatter move or sum each element as the whole one does (every
// transport sums in member order whatever the element's place), a matmul's row block is
// those rows of the whole product (row_split.h, at least kMinSplitRows GEMM rows), and
// splits and concats move bytes: each output element is computed as before.

#include "ir/module.h"
#include "passes/pass_context.h"

namespace pw {

// Which of a program's sequence collectives to cut: every eligible one (of a forward), or
// only the one at a job's edge: its first all-gather (of a forward or a backward: nothing of
// the job runs before it) or its last reduce-scatter (of a forward: nothing runs after it).
enum class ChunkScope { kEvery, kFirstGather, kLastScatter };

struct SequenceChunkCounts {
  int gathers = 0;   // all-gathers cut with the matmuls they feed
  int scatters = 0;  // reduce-scatters cut with the matmul that feeds them
};

// Cuts the sequence-parallel collectives of `program` in `scope` (of `module`, whose mesh
// prices them with the cost model in `context`) into the number of chunks that finishes
// soonest, where that beats the whole collective; with `all`, every eligible one into two
// (tests).
SequenceChunkCounts ChunkSequenceCollectives(const Module& module, Program& program, bool all,
                                             PassContext& context,
                                             ChunkScope scope = ChunkScope::kEvery);

}  // namespace pw
