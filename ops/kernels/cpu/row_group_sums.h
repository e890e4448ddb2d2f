#pragma once
// Sums over rows in the order of ops/defs/row_groups.h: each group's rows in order from
// zero, then the groups' partial sums in order from zero. Threads take ranges of columns,
// so the bits are the same at every thread count.

#include <algorithm>
#include <vector>

#include "ops/defs/row_groups.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {

// `add_row(r, begin, end, acc)` adds row r's contribution to columns [begin, end) into
// acc[0, end - begin). With `groups.partial`, group g's partial sum goes to
// out[g * cols + c]; else out[c] gets the whole sum.
template <class AddRow>
void GroupedColumnSums(const RowGroups& groups, int64_t cols, AddRow add_row, float* out) {
  const int64_t rows = groups.count * groups.rows;
  ParallelFor(cols, std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(rows, 1)),
              [&](int64_t begin, int64_t end) {
                const int64_t n = end - begin;
                std::vector<float> scratch(groups.partial ? 0 : n);
                if (!groups.partial) std::fill(out + begin, out + end, 0.f);
                for (int64_t g = 0; g < groups.count; ++g) {
                  float* part = groups.partial ? out + g * cols + begin : scratch.data();
                  std::fill(part, part + n, 0.f);
                  for (int64_t r = g * groups.rows; r < (g + 1) * groups.rows; ++r)
                    add_row(r, begin, end, part);
                  if (!groups.partial) AddF32(out + begin, part, out + begin, n);
                }
              });
}

}  // namespace pw::ops::cpu
