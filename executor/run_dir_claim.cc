#include "executor/run_dir_claim.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace pw {

StatusOr<RunDirClaim> RunDirClaim::Claim(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    return InvalidArgument("run directory ", dir, " cannot be created or is not a folder");
  const std::string lock = (fs::path(dir) / "lock").string();
  int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("cannot open ", lock, ": ", std::strerror(errno));
  RunDirClaim claim(fd);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    ssize_t n = pread(fd, holder, sizeof(holder) - 1, 0);
    std::string pid = n > 0 ? std::string(holder, static_cast<size_t>(n)) : "another process";
    return FailedPrecondition("run directory ", dir, " is in use by another run (pid ", pid,
                              "); wait for it or pick another --run-dir");
  }
  std::string me = std::to_string(getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, me.data(), me.size(), 0) < 0)
    return Internal("cannot write ", lock, ": ", std::strerror(errno));
  fs::remove_all(fs::path(dir) / "store", ec);
  if (ec) return Internal("cannot clear the old store in ", dir, ": ", ec.message());
  return claim;
}

RunDirClaim::~RunDirClaim() {
  if (fd_ >= 0) close(fd_);  // closing releases the lock
}

}  // namespace pw
