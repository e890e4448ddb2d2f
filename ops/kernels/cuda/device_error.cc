#include "ops/kernels/cuda/device_error.h"

#include "ir/status.h"

namespace pw::ops::cuda {

// The same wording as the CPU kernels' errors.
std::string DescribeDeviceError(const DeviceError& e) {
  switch (e.code) {
    case kNoDeviceError:
      return "";
    case kEmbeddingIdOutOfRange:
    case kEmbeddingGradIdOutOfRange:
      return StrCat(e.code == kEmbeddingIdOutOfRange ? "embedding" : "embedding_grad", ": Ids[",
                    e.index, "] = ", e.value, " is out of range [0, ", e.bound, ")");
    case kLabelOutOfRange:
    case kLabelGradOutOfRange:
      return StrCat(
          e.code == kLabelOutOfRange ? "softmax_cross_entropy" : "softmax_cross_entropy_grad",
          ": Label[", e.index, "] = ", e.value, " is out of range [0, ", e.bound,
          ") and is not ignore_index ", e.extra);
    case kCEmbeddingIdOutOfRange:
    case kCEmbeddingGradIdOutOfRange:
      return StrCat(e.code == kCEmbeddingIdOutOfRange ? "c_embedding" : "c_embedding_grad",
                    ": Ids[", e.index, "] = ", e.value, " is out of range [0, ", e.bound, ")");
    case kVocabLabelOutOfRange:
      return StrCat("c_softmax_stats: Label[", e.index, "] = ", e.value, " is out of range [0, ",
                    e.bound, ")");
    case kAdamBetaPowNotBelowOne:
      return StrCat("adam: Beta1Pow ", e.x, " and Beta2Pow ", e.y,
                    " must be < 1 (initialise them to beta1 and beta2)");
  }
  return StrCat("device check ", e.code, " failed");
}

}  // namespace pw::ops::cuda
