#include "executor/rank_process.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <optional>
#include <thread>

#include "executor/backend_factory.h"
#include "executor/crc32c.h"
#include "executor/process_resources.h"
#include "executor/watchdog.h"
#include "ir/proto_io.h"
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

// What every rank of a run must agree on, as (name, value) pairs.
std::vector<std::pair<std::string, std::string>> RunTerms(const Module& module,
                                                          const RankProcessOptions& o) {
  auto text = SerializeModule(module, ModuleFormat::kText);  // text: map order is stable
  std::string plan = text.ok() ? Crc32cHex(Crc32c(0, text->data(), text->size())) : "unknown";
  return {{"world size", std::to_string(module.mesh.world_size())},
          {"plan", plan},
          {"steps", std::to_string(o.run.steps)},
          {"data seed", std::to_string(o.run.data.data_seed)},
          {"backend", std::string(BackendKindName(o.run.backend))}};
}

std::string JoinTerms(const std::vector<std::pair<std::string, std::string>>& terms) {
  std::string out;
  for (const auto& [name, value] : terms) out += StrCat(name, "=", value, "\n");
  return out;
}

// Publishes this rank's terms and compares them with every other rank's as they appear. A
// rank started with another world size, plan, step count or data seed would otherwise
// hang in a rendezvous or train something else; the first rank to see a difference
// publishes the abort notice naming both ranks, so every rank stops.
Status AgreeWithPeers(KvStore& kv, Watchdog& watchdog, const Module& module,
                      const RankProcessOptions& o, std::chrono::milliseconds timeout) {
  const int rank = o.run.rank, world = module.mesh.world_size();
  const auto mine = RunTerms(module, o);
  PW_RETURN_IF_ERROR(kv.Set(StrCat("terms/", rank), JoinTerms(mine)));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int p = 0; p < world; ++p) {
    if (p == rank) continue;
    std::optional<std::string> theirs;
    while (!theirs) {
      PW_ASSIGN_OR_RETURN(std::optional<std::string> notice, Watchdog::AbortNotice(kv));
      if (notice) return Aborted(*notice);
      PW_ASSIGN_OR_RETURN(theirs, kv.TryGet(StrCat("terms/", p)));
      if (theirs) break;
      if (std::chrono::steady_clock::now() > deadline)
        return Unavailable("rank ", p, " did not join the run in ", timeout.count() / 1000,
                           " s (store ", kv.Describe(), "): start every rank of the ", world,
                           " with the same --store");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (const auto& [name, value] : mine) {
      const std::string key = name + "=";
      size_t at = theirs->find(key);
      std::string other =
          at == std::string::npos
              ? "?"
              : theirs->substr(at + key.size(), theirs->find('\n', at) - at - key.size());
      if (other == value) continue;
      std::string what = StrCat("rank ", p, " was started with ", name, " ", other, " but rank ",
                                rank, " with ", value,
                                ": start every rank with the same module file, --pipeline, "
                                "--world-size, --steps and --seed");
      (void)watchdog.Abort(what);
      return FailedPrecondition(what);
    }
  }
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

  // The watchdog's own store (for Redis, its own connection), so that heartbeats never
  // wait behind rendezvous traffic; short command deadlines, so a stalled call is retried.
  StoreOptions watch_options;
  watch_options.command_timeout = std::chrono::seconds(5);
  auto watch_store = OpenStore(options.store, watch_options);
  if (!watch_store.ok()) {
    Say(options, "error", watch_store.status().message());
    return kExitRankFailed;
  }
  WatchdogOptions wd;
  wd.rank = rank;
  wd.world_size = world;
  wd.dead_after = options.dead_after;
  wd.watch_local_pids = options.dead_after.count() > 0;  // no launcher watches this rank
  wd.on_abort = [&options, rank](const std::string& reason) {
    // A notice naming this rank was written by a peer that lost sight of it.
    const bool about_me = reason.rfind(StrCat("rank ", rank, " "), 0) == 0;
    Say(options, "stopping", about_me ? StrCat("another rank gave this one up: ", reason) : reason);
    std::_Exit(kExitPeerFailed);  // streams may be blocked in communication: do not unwind
  };
  Watchdog watchdog(**watch_store, wd);

  if (world > 1) {
    if (Status agreed = AgreeWithPeers(kv, watchdog, module, options, std::chrono::seconds(120));
        !agreed.ok()) {
      if (agreed.code() == StatusCode::kAborted) {
        Say(options, "stopping", agreed.message());
        return kExitPeerFailed;
      }
      (void)watchdog.Abort(StrCat("rank ", rank, " failed: ", agreed.message()));
      Say(options, "error", agreed.message());
      return kExitRankFailed;
    }
  }

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
