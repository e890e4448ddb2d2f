// overlap-grad-reduce: a data-parallel plan's gradient all-reduces start during the
// backward. Each gradient sum joins a bucket as soon as the rank has accumulated its last
// micro-batch; a full bucket is all-reduced over the dp group on the dp_comm stream as one
// collective, so the reductions of the later layers run under the backward of the earlier
// ones instead of all after it. Small buckets start sooner; large ones pay the collective's
// fixed latency fewer times: bucket-mb=auto prices each size with the simulator and keeps
// the fastest. Nothing else moves and every element is summed in member order wherever it
// lies in a bucket: bit-identical training.

#include <cmath>
#include <set>
#include <vector>

#include "ir/grad_reduce.h"
#include "ir/rank_sequence.h"
#include "passes/pass.h"
#include "passes/pass_registry.h"
#include "passes/streams/fastest_variant.h"
#include "simulator/simulator.h"

namespace pw {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
// Without a cost model: PyTorch DDP's default bucket_cap_mb.
constexpr int64_t kDefaultBucketBytes = 25 * kMiB;
// The sizes bucket-mb=auto prices (0: every sum alone).
constexpr int64_t kCandidateMiB[] = {0, 1, 4, 16, 64, 256};

// The bytes of the gradients of every parameter: no bucket of a rank holds more.
int64_t AllGradientBytes(const Module& module) {
  std::set<std::string> seen;
  int64_t bytes = 0;
  for (const Program& program : module.programs())
    for (const Op& op : program.ops())
      op.ForEachOutput([&](const std::string& v) {
        const Var* grad =
            ParamGradDecl(v, [&](const std::string& n) { return module.FindVar(n, &program); });
        if (grad && seen.insert(v).second) bytes += grad->num_bytes();
      });
  return bytes;
}

class OverlapGradReducePass : public Pass {
 public:
  std::string_view name() const override { return "overlap-grad-reduce"; }
  std::string_view description() const override {
    return "On a planned module with dp > 1: each gradient sum's all-reduce over dp runs on "
           "the dp_comm stream as soon as the rank has accumulated the gradient's last "
           "micro-batch (under the rest of the backward) instead of at the step's end before "
           "the optimizer, in buckets of bucket-mb MiB (one collective each; 0: each sum "
           "alone; auto: the size the simulator finds fastest with --device, else 25). The "
           "scale by 1/(micro-batches x dp) stays before the optimizer. Bit-identical; "
           "changes nothing at dp 1.";
  }

  StatusOr<bool> Run(Module& module, PassContext& context) override {
    if (module.plan.empty())
      return FailedPrecondition(
          "overlap-grad-reduce needs a plan: run it after split-program and schedule");
    if (module.mesh.dp < 2) return false;
    for (const Program& program : module.programs())
      if (program.info().kind == "optimizer" && HasOwnDpAllReduce(program))
        return FailedPrecondition(
            "overlap-grad-reduce moves the executor's dp all-reduces into the backward, but "
            "program '",
            program.name(),
            "' reduces its gradients over dp itself (amp{grad-allreduce=low}): use "
            "amp{grad-accumulation=low} (16-bit sums the executor reduces) or the f32 "
            "reduction");
    PW_ASSIGN_OR_RETURN(int64_t bucket, BucketBytes(module, context));
    if (module.metadata.GetString(kMetaGradReduce) == kGradReduceInBackward &&
        module.metadata.GetInt(kMetaGradBucketBytes, 0) == bucket)
      return false;
    Mark(module, bucket);
    context.AddStatistic("dp-reductions-in-backward");
    context.AddStatistic("bucket-kib", bucket / 1024);
    return true;
  }

 private:
  Option<std::string> bucket_mb{
      this, "bucket-mb",
      "MiB of gradient sums per all-reduce (a number >= 0; 0: each sum alone), or auto", "auto"};

  static void Mark(Module& module, int64_t bucket) {
    module.metadata.Set(kMetaGradReduce, std::string(kGradReduceInBackward));
    module.metadata.Set(kMetaGradBucketBytes, bucket);
  }

  StatusOr<int64_t> BucketBytes(const Module& module, PassContext& context) {
    const std::string text = bucket_mb.value();
    if (text != "auto") {
      char* end = nullptr;
      const double mb = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(mb) || mb < 0)
        return InvalidArgument(
            "overlap-grad-reduce: bucket-mb must be auto or a number of MiB >= 0, got '", text,
            "'");
      return static_cast<int64_t>(std::llround(mb * static_cast<double>(kMiB)));
    }
    const cost::Simulator* simulator = context.Find<cost::Simulator>();
    if (simulator == nullptr) return kDefaultBucketBytes;
    // Sizes past every gradient's bytes are one bucket alike: the first of them ends the list.
    const int64_t all = AllGradientBytes(module);
    std::vector<int64_t> sizes;
    for (int64_t mib : kCandidateMiB) {
      sizes.push_back(mib * kMiB);
      if (sizes.back() >= all) break;
    }
    // Of equal times the first: the smallest size, whose first bucket starts soonest.
    StatusOr<size_t> best = FastestVariant(module, *simulator, sizes.size(),
                                           [&](Module& trial, size_t i) { Mark(trial, sizes[i]); });
    if (!best.ok())
      return best.status().WithContext(
          "overlap-grad-reduce{bucket-mb=auto} prices bucket sizes with the simulator (give "
          "bucket-mb=N to choose without it)");
    context.AddStatistic("bucket-sizes-priced", static_cast<int64_t>(sizes.size()));
    return sizes[*best];
  }
};

}  // namespace

PW_REGISTER_PASS(OverlapGradReducePass)

}  // namespace pw
