#include "tools/cluster_env.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "ir/number.h"

namespace pw::tools {
namespace {

// One value of the placement and where it came from: "--rank 1", "RANK=1".
struct Given {
  std::string origin;
  std::string value;
  bool from_flag = false;
};

std::optional<Given> FromEnv(const GetEnv& env, const char* name) {
  const char* v = env(name);
  if (!v || !*v) return std::nullopt;
  return Given{StrCat(name, "=", v), v, false};
}

std::optional<Given> FromFlag(const Flags& flags, const char* name) {
  if (!flags.Has(name)) return std::nullopt;
  return Given{StrCat("--", name, " ", flags.Get(name)), flags.Get(name), true};
}

StatusOr<int64_t> AsInt(const Given& g, int64_t min) {
  auto v = ParseInteger(g.value, min, kInt32Max);
  if (!v.ok())
    return InvalidArgument(g.origin, ": ", g.from_flag ? "" : "from the environment: ",
                           "expected an integer >= ", min);
  return *v;
}

// The flag's value unless the environment disagrees; one of them when only one is given.
StatusOr<std::optional<Given>> Merge(std::optional<Given> flag, std::optional<Given> env,
                                     bool numeric) {
  if (flag && env) {
    bool same = flag->value == env->value;
    if (numeric) {
      auto a = ParseInteger(flag->value), b = ParseInteger(env->value);
      same = a.ok() && b.ok() && *a == *b;
    }
    if (!same)
      return InvalidArgument(flag->origin, " disagrees with ", env->origin,
                             " from the environment: make them agree or drop one");
  }
  return flag ? flag : env;
}

std::string StorePort(const GetEnv& env) {
  auto port = FromEnv(env, "PW_STORE_PORT");
  return port ? port->value : "6379";
}

std::optional<Given> SlurmStore(const GetEnv& env, Status* error) {
  std::optional<Given> list = FromEnv(env, "SLURM_NODELIST");
  if (!list) list = FromEnv(env, "SLURM_JOB_NODELIST");
  if (!list) return std::nullopt;
  auto first = FirstSlurmNode(list->value);
  if (!first.ok()) {
    *error = InvalidArgument(list->origin, " from the environment: ", first.status().message());
    return std::nullopt;
  }
  std::string prefix;
  if (auto job = FromEnv(env, "SLURM_JOB_ID")) {
    prefix = "/slurm-" + job->value;
    if (auto step = FromEnv(env, "SLURM_STEP_ID")) prefix += "." + step->value;
  }
  return Given{StrCat("SLURM_NODELIST (first node ", *first, ")"),
               StrCat("redis://", *first, ":", StorePort(env), prefix), false};
}

}  // namespace

std::optional<std::string> EnvRankOfMany(const GetEnv& env) {
  for (auto [rank, world] : {std::pair{"RANK", "WORLD_SIZE"}, {"SLURM_PROCID", "SLURM_NTASKS"}}) {
    auto r = FromEnv(env, rank);
    if (!r) continue;
    auto w = FromEnv(env, world);
    if (w && w->value == "1") return std::nullopt;
    return StrCat(r->origin, w ? StrCat(" of ", w->origin) : "");
  }
  return std::nullopt;
}

const std::vector<const char*>& PlacementVariables() {
  static const std::vector<const char*> names = {
      "RANK",         "WORLD_SIZE",   "LOCAL_RANK",    "LOCAL_WORLD_SIZE",
      "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "PW_STORE"};
  return names;
}

StatusOr<std::string> FirstSlurmNode(const std::string& nodelist) {
  std::string first;
  int depth = 0;
  for (char c : nodelist) {
    if (c == ',' && depth == 0) break;
    if (c == '[') ++depth;
    if (c == ']') --depth;
    first += c;
  }
  if (first.empty()) return InvalidArgument("empty node list '", nodelist, "'");
  size_t open = first.find('[');
  if (open == std::string::npos) return first;
  size_t close = first.find(']', open);
  if (close == std::string::npos)
    return InvalidArgument("node list '", nodelist, "' has an unclosed '['");
  std::string range = first.substr(open + 1, close - open - 1);
  std::string lowest = range.substr(0, range.find_first_of(",-"));
  if (lowest.empty() || lowest.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgument("node list '", nodelist, "': cannot read the range '", range, "'");
  return first.substr(0, open) + lowest + first.substr(close + 1);
}

std::string StoreHost(const std::string& store) {
  const std::string redis = "redis://";
  if (store.rfind(redis, 0) != 0) return "";
  std::string address = store.substr(redis.size());
  address = address.substr(0, address.find('/'));
  return address.substr(0, address.rfind(':'));
}

StatusOr<std::string> LocalAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0)
    return Unavailable("cannot resolve the store host '", host, "': ", gai_strerror(rc));
  std::string address;
  Status error = Unavailable("no route to the store host '", host, "'");
  for (addrinfo* a = found; a && address.empty(); a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // Connecting a datagram socket sends nothing: it only picks the route and its source.
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char text[INET6_ADDRSTRLEN] = {0};
      const void* in =
          local.ss_family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, in, text, sizeof(text))) address = text;
    } else {
      error = Unavailable("no route to the store host '", host, "': ", std::strerror(errno));
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (address.empty()) return error;
  return address;
}

