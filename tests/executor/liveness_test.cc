// The pieces that keep a multi-machine run alive on a slow link and stop it when a rank is
// gone: the Redis store (keys overwritten, connections named and listed, a store that
// cannot be reached refused in one line) and the watchdog (a beating peer is never
// declared dead, a closed connection names a gone peer, a silent one is named after
// dead_after, and this rank's own blind spell is not blamed on a peer).

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "executor/comm/kv_store.h"
#include "executor/watchdog.h"
#include "tests/redis_server.h"

namespace pw {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using ::pw::testing::RedisServer;

class LivenessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { redis_ = new RedisServer(/*base_port=*/21000); }
  static void TearDownTestSuite() { delete redis_; }
  void SetUp() override {
    if (!redis_->running())
      GTEST_SKIP() << "redis-server is not installed (scripts/install-deps.sh installs it)";
  }
  static RedisServer* redis_;
};
RedisServer* LivenessTest::redis_ = nullptr;

// The heartbeat of every second rewrites one key: a store that refuses to overwrite (as
// an add-only rendezvous store does) froze every heartbeat at its first value.
TEST_F(LivenessTest, RedisStoreOverwritesKeys) {
  auto store = OpenStore(redis_->Spec("overwrite"));
  ASSERT_TRUE(store.ok()) << store.status().message();
  ASSERT_TRUE((*store)->Set("heartbeat/0", "1").ok());
  ASSERT_TRUE((*store)->Set("heartbeat/0", "2").ok());
  auto value = (*store)->TryGet("heartbeat/0");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value->value_or("<missing>"), "2");
  auto missing = (*store)->TryGet("absent");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  // Binary values survive (Gloo's addresses are bytes).
  const std::string bytes("a\0b\r\nc", 6);
  ASSERT_TRUE((*store)->Set("bytes", bytes).ok());
  EXPECT_EQ((*store)->TryGet("bytes")->value_or(""), bytes);
}

// The abort notice: of ranks that publish at once, one notice stands and every rank prints it.
void ExpectOneWriterWins(const std::string& spec) {
  constexpr int kWriters = 8;
  std::vector<std::unique_ptr<KvStore>> stores;
  for (int i = 0; i < kWriters; ++i) stores.push_back(OpenStore(spec).value());
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWriters; ++i)
    threads.emplace_back([&, i] {
      auto set = stores[i]->SetIfAbsent("abort", StrCat("notice ", i));
      if (set.ok() && *set) ++winners;
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1) << spec;
  auto value = stores[0]->TryGet("abort");
  ASSERT_TRUE(value.ok() && value->has_value());
  EXPECT_THAT(**value, StartsWith("notice "));
}

TEST_F(LivenessTest, OneOfSeveralWritersSetsAKey) {
  ExpectOneWriterWins(redis_->Spec("first"));
  const auto dir = std::filesystem::temp_directory_path() / StrCat("pw_liveness_", getpid());
  std::filesystem::remove_all(dir);
  ExpectOneWriterWins(dir.string());
  std::filesystem::remove_all(dir);
}

TEST_F(LivenessTest, RedisStoreListsNamedConnections) {
  auto watcher = OpenStore(redis_->Spec("names"));
  ASSERT_TRUE(watcher.ok());
  {
    auto peer = OpenStore(redis_->Spec("names"));
    ASSERT_TRUE(peer.ok());
    ASSERT_TRUE((*peer)->NameConnection("watchdog/1").ok());
    auto names = (*watcher)->ConnectedNames();
    ASSERT_TRUE(names.ok()) << names.status().message();
    ASSERT_TRUE(names->has_value());
    EXPECT_EQ((*names)->count("watchdog/1"), 1u);
  }
  // Closed with the store; another run's prefix is not listed.
  auto other = OpenStore(redis_->Spec("other"));
  ASSERT_TRUE((*other)->NameConnection("watchdog/1").ok());
  for (int i = 0; i < 50; ++i) {
    auto names = (*watcher)->ConnectedNames();
    ASSERT_TRUE(names.ok());
    if ((*names)->count("watchdog/1") == 0) return;
    std::this_thread::sleep_for(20ms);
  }
  ADD_FAILURE() << "a closed connection is still listed";
}

TEST_F(LivenessTest, UnreachableStoreIsOneLineAndQuick) {
  auto start = Clock::now();
  auto store = OpenStore("redis://127.0.0.1:1/x");  // nothing listens on port 1
  EXPECT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), StartsWith("cannot reach the redis store at 127.0.0.1:1"));
  EXPECT_EQ(store.status().message().find('\n'), std::string::npos);
  EXPECT_LT(Clock::now() - start, 5s);
}

// A peer's heartbeat from a thread of its own, on its own named connection.
class FakePeer {
 public:
  FakePeer(const std::string& spec, int rank) {
    store_ = OpenStore(spec).value();
    (void)store_->NameConnection(Watchdog::ConnectionName(rank));
    thread_ = std::thread([this, rank] {
      for (int beat = 1; !stop_; ++beat) {
        if (!paused_) (void)store_->Set(StrCat("heartbeat/", rank), std::to_string(beat));
        std::this_thread::sleep_for(100ms);
      }
    });
  }
  ~FakePeer() { Close(); }
  void Pause(bool paused) { paused_ = paused; }
  void Close() {  // as a process that exits: the thread stops, the connection closes
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    store_.reset();
  }

