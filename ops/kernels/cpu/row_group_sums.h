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
// acc[0, end - begin). With `partials` set, group g's partial sum is stored at
// partials[g * cols + c] and `sum` is not written; else `sum[c]` gets the whole sum.
template <class AddRow>
void GroupedColumnSums(const RowGroups& groups, int64_t cols, AddRow add_row, float* sum,
                       float* partials = nullptr) {
  const int64_t rows = groups.count * groups.rows;
  ParallelFor(cols, std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(rows, 1)),
              [&](int64_t begin, int64_t end) {
                const int64_t n = end - begin;
                std::vector<float> scratch(partials ? 0 : n);
                if (!partials) std::fill(sum + begin, sum + end, 0.f);
                for (int64_t g = 0; g < groups.count; ++g) {
                  float* part = partials ? partials + g * cols + begin : scratch.data();
                  std::fill(part, part + n, 0.f);
                  for (int64_t r = g * groups.rows; r < (g + 1) * groups.rows; ++r)
                    add_row(r, begin, end, part);
                  if (!partials) AddF32(sum + begin, part, sum + begin, n);
                }
              });
}

}  // namespace pw::ops::cpu
