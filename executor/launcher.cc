#include "executor/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "executor/comm/kv_store.h"
#include "executor/rank_process.h"
#include "executor/watchdog.h"

extern char** environ;

namespace pw {
namespace {

struct Child {
  pid_t pid = -1;
  int report_fd = -1;   // read end
  std::string pending;  // a partial report line
  bool exited = false;
  bool killed = false;  // by the launcher, after another rank failed
};

std::string Describe(int rank, int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return StrCat("rank ", rank, " was killed by signal ", sig, " (", strsignal(sig), ")");
  }
  return StrCat("rank ", rank, " exited with code ", WEXITSTATUS(status));
}

// Reads what is available; calls on_report per complete line.
void Drain(int rank, Child& c, const LaunchOptions& o) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(c.report_fd, buf, sizeof(buf));
    if (n <= 0) return;
    c.pending.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = c.pending.find('\n')) != std::string::npos) {
      if (o.on_report) o.on_report(rank, c.pending.substr(0, nl));
      c.pending.erase(0, nl + 1);
    }
  }
}

}  // namespace

StatusOr<LaunchResult> LaunchRanks(const LaunchOptions& options) {
  namespace fs = std::filesystem;
  if (options.nproc < 1) return InvalidArgument("--nproc must be >= 1, got ", options.nproc);
  std::string store_dir =
      options.store.empty() ? (fs::path(options.run_dir) / "store").string() : options.store;
  PW_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> store, OpenStore(store_dir));

  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  for (const std::string& e : options.env) env.push_back(e);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  const pid_t launcher = getpid();
  std::vector<Child> children(options.nproc);
  LaunchResult result;
  result.exit_codes.assign(options.nproc, -1);
  for (int rank = 0; rank < options.nproc; ++rank) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return Internal("pipe: ", std::strerror(errno));
    std::vector<std::string> args;
    for (std::string a : options.rank_prefix) {
      for (const auto& [key, value] :
           {std::pair<std::string, std::string>{"{rank}", std::to_string(rank)},
            {"{host}", std::to_string(rank + 1)}})
        for (size_t at; (at = a.find(key)) != std::string::npos;) a.replace(at, key.size(), value);
      args.push_back(a);
    }
    args.push_back(options.executable == "/proc/self/exe" && !options.rank_prefix.empty()
                       ? fs::read_symlink("/proc/self/exe").string()  // the prefix's own
                       : options.executable);
    args.insert(args.end(), options.args.begin(), options.args.end());
    for (const std::string& a :
         {std::string("--rank"), std::to_string(rank), std::string("--world-size"),
          std::to_string(options.nproc), std::string("--store"), store_dir,
          std::string("--report-fd"), std::to_string(fds[1])})
      args.push_back(a);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    pid_t pid = fork();
    if (pid < 0) return Internal("fork: ", std::strerror(errno));
    if (pid == 0) {
      // Only async-signal-safe calls until exec.
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // the launcher's death takes the ranks with it
      if (getppid() != launcher) _exit(kExitPeerFailed);
      fcntl(fds[1], F_SETFD, 0);                   // the report pipe survives exec
      execvpe(argv[0], argv.data(), envp.data());  // a prefix is looked up in PATH
      _exit(127);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    children[rank].pid = pid;
    children[rank].report_fd = fds[0];
    if (options.on_start) options.on_start(rank, pid);
  }

  int alive = options.nproc;
  std::chrono::steady_clock::time_point kill_at{};
  bool killing = false;
  while (alive > 0) {
    std::vector<pollfd> fds;
    for (const Child& c : children) fds.push_back(pollfd{c.report_fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    for (int rank = 0; rank < options.nproc; ++rank) Drain(rank, children[rank], options);

    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (int rank = 0; rank < options.nproc; ++rank) {
        Child& c = children[rank];
        if (c.pid != pid) continue;
        c.exited = true;
        --alive;
        result.exit_codes[rank] =
            WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
        if (!failed) continue;
        // A rank the launcher killed itself (left over after a failure, e.g. one stopped
        // with SIGSTOP that the peers' watchdogs named) is not the cause.
        bool primary = !c.killed && !(WIFEXITED(status) && WEXITSTATUS(status) == kExitPeerFailed);
        if (result.ok || (primary && result.failure.empty())) {
          result.ok = false;
          if (primary) {
            result.failure = Describe(rank, status);
            (void)Watchdog::PublishAbort(*store, result.failure);
          }
          if (!killing) kill_at = std::chrono::steady_clock::now() + options.grace;
          killing = true;
        }
      }
    }
    if (killing && alive > 0 && std::chrono::steady_clock::now() > kill_at) {
      for (Child& c : children)
        if (!c.exited) {
          kill(c.pid, SIGKILL);
          c.killed = true;
        }
    }
  }
  for (int rank = 0; rank < options.nproc; ++rank) {
    Drain(rank, children[rank], options);
    close(children[rank].report_fd);
  }
  if (!result.ok && result.failure.empty()) {
    auto notice = Watchdog::AbortNotice(*store);
    result.failure = notice.ok() && *notice ? **notice : "a rank stopped because another failed";
  }
  return result;
}

}  // namespace pw
