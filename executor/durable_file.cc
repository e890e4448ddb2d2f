#include "executor/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace pw {

Status WriteFileDurably(const std::string& path, const std::string& contents) {
  const std::string tmp = StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("cannot write ", tmp, ": ", std::strerror(errno));
  const char* p = contents.data();
  size_t left = contents.size();
  bool ok = true;
  while (ok && left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) {
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  ok = ok && ::fsync(fd) == 0;
  int err = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) err = errno;
    std::remove(tmp.c_str());
    return Unavailable("cannot write ", path, ": ", std::strerror(err));
  }
  return OkStatus();
}

Status SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Unavailable("cannot open folder ", dir, ": ", std::strerror(errno));
  bool ok = ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  if (!ok) return Unavailable("cannot sync folder ", dir, ": ", std::strerror(err));
  return OkStatus();
}

}  // namespace pw
