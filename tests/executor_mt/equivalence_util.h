#pragma once
// Runs every rank of a module as a thread of this process and gathers what the
// equivalence tests compare: the loss of each step and the full (unsharded) parameters.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "executor/initializer.h"
#include "executor/local_ranks.h"
#include "executor/rank_runner.h"
#include "ir/module.h"
#include "ir/rank_layout.h"
#include "ops/low_precision.h"
#include "passes/pass_manager.h"

namespace pw::testing {

struct ThreadRun {
  std::vector<double> losses;       // per step, mean over every micro-batch of every replica
  std::vector<int64_t> peak_bytes;  // per rank, max over steps
  std::vector<std::map<std::string, Tensor>> params;  // per rank
};

inline StatusOr<Module> WithPasses(Module module, const std::string& pipeline) {
  PassManager pm;
  PW_RETURN_IF_ERROR(pm.AddPipeline(pipeline));
  PW_RETURN_IF_ERROR(pm.Run(module).status());
  return module;
}

inline StatusOr<ThreadRun> RunAsThreads(const Module& module, int64_t steps, int micro_batches,
                                        uint64_t seed) {
  RankRunOptions o;
  o.steps = steps;
  o.micro_batches = micro_batches;
  o.data.data_seed = seed;
  PW_ASSIGN_OR_RETURN(LocalRunResult local, RunLocalRanks(module, o));
  return ThreadRun{local.Losses(), local.PeakBytes(), std::move(local.params)};
}

// Every persistable var of replica 0 at its full shape: mp shards are concatenated along
// their shard axis (their Initializer says how they were cut).
inline std::map<std::string, Tensor> FullParams(const Module& module, const ThreadRun& run) {
  RankLayout layout(module.mesh);
  std::map<std::string, Var> decls;
  for (const Program& p : module.programs())
    for (const Var& v : p.vars())
      if (v.persistable) decls.emplace(v.name, v);
  std::map<std::string, Tensor> full;
  for (const auto& [name, var] : decls) {
    std::vector<const Tensor*> shards;
    for (int rank = 0; rank < layout.world_size(); ++rank) {
      RankCoord c = layout.Coord(rank);
      if (c.dp != 0) continue;
      auto it = run.params[rank].find(name);
      if (it == run.params[rank].end()) continue;
      if (c.mp >= static_cast<int>(shards.size())) shards.resize(c.mp + 1, nullptr);
      shards[c.mp] = &it->second;
    }
    if (shards.empty() || !shards[0]) continue;
    const Initializer& init = var.init;
    if (init.num_shards <= 1) {
      full[name] = *shards[0];
      continue;
    }
    Tensor out(var.dtype, init.full_shape);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < init.shard_axis; ++i) outer *= init.full_shape[i];
    for (size_t i = init.shard_axis + 1; i < init.full_shape.size(); ++i)
      inner *= init.full_shape[i];
    // Bytes, so that shards of every dtype (bf16 parameter copies too) concatenate.
    const int64_t piece = shards[0]->shape()[init.shard_axis] * inner * DataTypeSize(var.dtype);
    char* dst = static_cast<char*>(out.raw());
    for (int64_t o = 0; o < outer; ++o)
      for (const Tensor* s : shards) {
        std::memcpy(dst, static_cast<const char*>(s->raw()) + o * piece, piece);
        dst += piece;
      }
    full[name] = out;
  }
  return full;
}

// Every persistable var of `module` (a one-rank module: full shapes) as initialised,
// before any step.
inline std::map<std::string, Tensor> InitialParams(const Module& module) {
  std::map<std::string, Tensor> initial;
  for (const Program& p : module.programs())
    for (const Var& v : p.vars())
      if (v.persistable && !initial.count(v.name)) initial[v.name] = MaterializeVar(v).value();
  return initial;
}

// How far a run's value `a` of a tensor is from a reference run's `b`, beside the size of
// b's update (from `initial`) and of b itself: maxima over the elements, in f32.
struct UpdateDiff {
  double diff = 0;    // max |a - b|
  double update = 0;  // max |b - initial|
  double scale = 0;   // max |b|
  // diff / update: the error at the scale of the update. At the tensor's own scale, a
  // weight that moves 2 % in a test's few steps would pass while never updated. An update
  // of zero must be matched exactly (else infinity).
  double relative() const {
    if (update == 0) return diff == 0 ? 0 : std::numeric_limits<double>::infinity();
    return diff / update;
  }
};

inline UpdateDiff CompareUpdates(const Tensor& a, const Tensor& b, const Tensor& initial) {
  const Tensor wa = ops::ToF32(a), wb = ops::ToF32(b), w0 = ops::ToF32(initial);
  UpdateDiff d;
  for (int64_t i = 0; i < wb.numel(); ++i) {
    const double va = wa.f32()[i], vb = wb.f32()[i];
    d.diff = std::max(d.diff, std::fabs(va - vb));
    d.update = std::max(d.update, std::fabs(vb - w0.f32()[i]));
    d.scale = std::max(d.scale, std::fabs(vb));
  }
  return d;
}

// Same dtype, shape and bytes.
inline bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Where a layout sums in another order (mp partial products, dp replicas), values differ
// by f32 rounding. Losses: within 1e-5 relative. Parameters: a step's gradient sums the
// rows of its micro-batches (8 x 2 x 16 = 256 in the GPT's test), and reassociating a sum
// of n terms moves it by up to about n rounding errors, so each update (from the initial
// value) may differ by 256 f32 epsilons of its size; the stored values, by 2 epsilons of
// their magnitude besides (a layer-norm scale near 1 that moves 5e-4 in 3 steps differs by
// one ulp). Measured on the GPT: updates within 4.3e-6 of their size (14 % of the bound),
// scales one ulp.
inline constexpr double kLossTolerance = 1e-5;
inline constexpr double kF32Epsilon = 0x1p-23;
inline constexpr double kUpdateEpsilons = 256;
inline constexpr double kValueEpsilons = 2;

// How a layout's training compares with the one-rank run: bit for bit where every sum
// keeps its order, else within the rounding stated above.
enum class Match { kBitIdentical, kWithinRounding };

inline void ExpectSameTraining(const Module& module, const ThreadRun& run,
                               const Module& base_module, const ThreadRun& base, Match match) {
  ASSERT_EQ(run.losses.size(), base.losses.size());
  for (size_t s = 0; s < base.losses.size(); ++s) {
    if (match == Match::kBitIdentical) {
      EXPECT_EQ(run.losses[s], base.losses[s]) << "step " << s;
    } else {
      EXPECT_NEAR(run.losses[s], base.losses[s], kLossTolerance * std::fabs(base.losses[s]))
          << "step " << s;
    }
  }
  std::map<std::string, Tensor> full = FullParams(module, run);
  std::map<std::string, Tensor> want = FullParams(base_module, base);
  const std::map<std::string, Tensor> initial = InitialParams(base_module);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(full.size(), want.size());
  for (const auto& [name, t] : want) {
    auto it = full.find(name);
    ASSERT_NE(it, full.end()) << name;
    ASSERT_EQ(it->second.shape(), t.shape()) << name;
    if (match == Match::kBitIdentical) {
      EXPECT_TRUE(SameBits(it->second, t)) << name;
      continue;
    }
    const UpdateDiff d = CompareUpdates(it->second, t, initial.at(name));
    EXPECT_LE(d.diff, kF32Epsilon * (kUpdateEpsilons * d.update + kValueEpsilons * d.scale))
        << name << ": updated by " << d.update << ", of magnitude " << d.scale;
  }
}

}  // namespace pw::testing