 private:
  std::unique_ptr<KvStore> store_;
  std::atomic<bool> stop_{false}, paused_{false};
  std::thread thread_;
};

struct Fired {
  std::mutex mu;
  std::string reason;
  Clock::time_point at;
  std::string Get() {
    std::lock_guard<std::mutex> lock(mu);
    return reason;
  }
};

WatchdogOptions FastOptions(Fired& fired) {
  WatchdogOptions o;
  o.rank = 0;
  o.world_size = 2;
  o.poll = 50ms;
  o.heartbeat = 100ms;
  o.dead_after = 1s;
  o.blind_after = 500ms;
  o.gone_after = 300ms;
  o.on_abort = [&fired](const std::string& reason) {
    std::lock_guard<std::mutex> lock(fired.mu);
    fired.reason = reason;
    fired.at = Clock::now();
  };
  return o;
}

TEST_F(LivenessTest, BeatingPeerOutlivesDeadAfter) {
  const std::string spec = redis_->Spec("beating");
  FakePeer peer(spec, 1);
  auto store = OpenStore(spec);
  Fired fired;
  Watchdog watchdog(**store, FastOptions(fired));
  std::this_thread::sleep_for(3s);  // three times dead_after
  EXPECT_EQ(fired.Get(), "");
}

TEST_F(LivenessTest, ClosedConnectionNamesAGonePeerQuickly) {
  const std::string spec = redis_->Spec("gone");
  FakePeer peer(spec, 1);
  auto store = OpenStore(spec);
  Fired fired;
  Watchdog watchdog(**store, FastOptions(fired));
  std::this_thread::sleep_for(500ms);
  auto closed = Clock::now();
  peer.Close();
  while (fired.Get().empty() && Clock::now() - closed < 5s) std::this_thread::sleep_for(20ms);
  EXPECT_THAT(fired.Get(), StartsWith("rank 1 died (its connection to the store closed"));
  EXPECT_THAT(fired.Get(), HasSubstr("noticed by rank 0"));
  // gone_after (0.3 s) and a heartbeat round, well before dead_after (1 s).
  EXPECT_LT(fired.at - closed, 900ms);
}

TEST_F(LivenessTest, SilentConnectedPeerIsNamedAfterDeadAfter) {
  const std::string spec = redis_->Spec("silent");
  FakePeer peer(spec, 1);
  auto store = OpenStore(spec);
  Fired fired;
  Watchdog watchdog(**store, FastOptions(fired));
  std::this_thread::sleep_for(500ms);
  auto paused = Clock::now();
  peer.Pause(true);  // as SIGSTOP: the connection stays open
  while (fired.Get().empty() && Clock::now() - paused < 5s) std::this_thread::sleep_for(20ms);
  EXPECT_THAT(fired.Get(), StartsWith("rank 1 stopped responding (no heartbeat for 1 s"));
  EXPECT_GT(fired.at - paused, 900ms);
  EXPECT_LT(fired.at - paused, 2500ms);
}

// A store whose calls stall while `stalled` is set: this rank's own link congested.
class StallingStore final : public KvStore {
 public:
  explicit StallingStore(std::unique_ptr<KvStore> inner) : inner_(std::move(inner)) {}
  Status Set(const std::string& key, const std::string& value) override {
    Stall();
    return inner_->Set(key, value);
  }
  StatusOr<std::optional<std::string>> TryGet(const std::string& key) override {
    Stall();
    return inner_->TryGet(key);
  }
  std::string Describe() const override { return inner_->Describe(); }
  std::atomic<bool> stalled{false};

 private:
  void Stall() {
    while (stalled) std::this_thread::sleep_for(10ms);
  }
  std::unique_ptr<KvStore> inner_;
};

// The peer falls silent 0.3 s before this rank loses the store for 2 s (a link they share
// is congested) and beats again 0.3 s after this rank can read again: 0.6 s of silence
// that this rank could see, under dead_after; the rest was this rank's own blind spell.
TEST_F(LivenessTest, OwnBlindSpellIsNotBlamedOnAPeer) {
  const std::string spec = redis_->Spec("blind");
  FakePeer peer(spec, 1);
  StallingStore store(OpenStore(spec).value());
  Fired fired;
  Watchdog watchdog(store, FastOptions(fired));
  std::this_thread::sleep_for(500ms);
  peer.Pause(true);
  std::this_thread::sleep_for(300ms);  // this rank reads the peer's last beat
  store.stalled = true;
  std::this_thread::sleep_for(2s);
  store.stalled = false;
  std::this_thread::sleep_for(300ms);
  peer.Pause(false);
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(fired.Get(), "");
}

}  // namespace
}  // namespace pw
