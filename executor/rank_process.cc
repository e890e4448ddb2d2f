#include "executor/rank_process.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <optional>
#include <thread>

#include "executor/backend_factory.h"
#include "executor/process_resources.h"
#include "executor/watchdog.h"
#include "ops/kernel.h"

namespace pw {
namespace {

void Say(const RankProcessOptions& o, const std::string& what, const std::string& message) {
  std::fprintf(stderr, "%s: rank %d: %s: %s\n", o.log_prefix.c_str(), o.run.rank, what.c_str(),
               message.c_str());
  std::fflush(stderr);
}

// Waits for the abort notice a peer or the launcher publishes; nullopt after `timeout`.
std::optional<std::string> AwaitNotice(KvStore& store, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto notice = Watchdog::AbortNotice(store);
    if (notice.ok() && *notice) return **notice;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::nullopt;
}

// Gloo may throw on its own threads when a peer's connection drops, which ends in
// std::terminate. The rank then still stops the way every rank does: with the notice.
KvStore* g_store = nullptr;
const RankProcessOptions* g_options = nullptr;

[[noreturn]] void OnTerminate() {
  std::string what = "terminated";
  if (auto e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
  }
  if (g_store && g_options) {
    if (auto notice = AwaitNotice(*g_store, std::chrono::seconds(3))) {
      Say(*g_options, "stopping", *notice);
      std::_Exit(kExitPeerFailed);
    }
    Say(*g_options, "error", what);
  }
  std::_Exit(kExitRankFailed);
}

// A store belongs to one run. A rank started in the store of another run would read that
// run's abort notice, heartbeats and Gloo addresses, so it is refused before it writes
// anything there: an abort notice, or this rank's own entry, means the store is not new.
Status CheckStoreIsNew(KvStore& kv, int rank) {
  constexpr const char* kWhatToDo =
      "a store belongs to one run: start every rank on an empty store (clear it or pass "
      "another --store)";
  PW_ASSIGN_OR_RETURN(std::optional<std::string> notice, Watchdog::AbortNotice(kv));
  if (notice)
    return FailedPrecondition("store ", kv.Describe(), " holds the abort notice of a run ('",
                              *notice, "'); ", kWhatToDo);
  PW_ASSIGN_OR_RETURN(std::optional<std::string> owner, kv.TryGet(StrCat("pid/", rank)));
  if (owner)
    return FailedPrecondition("store ", kv.Describe(), " already has a rank ", rank,
                              " (host and pid: ", *owner, "), of this run or an earlier one; ",
                              kWhatToDo);
  return OkStatus();
}

}  // namespace

int RunRankProcess(const Module& module, const RankProcessOptions& options) {
  ops::SetKernelThreads(options.threads);
  KeepFreedMemory();
  // Gloo writes to sockets without MSG_NOSIGNAL in places: a dead peer must surface as an
  // error, not as SIGPIPE killing this rank.
  signal(SIGPIPE, SIG_IGN);
  const int rank = options.run.rank;
  const int world = module.mesh.world_size();
  auto store = OpenStore(options.store);
  if (!store.ok()) {
    Say(options, "error", store.status().message());
    return kExitRankFailed;
  }
  KvStore& kv = **store;
  if (Status fresh = CheckStoreIsNew(kv, rank); !fresh.ok()) {
    Say(options, "error", fresh.message());
    return kExitRankFailed;
  }
  g_store = &kv;
  g_options = &options;
  std::set_terminate(OnTerminate);
  (void)kv.Set(StrCat("pid/", rank), StrCat(Watchdog::HostName(), " ", getpid()));

  WatchdogOptions wd;
  wd.rank = rank;
  wd.world_size = world;
  wd.dead_after = options.dead_after;
  wd.watch_local_pids = options.dead_after.count() > 0;  // no launcher watches this rank
  wd.on_abort = [&options](const std::string& reason) {
    Say(options, "stopping", reason);
    std::_Exit(kExitPeerFailed);  // streams may be blocked in communication: do not unwind
  };
  Watchdog watchdog(kv, wd);

  std::unique_ptr<CommFactory> comm;
  Status status;
  if (world > 1) {
    auto factory = MakeCommFactory(options.run.backend, kv, module.mesh, rank, options.gloo);
    if (factory.ok())
      comm = std::move(*factory);
    else
      status = factory.status();
  }
  if (status.ok()) status = RunRank(module, comm.get(), options.run);

  if (status.ok()) {
    // Stay until every rank is done: a peer may still be reading what this rank sent.
    watchdog.Finish();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int p = 0; p < world && std::chrono::steady_clock::now() < deadline;) {
      auto notice = Watchdog::AbortNotice(kv);
      if (notice.ok() && *notice) {
        Say(options, "stopping", **notice);
        return kExitPeerFailed;
      }
      auto done = kv.TryGet(StrCat("done/", p));
      if (done.ok() && *done)
        ++p;
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  }
  if (status.code() == StatusCode::kUnavailable || status.code() == StatusCode::kAborted) {
    // Most likely a peer died; the launcher or the peer's watchdog names it.
    std::optional<std::string> notice = AwaitNotice(kv, std::chrono::seconds(3));
    // Across machines: a dead peer's heartbeat goes stale and a watchdog names it.
    if (!notice && options.dead_after.count() > 0)
      notice = AwaitNotice(kv, options.dead_after + std::chrono::seconds(5));
    if (notice) {
      Say(options, "stopping", *notice);
      std::_Exit(kExitPeerFailed);
    }
  }
  std::string notice = watchdog.Abort(StrCat("rank ", rank, " failed: ", status.message()));
  Say(options, "error", status.message());
  std::_Exit(kExitRankFailed);
}

}  // namespace pw
