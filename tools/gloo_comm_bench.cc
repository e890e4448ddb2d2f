#include "tools/gloo_comm_bench.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <tuple>

#include "executor/comm/gloo_comm.h"
#include "executor/comm/kv_store.h"
#include "executor/launcher.h"
#include "ir/rank_layout.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace pw::tools {
namespace {

double Clock(clockid_t id) {
  timespec t;
  clock_gettime(id, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
// One clock for every process of the machine, so ranks' times compare.
double Now() { return Clock(CLOCK_MONOTONIC); }

double ProcessCpu() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Computes for `seconds` of this thread's CPU time (as a kernel would, however long other
// threads keep it off the core); returns the CPU time spent.
double Burn(double seconds) {
  if (seconds <= 0) return 0;
  const double start = Clock(CLOCK_THREAD_CPUTIME_ID);
  volatile double x = 1.0;
  double now = start;
  while (now - start < seconds) {
    for (int i = 0; i < 256; ++i) x = x * 1.0000001 + 1e-9;
    now = Clock(CLOCK_THREAD_CPUTIME_ID);
  }
  return now - start;
}

Mesh MeshFor(cost::CommKind kind, int group_size, int ranks) {
  Mesh mesh;
  if (kind == cost::CommKind::kAllReduce) {
    mesh.mp = group_size;
    mesh.dp = std::max(1, ranks / group_size);
  } else {
    mesh.pp = 2;
    mesh.mp = std::max(1, ranks / 2);
  }
  return mesh;
}

std::string JoinSizes(const std::vector<int64_t>& sizes) {
  std::string out;
  for (int64_t s : sizes) out += (out.empty() ? "" : ",") + std::to_string(s);
  return out;
}

StatusOr<std::vector<int64_t>> ParseSizes(const std::string& text) {
  std::vector<int64_t> sizes;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 4)
      return InvalidArgument("flag --sizes: '", item, "' is not a size in bytes (>= 4)");
    sizes.push_back(v);
  }
  if (sizes.empty()) return InvalidArgument("flag --sizes: no sizes");
  return sizes;
}

// ---- One rank process ----

struct RankJob {
  cost::CommKind kind;
  Mesh mesh;
  int rank;
  std::vector<int64_t> sizes;
  double gap;
  int warmup;
  int repeats;     // rounds at least
  double seconds;  // and more until the measured rounds took this long
  int report_fd;
};

// Enough rounds to last through a few changes of the machine's load, not forever.
constexpr int kMaxRounds = 400;

void Report(int fd, const std::string& line) {
  std::string l = line + "\n";
  (void)!write(fd, l.data(), l.size());
}

std::string Fmt(double t) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9f", t);
  return buf;
}

