#pragma once
// Row splits of a matmul, overlap-1f1b's adaptive op splitting: Out = X·Y with the rows of
// X (its second-to-last axis) cut into k equal blocks becomes a `split` of X, k matmuls
// and a `concat` of their outputs along the same axis. Each element of Out is still the
// dot product of one row of X with one column of Y, summed over K in the GEMM's order
// whatever M is, so the result is bit-identical (tests/ops/row_split_test.cc holds the
// kernels to that). A transposed X mixes rows into the reduction and is never split.

#include <string_view>

#include "ir/module.h"
#include "ir/status.h"

namespace pw {

// What names a row block's var: its whole var's name, the tag and the block's index.
inline constexpr std::string_view kRowBlockTag = "@ROWS";
inline bool IsRowBlock(std::string_view var) {
  return var.find(kRowBlockTag) != std::string_view::npos;
}

// The smallest GEMM a row block may be (rows, with the batch folded in, and output
// columns): below that a BLAS's small-matrix kernels may sum some shapes in another order.
inline constexpr int64_t kMinSplitRows = 64;
inline constexpr int64_t kMinSplitColumns = 64;

// Whether op `index` of `program` is a matmul whose X rows split into `blocks` equal
// blocks of at least max(`min_rows`, kMinSplitRows) GEMM rows each.
bool CanSplitRows(const Program& program, int index, int blocks, int64_t min_rows);

// Whether matmul `op` of `program` (of `module`: Y may be declared elsewhere) multiplies
// the rows of `x`, cut along `axis` (a row axis, not the last), by a 2-D matrix in `blocks`
// equal blocks of at least kMinSplitRows GEMM rows and kMinSplitColumns columns: the cuts
// of collective matmul and of sequence chunks.
bool MultipliesRowBlocks(const Program& program, const Module& module, const Op& op,
                         const std::string& x, int axis, int64_t blocks);

// Whether the row blocks of matmul `index`'s X can be views of X rather than copies
// (split{view}): every dim before the rows is 1 and no later op writes X.
bool SplitsAsView(const Program& program, int index);

// Replaces op `index` by split, `blocks` matmuls and concat (same role, placement and
// stream), declaring the block vars. Returns how many ops it inserted in its place.
StatusOr<int> SplitRows(Program& program, int index, int blocks);

// Which all-reduces a row split may cut. An all-reduce sums each element over the group's
// ranks; cut into blocks, each element is still summed over the same ranks in the same
// order: every transport sums an element in member order whatever its place in the buffer
// (executor/comm/tcp_ring.h, the in-process hub, NCCL's member-order all-reduce), so the
// cut is bit-identical at any group size.

// A matmul whose output only the all-reduce right after it reads (a row-parallel linear):
// split, then per block its matmul and the all-reduce of its rows, then a concat of the
// reduced blocks, so that each block's all-reduce runs while the next block multiplies.
bool CanSplitRowsWithAllReduce(const Program& program, int index, int blocks, int64_t min_rows);

// The input gradients of linears that share their input (a Llama's q, k and v, or its
// gate and up): n >= 2 matmuls right before a sum that alone reads each of them, the sum
// read only by the all-reduce right after it. Cut into row blocks, each block runs its n
// matmuls, its sum (the summands in the sum's order, so each element adds up as before:
// bit-identical) and its all-reduce. SummedMatmuls gives n for a sum at `index` whose
// summands are made that way, else 0.
int SummedMatmuls(const Program& program, int index);
bool CanSplitRowsOfSumWithAllReduce(const Program& program, int index, int blocks,
                                    int64_t min_rows);
// The split of the sum at `index`, its matmuls and all-reduce, carrying `tail` row-wise
// ops (RowWiseTail(program, index)) into the blocks.
StatusOr<int> SplitRowsOfSumWithAllReduce(Program& program, int index, int blocks, int tail = 0);

// The element-wise ops right after that all-reduce that can run per row block as well,
// each the only reader of the one before: a bias_add (the bias broadcast over the rows),
// an add whose other summand has the same shape (cut into the same blocks, as views where
// they lie one after another), a dropout, and a bias_dropout_add (bias, dropout and residual).
// A block's dropout draws its rows' part of the whole tensor's mask (the block and block_count
// attributes, ops/dropout_mask.h). Each element is computed as before, so the bits are too; the
// blocks of the first rows then run while the last rows are still reduced. How many of them
// follow op `index + 1` (0 when the matmul does not qualify); `index` may also be the sum of
// SummedMatmuls.
int RowWiseTail(const Program& program, int index);

// The split, carrying the first `tail` (<= RowWiseTail) of those ops into the blocks:
// per block its matmul and all-reduce, then per block its tail ops, then one concat of
// the last op's blocks into its output.
StatusOr<int> SplitRowsWithAllReduce(Program& program, int index, int blocks, int tail = 0);

}  // namespace pw
