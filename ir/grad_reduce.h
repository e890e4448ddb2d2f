#pragma once
// When a data-parallel plan all-reduces its gradient sums over dp. By default each sum is
// all-reduced at the step's end, before the optimizer job that reads it. The
// overlap-grad-reduce pass records kGradReduceInBackward in the module's metadata: each
// sum is then all-reduced on the dp_comm stream as soon as its last micro-batch has been
// accumulated, under the rest of the backward (ir/rank_sequence.h). The same all-reduce
// of the same sum: training is bit-identical either way.

namespace pw {

class Program;

// Whether an optimizer program reduces every gradient over dp itself (amp's
// grad-allreduce=low: a cast, then an all-reduce of the low-precision copy, or its
// reduce-scatter where the distributed optimizer shards the update), so the executor reduces
// none, in the backward or after it. A reduce-scatter of a sum the executor hands the program
// is the distributed optimizer's own: the executor still reduces the other sums.
bool HasOwnDpAllReduce(const Program& optimizer);

// With the reduction in the backward, the sums travel in buckets: each complete sum joins
// the open bucket, which is all-reduced as one collective (c_allreduce_coalesced) once it
// holds at least this many bytes or the rank's last sum is complete. Absent or 0: every
// sum alone. Chosen by overlap-grad-reduce{bucket-mb}.
inline constexpr const char* kMetaGradBucketBytes = "grad_bucket_bytes";
inline constexpr const char* kMetaGradReduce = "grad_reduce";
inline constexpr const char* kGradReduceInBackward = "backward";

// With the distributed optimizer, each sharded parameter is all-gathered over dp right
// after its update by default. overlap-param-gather records kMetaParamGather: the
// all-gathers of parameters no job of the step reads whole (amp's f32 masters: the update
// reads only this rank's rows) then wait until the parameters are synced between steps
// (the executor's SyncParameters, before saving or reading them); the others run right
// after their update (kParamGatherAfterUpdate) or at the start of the next step
// (kParamGatherNextStep: c_sync_shards on dp_comm, in the order the step first reads the
// parameters, under its forward: Megatron's overlap_param_gather).
inline constexpr const char* kMetaParamGather = "param_gather";
inline constexpr const char* kParamGatherNextStep = "next_step";
inline constexpr const char* kParamGatherAfterUpdate = "after_update";

}  // namespace pw