// Every line: "a SIZE ROUND ARRIVED DONE" (all-reduce), "s SIZE ROUND DIR POSTED" and
// "r SIZE ROUND DIR POSTED DONE" (transfers; DIR 0 goes from the first stage to the second),
// and last "c PROCESS_CPU BURN_CPU OPS".
Status RunRankJob(const RankJob& job, CommFactory& factory) {
  const RankLayout layout(job.mesh);
  std::vector<Tensor> buffers;
  for (int64_t s : job.sizes)
    buffers.emplace_back(DataType::kFloat32, Shape{std::max<int64_t>(1, s / 4)});
  double burned = 0;
  int ops = 0;
  double cpu0 = 0;
  if (job.kind == cost::CommKind::kAllReduce) {
    PW_ASSIGN_OR_RETURN(std::unique_ptr<StreamComm> comm, factory.Create(StreamType::kMpComm));
    float token = 0;
    PW_RETURN_IF_ERROR(comm->AllReduceSum("mp", &token, 1));  // connects the group
    cpu0 = ProcessCpu();
    const double start = Now();
    const bool leader = layout.Coord(job.rank).mp == 0;
    for (int i = 0;; ++i) {
      for (size_t k = 0; k < job.sizes.size(); ++k) {
        burned += Burn(job.gap);
        const double arrived = Now();
        PW_RETURN_IF_ERROR(comm->AllReduceSum("mp", buffers[k].f32(), buffers[k].numel()));
        const double done = Now();
        ++ops;
        if (i >= job.warmup)
          Report(job.report_fd, StrCat("a ", k, " ", i, " ", Fmt(arrived), " ", Fmt(done)));
      }
      if (i + 1 < job.warmup + job.repeats) continue;
      // The group's first rank decides when to stop, and the group stops together.
      float stop = leader && (Now() - start >= job.seconds || i + 1 >= kMaxRounds) ? 1 : 0;
      PW_RETURN_IF_ERROR(comm->AllReduceSum("mp", &stop, 1));
      if (stop > 0) break;
    }
  } else {
    PW_ASSIGN_OR_RETURN(std::unique_ptr<StreamComm> send, factory.Create(StreamType::kPpSend));
    PW_ASSIGN_OR_RETURN(std::unique_ptr<StreamComm> recv, factory.Create(StreamType::kPpRecv));
    const bool first = layout.Coord(job.rank).pp == 0;
    const int peer = layout.PipelinePeer(job.rank, first ? 1 : 0);
    cpu0 = ProcessCpu();
    const double start = Now();
    uint64_t tag = 1;
    bool stop = false;
    for (int i = 0; !stop; ++i) {
      for (size_t k = 0; k < job.sizes.size(); ++k, tag += 2) {
        Tensor& t = buffers[k];
        const bool keep = i >= job.warmup;
        const bool last = k + 1 == job.sizes.size();
        // The first stage computes and sends (direction 0), then waits for the answer; the
        // second receives, computes and answers (direction 1). The first stage decides when
        // to stop and says so in the round's last transfer.
        auto send_one = [&](int dir, uint64_t at) -> Status {
          burned += Burn(job.gap);
          if (first && last) {
            stop = i + 1 >= job.warmup + job.repeats &&
                   (Now() - start >= job.seconds || i + 1 >= kMaxRounds);
            t.f32()[0] = stop ? 1.0f : 0.0f;
          }
          const double posted = Now();
          PW_RETURN_IF_ERROR(send->Send(peer, at, t));
          if (keep) Report(job.report_fd, StrCat("s ", k, " ", i, " ", dir, " ", Fmt(posted)));
          return OkStatus();
        };
        auto recv_one = [&](int dir, uint64_t at) -> Status {
          const double posted = Now();
          PW_RETURN_IF_ERROR(recv->Recv(peer, at, t));
          const double done = Now();
          if (!first && last && dir == 0) stop = t.f32()[0] > 0;
          if (keep)
            Report(job.report_fd,
                   StrCat("r ", k, " ", i, " ", dir, " ", Fmt(posted), " ", Fmt(done)));
          return OkStatus();
        };
        if (first) {
          PW_RETURN_IF_ERROR(send_one(0, tag));
          PW_RETURN_IF_ERROR(recv_one(1, tag + 1));
        } else {
          PW_RETURN_IF_ERROR(recv_one(0, tag));
          PW_RETURN_IF_ERROR(send_one(1, tag + 1));
        }
        ops += 2;
      }
      PW_RETURN_IF_ERROR(send->Flush());
    }
  }
  Report(job.report_fd,
         StrCat("c ", Fmt(ProcessCpu() - cpu0), " ", Fmt(burned), " ", std::max(1, ops)));
  return OkStatus();
}

