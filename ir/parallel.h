#pragma once
// Independent pieces of work on the machine's cores. Planning a large schedule splits into
// pieces that read the same input and write only their own results (one rank's lowering,
// the structure check beside the replay). Starting a thread costs tens of microseconds,
// so small inputs run on the calling thread. PW_THREADS=N caps the threads (1: none).

#include <cstddef>
#include <functional>

namespace pw {

// Caps the threads at `n` from now on (1: everything on the calling thread); 0 goes back
// to the machine's cores, or PW_THREADS when set.
void SetMaxThreads(size_t n);

// Runs `first` on the calling thread and `second` beside it when `work` elementary steps
// (about one action each) pay for a thread, else one after the other. Returns when both are done.
void RunConcurrently(size_t work, const std::function<void()>& first,
                     const std::function<void()>& second);

// Calls fn(begin, end) on contiguous ranges that cover [0, n), one range per core when
// `work` is worth it, else fn(0, n) on the calling thread.
void ParallelFor(size_t n, size_t work, const std::function<void(size_t, size_t)>& fn);

}  // namespace pw
