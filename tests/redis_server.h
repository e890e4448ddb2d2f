#pragma once
// A redis-server on loopback for a test's lifetime: started on a port of its own, dying with
// the test process on every exit path (the kernel signals it when its parent goes, so a test
// killed mid-run leaves no server behind), stopped by the destructor otherwise. running() is
// false where redis-server is not installed (scripts/install-deps.sh installs it).

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "ir/status.h"

namespace pw::testing {

class RedisServer {
 public:
  // `base_port` keeps servers of different test binaries apart; the process id spreads
  // concurrent runs of one binary.
  explicit RedisServer(int base_port) {
    if (std::system("command -v redis-server > /dev/null 2>&1") != 0) return;
    // A port another process holds makes the server exit at once: try the next ones.
    for (int attempt = 0; attempt < 8; ++attempt) {
      port_ = base_port + (getpid() + 1237 * attempt) % 20000;
      if (Start()) return;
    }
    pid_ = -1;
  }
  ~RedisServer() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  // A store spec for one test: its own key prefix.
  std::string Spec(const std::string& prefix) const {
    return StrCat("redis://127.0.0.1:", port_, "/", prefix, getpid());
  }

 private:
  bool Accepting() const {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    return ok;
  }

  // Starts redis-server on port_: true once it accepts, false when it exited first (or
  // never accepted within 5 s, when it is stopped).
  bool Start() {
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(0);  // the parent went before the signal was armed
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      dup2(devnull, 2);
      execlp("redis-server", "redis-server", "--port", std::to_string(port_).c_str(), "--bind",
             "127.0.0.1", "--save", "", "--appendonly", "no", static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return false;  // exited: port taken
      if (Accepting()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    return false;
  }

  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace pw::testing