StatusOr<int> RunCommBenchRank(const std::vector<std::string>& args) {
  Flags flags;
  for (const char* name : {"kind", "group", "sizes", "gap", "warmup", "repeats", "seconds", "rank",
                           "world-size", "store", "report-fd"})
    flags.Value(name);
  PW_RETURN_IF_ERROR(flags.Parse(args));
  RankJob job;
  const std::string kind = flags.Get("kind", "all_reduce");
  if (kind != "all_reduce" && kind != "send_recv")
    return InvalidArgument("flag --kind: unknown kind '", kind, "' (all_reduce, send_recv)");
  job.kind = kind == "all_reduce" ? cost::CommKind::kAllReduce : cost::CommKind::kSendRecv;
  PW_ASSIGN_OR_RETURN(int64_t group, flags.GetInt("group", 2));
  PW_ASSIGN_OR_RETURN(int64_t world, flags.RequireInt("world-size"));
  PW_ASSIGN_OR_RETURN(int64_t rank, flags.RequireInt("rank"));
  PW_ASSIGN_OR_RETURN(int64_t fd, flags.RequireInt("report-fd"));
  PW_ASSIGN_OR_RETURN(job.sizes, ParseSizes(flags.Get("sizes", "4096")));
  PW_ASSIGN_OR_RETURN(job.gap, flags.GetDouble("gap", 0));
  PW_ASSIGN_OR_RETURN(int64_t warmup, flags.GetInt("warmup", 3));
  PW_ASSIGN_OR_RETURN(int64_t repeats, flags.GetInt("repeats", 10));
  PW_ASSIGN_OR_RETURN(job.seconds, flags.GetDouble("seconds", 0));
  PW_ASSIGN_OR_RETURN(std::string store_spec, flags.Require("store"));
  if (group < 2 || world < group || rank < 0 || rank >= world || job.gap < 0 || warmup < 0 ||
      repeats < 1)
    return InvalidArgument("comm-bench-rank: bad group, rank, gap or repeat counts");
  job.mesh = MeshFor(job.kind, static_cast<int>(group), static_cast<int>(world));
  if (job.mesh.world_size() != world)
    return InvalidArgument("comm-bench-rank: ", world, " ranks do not form groups of ", group);
  job.rank = static_cast<int>(rank);
  job.warmup = static_cast<int>(warmup);
  job.repeats = static_cast<int>(repeats);
  job.report_fd = static_cast<int>(fd);
  PW_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> store, OpenStore(store_spec));
  GlooOptions options;
  options.timeout = std::chrono::seconds(60);
  PW_ASSIGN_OR_RETURN(std::unique_ptr<CommFactory> factory,
                      MakeGlooCommFactory(*store, job.mesh, job.rank, options));
  PW_RETURN_IF_ERROR(RunRankJob(job, *factory));
  return 0;
}

// ---- The launching side ----

class GlooCommBenchmark final : public cost::CommBenchmark {
 public:
  StatusOr<cost::CommRunResult> Measure(const cost::CommRun& run) override {
    const Mesh mesh = MeshFor(run.kind, run.group_size, run.ranks);
    const int n = mesh.world_size();
    char pattern[] = "/tmp/pw-commbench-XXXXXX";
    if (!mkdtemp(pattern)) return Unavailable("cannot create a temporary directory for the store");
    const std::string dir = pattern;
    LaunchOptions launch;
    launch.nproc = n;
    launch.run_dir = dir;
    launch.args = {"comm-bench-rank",
                   "--kind",
                   cost::CommKindName(run.kind),
                   "--group",
                   std::to_string(run.group_size),
                   "--sizes",
                   JoinSizes(run.sizes),
                   "--gap",
                   Fmt(run.compute_gap),
                   "--warmup",
                   std::to_string(run.warmup),
                   "--repeats",
                   std::to_string(run.repeats),
                   "--seconds",
                   Fmt(run.seconds)};
    std::vector<std::vector<std::string>> lines(n);
    launch.on_report = [&](int rank, const std::string& line) { lines[rank].push_back(line); };
    StatusOr<LaunchResult> launched = LaunchRanks(launch);
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    PW_RETURN_IF_ERROR(launched.status());
    if (!launched->ok) return Unavailable("communication benchmark failed: ", launched->failure);
    return Collect(run, mesh, lines);
  }

