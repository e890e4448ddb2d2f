#pragma once
// A check that failed inside a kernel: an id or label out of range, Adam state that
// cannot be bias-corrected. The CPU kernels return these as errors before writing; on the
// device the first failure of a step is kept in a small record (one per stream) and turned
// into the same message when the stream is synchronized. Plain C++ on both sides of nvcc.

#include <string>

namespace pw::ops::cuda {

enum DeviceErrorCode : int {
  kNoDeviceError = 0,
  kEmbeddingIdOutOfRange,
  kEmbeddingGradIdOutOfRange,
  kLabelOutOfRange,
  kLabelGradOutOfRange,
  kAdamBetaPowNotBelowOne,
  kCEmbeddingIdOutOfRange,
  kCEmbeddingGradIdOutOfRange,
  kVocabLabelOutOfRange,
};

struct DeviceError {
  int code;  // DeviceErrorCode; the first report of a step wins
  int site;  // LaunchContext::site of the launch that reported
  long long index, value, bound, extra;
  double x, y;
};

// "embedding: Ids[3] = 999 is out of range [0, 128)"; empty for kNoDeviceError.
std::string DescribeDeviceError(const DeviceError& error);

}  // namespace pw::ops::cuda
