#pragma once
// Materialises the values of a persistable var from its Initializer. Values are a pure
// function of (seed, key, index in the FULL tensor), drawn from a counter-based hash RNG,
// so an mp shard holds bit-for-bit the slice of the unsharded tensor, whatever the layout.
//
// A module built with mp=M holds the program of mp rank 0 (shard_index 0 of every sharded
// parameter). An executor running mp rank r materialises its shards from
// ShardForRank(var, r), which only changes shard_index.

#include <cstdint>
#include <string>

#include "ir/status.h"
#include "ir/var.h"
#include "ops/tensor.h"

namespace pw {

// A fresh tensor of the var's dtype and shape filled from var.init (zeros for kNone).
StatusOr<Tensor> MaterializeVar(const Var& var);

// The initializer of the shard `shard_index`; unchanged when the var is not sharded.
Initializer WithShardIndex(Initializer init, int shard_index);
// The var as mp rank `mp_rank` holds it.
Var ShardForRank(Var var, int mp_rank);

// The value at `full_index` of the unsharded tensor named by init.key (or `name` when the
// key is empty). Exposed for tests.
double InitialValue(const Initializer& init, const std::string& name, int64_t full_index);

}  // namespace pw