 private:
  using Key = std::tuple<int, int, int>;  // size, round, direction

  static StatusOr<cost::CommRunResult> Collect(const cost::CommRun& run, const Mesh& mesh,
                                               const std::vector<std::vector<std::string>>& lines) {
    const RankLayout layout(mesh);
    const int n = mesh.world_size();
    cost::CommRunResult out;
    out.seconds.resize(run.sizes.size());
    // Per rank: all-reduce (arrived, done), sends' post times, recvs' (posted, done).
    std::vector<std::map<Key, std::pair<double, double>>> ops(n), recvs(n);
    std::vector<std::map<Key, double>> sends(n);
    double cpu = 0;
    int cpu_ranks = 0;
    for (int r = 0; r < n; ++r)
      for (const std::string& line : lines[r]) {
        std::istringstream in(line);
        std::string what;
        in >> what;
        int k = 0, i = 0, dir = 0;
        double a = 0, b = 0;
        if (what == "a" && in >> k >> i >> a >> b) {
          ops[r][{k, i, 0}] = {a, b};
        } else if (what == "s" && in >> k >> i >> dir >> a) {
          sends[r][{k, i, dir}] = a;
        } else if (what == "r" && in >> k >> i >> dir >> a >> b) {
          recvs[r][{k, i, dir}] = {a, b};
        } else if (what == "c") {
          double process = 0, burned = 0;
          int count = 0;
          if (in >> process >> burned >> count && count > 0) {
            cpu += (process - burned) / count;
            ++cpu_ranks;
          }
        }
      }
    if (cpu_ranks < n) return Internal("communication benchmark: a rank reported no CPU time");
    out.cpu_per_op = cpu / n;
    if (run.kind == cost::CommKind::kAllReduce) {
      // Each group once (its first member), from the last arrival to the members' mean end;
      // and how far the last arrival was behind the mean one.
      double straggle = 0;
      int counted = 0;
      for (int r = 0; r < n; ++r) {
        std::vector<int> group = layout.Group("mp", r);
        if (group.front() != r) continue;
        for (const auto& [key, first] : ops[r]) {
          double last = 0, mean = 0, done = 0;
          bool all = true;
          for (int m : group) {
            auto it = ops[m].find(key);
            if (it == ops[m].end()) {
              all = false;
              break;
            }
            last = std::max(last, it->second.first);
            mean += it->second.first / group.size();
            done += it->second.second / group.size();
          }
          if (!all) continue;
          out.seconds[std::get<0>(key)].push_back(std::max(0.0, done - last));
          straggle += last - mean;
          ++counted;
        }
      }
      out.straggle = counted > 0 ? straggle / counted : 0;
    } else {
      // A transfer: from the later of send and recv being posted until the recv returned.
      for (int r = 0; r < n; ++r)
        for (const auto& [key, recv] : recvs[r]) {
          const int peer = layout.PipelinePeer(r, layout.Coord(r).pp == 0 ? 1 : 0);
          auto it = sends[peer].find(key);
          if (it == sends[peer].end()) continue;
          double start = std::max(it->second, recv.first);
          out.seconds[std::get<0>(key)].push_back(std::max(0.0, recv.second - start));
        }
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<cost::CommBenchmark> MakeGlooCommBenchmark() {
  return std::make_unique<GlooCommBenchmark>();
}

PW_REGISTER_COMMAND(comm_bench_rank, "comm-bench-rank",
                    "(internal) one rank process of 'pipeweave profile --comm'",
                    "pipeweave comm-bench-rank --kind all_reduce|send_recv --group G --sizes "
                    "B,B,... --gap SECONDS --warmup N --repeats N --seconds S --rank R "
                    "--world-size N "
                    "--store DIR --report-fd FD\n"
                    "Started by 'pipeweave profile --comm' through the launcher, once per rank.",
                    RunCommBenchRank);

}  // namespace pw::tools
