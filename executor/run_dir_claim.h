#pragma once
// A run directory belongs to one run at a time. Claiming it takes an exclusive lock on
// DIR/lock (held until the claim is dropped, released by the kernel if the process dies)
// and, only then, removes the store a previous run left there: its abort notice, ports and
// heartbeats would mislead the new ranks. A second run on the same directory is refused at
// once, naming the process that holds it.

#include <string>

#include "ir/status.h"

namespace pw {

class RunDirClaim {
 public:
  // Creates `dir` when missing; refuses a path that is a file.
  static StatusOr<RunDirClaim> Claim(const std::string& dir);

  RunDirClaim(RunDirClaim&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  RunDirClaim& operator=(RunDirClaim&&) = delete;
  RunDirClaim(const RunDirClaim&) = delete;
  ~RunDirClaim();

 private:
  explicit RunDirClaim(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace pw