StatusOr<std::optional<RankPlacement>> ReadRankPlacement(const Flags& flags, const GetEnv& env) {
  // torchrun's variables, else Slurm's.
  const bool torchrun = FromEnv(env, "RANK").has_value();
  const char* rank_var = torchrun ? "RANK" : "SLURM_PROCID";
  const char* world_var = torchrun ? "WORLD_SIZE" : "SLURM_NTASKS";
  const char* local_var = torchrun ? "LOCAL_RANK" : "SLURM_LOCALID";
  PW_ASSIGN_OR_RETURN(std::optional<Given> rank,
                      Merge(FromFlag(flags, "rank"), FromEnv(env, rank_var), true));
  if (!rank) return std::optional<RankPlacement>();
  PW_ASSIGN_OR_RETURN(std::optional<Given> world,
                      Merge(FromFlag(flags, "world-size"), FromEnv(env, world_var), true));
  if (!world)
    return InvalidArgument(rank->origin, " gives the rank but nothing gives the world size: pass ",
                           "--world-size N (or set ", world_var, ")");
  RankPlacement p;
  p.rank_source = rank->origin;
  p.world_source = world->origin;
  PW_ASSIGN_OR_RETURN(p.rank, AsInt(*rank, 0));
  PW_ASSIGN_OR_RETURN(p.world_size, AsInt(*world, 1));
  if (p.rank >= p.world_size)
    return InvalidArgument(rank->origin, " is outside [0, ", p.world_size, ") (", world->origin,
                           ")");
  if (auto local = FromEnv(env, local_var)) {
    PW_ASSIGN_OR_RETURN(int64_t v, AsInt(*local, 0));
    p.local_rank = static_cast<int>(v);
  }
  std::optional<Given> local_world =
      torchrun ? FromEnv(env, "LOCAL_WORLD_SIZE") : FromEnv(env, "SLURM_NTASKS_PER_NODE");
  // Slurm writes "2(x3)" or "2,1" when nodes differ: only a plain count is taken.
  if (local_world && ParseInteger(local_world->value, 1, kInt32Max).ok())
    p.local_world_size = static_cast<int>(*ParseInteger(local_world->value));
  if (auto cpus = FromEnv(env, "SLURM_CPUS_PER_TASK")) {
    PW_ASSIGN_OR_RETURN(int64_t v, AsInt(*cpus, 1));
    p.cpus_per_rank = static_cast<int>(v);
  }

  PW_ASSIGN_OR_RETURN(std::optional<Given> store,
                      Merge(FromFlag(flags, "store"), FromEnv(env, "PW_STORE"), false));
  if (!store) {
    // MASTER_PORT is torchrun's own store (its agent listens there): the Redis server runs
    // beside it on MASTER_ADDR, at PW_STORE_PORT (Redis's 6379 by default).
    if (auto addr = FromEnv(env, "MASTER_ADDR")) {
      std::string prefix;
      if (auto id = FromEnv(env, "TORCHELASTIC_RUN_ID"); id && id->value != "none")
        prefix = "/torchrun-" + id->value;
      store =
          Given{"MASTER_ADDR", StrCat("redis://", addr->value, ":", StorePort(env), prefix), false};
    }
  }
  if (!store) {
    Status error;
    store = SlurmStore(env, &error);
    PW_RETURN_IF_ERROR(error);
  }
  if (!store)
    return InvalidArgument("no store for rank ", p.rank, ": pass --store DIR|redis://HOST:PORT ",
                           "(or set PW_STORE or MASTER_ADDR)");
  p.store = store->value;
  p.store_source = store->from_flag ? "--store" : store->origin;
  p.hostname = flags.Get("hostname");
  return std::optional<RankPlacement>(std::move(p));
}

}  // namespace pw::tools
