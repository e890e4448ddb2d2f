// All-reduce between 2 processes of this machine over TCP on loopback: a plain Gloo loop
// (one context, gloo::allreduce) against the executor's communicator (executor/comm/
// gloo_comm.h, whose collectives run on tcp_ring.h, as a rank's stream calls it), for
// 8 KiB and 1 MiB of f32.
// Prints the median wall time per operation of each (and its mean CPU time in the rank's
// process, every thread) and their ratio, taken in one run.
//
//   allreduce_bench [ITERATIONS (400)]

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "executor/comm/gloo_comm.h"
#include "executor/comm/kv_store.h"

namespace {

using Clock = std::chrono::steady_clock;

double MedianUs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// CPU seconds of this process so far, every thread (the transport's included).
double ProcessCpu() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// What one operation costs: wall microseconds (median) and CPU microseconds (mean), the
// latter insensitive to how loaded the machine is.
struct Cost {
  double wall_us = 0, cpu_us = 0;
};

// Times `op` `iterations` times after a warm-up.
template <class Op>
Cost Time(int iterations, Op op) {
  for (int i = 0; i < 20; ++i) op();
  std::vector<double> us;
  const double cpu0 = ProcessCpu();
  for (int i = 0; i < iterations; ++i) {
    auto t0 = Clock::now();
    op();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return {MedianUs(us), (ProcessCpu() - cpu0) * 1e6 / iterations};
}

// One rank: both loops for both sizes; rank 0 writes its medians to `out`.
int RunRank(int rank, const std::string& dir, int iterations, FILE* out) {
  const std::vector<size_t> counts = {2048, 262144};  // 8 KiB, 1 MiB of f32
  std::vector<Cost> plain, ours;

  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore gloo_store(dir + "/plain");
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, 2);
  context->connectFullMesh(gloo_store, device);
  uint32_t tag = 0;
  for (size_t count : counts) {
    std::vector<float> data(count, 1.0f);
    plain.push_back(Time(iterations, [&] {
      gloo::AllreduceOptions opts(context);
      opts.setOutput(data.data(), count);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setTag(tag++);
      gloo::allreduce(opts);
    }));
  }

  auto store = pw::OpenStore(dir + "/pipeweave");
  if (!store.ok()) return 1;
  pw::Mesh mesh;
  mesh.mp = 2;
  auto factory = pw::MakeGlooCommFactory(**store, mesh, rank);
  if (!factory.ok()) return 1;
  auto comm = (*factory)->Create(pw::StreamType::kMpComm);
  if (!comm.ok()) return 1;
  for (size_t count : counts) {
    std::vector<float> data(count, 1.0f);
    bool ok = true;
    ours.push_back(Time(iterations, [&] {
      ok = ok && (*comm)->AllReduceSum("mp", data.data(), static_cast<int64_t>(count)).ok();
    }));
    if (!ok) return 1;
  }
  if (rank == 0) {
    for (size_t i = 0; i < counts.size(); ++i)
      std::fprintf(out,
                   "%-8s plain Gloo loop %8.1f us (CPU %7.1f us)  executor communicator %8.1f us "
                   "(CPU %7.1f us)  ratio %.2fx\n",
                   counts[i] == 2048 ? "8 KiB" : "1 MiB", plain[i].wall_us, plain[i].cpu_us,
                   ours[i].wall_us, ours[i].cpu_us, ours[i].wall_us / plain[i].wall_us);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::max(1, std::atoi(argv[1])) : 400;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("allreduce_bench." + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir + "/plain");
  std::filesystem::create_directories(dir + "/pipeweave");
  std::fflush(stdout);
  pid_t child = fork();
  if (child == 0) _exit(RunRank(1, dir, iterations, stdout));
  int status0 = RunRank(0, dir, iterations, stdout);
  int status1 = 0;
  waitpid(child, &status1, 0);
  std::filesystem::remove_all(dir);
  if (status0 != 0 || !WIFEXITED(status1) || WEXITSTATUS(status1) != 0) {
    std::fprintf(stderr, "allreduce_bench: a rank failed\n");
    return 1;
  }
  return 0;
}
