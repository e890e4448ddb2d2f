#include "ops/kernels/cuda/launch.h"

namespace pw::ops::cuda {
namespace {
thread_local LaunchContext current;
}  // namespace

const LaunchContext& CurrentLaunch() { return current; }

// Restores the previous context, so nested scopes (a kernel calling a communicator that
// sets its own) unwind correctly.
ScopedLaunch::ScopedLaunch(const LaunchContext& context) : saved_(current) { current = context; }
ScopedLaunch::~ScopedLaunch() { current = saved_; }

}  // namespace pw::ops::cuda
