#include "tools/comm_recorder.h"

#include <time.h>

#include <cstdio>
#include <string_view>

#include "ir/stream_type.h"
#include "ir/types.h"
#include "ops/tensor.h"

namespace pw::tools {

// One operation as its stream's thread saw it.
struct CommRecord {
  char what = 'a';   // a, g, x: a collective; s, r: a send, a recv
  int counter = -1;  // collectives: index into the stream's counters (kind and group)
  int64_t seq = 0;   // collectives: that counter's count from the first step
  int peer = -1;     // transfers
  uint64_t tag = 0;  // transfers
  int64_t bytes = 0;
  double began = 0;  // a collective's arrival, a transfer's post
  double done = 0;
};
// What one stream's communicator recorded (room reserved up front: a run's records grow it
// rarely).
struct StreamLog {
  explicit StreamLog(StreamType s) : stream(s) { records.reserve(1 << 14); }
  StreamType stream;
  struct Counter {
    char kind;
    std::string group;
    int64_t count;  // collectives of that kind over that group so far
  };
  std::vector<Counter> counters;
  std::vector<CommRecord> records;
};

namespace {

// One clock for every process of the machine, so that ranks' times compare.
double MonotonicSeconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Seconds as the report writes them: to the nanosecond.
std::string Fmt(double t) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9f", t);
  return buf;
}

// A stream's communicator with a clock around every operation.
class TimedComm final : public StreamComm {
 public:
  TimedComm(std::unique_ptr<StreamComm> inner, StreamType stream, CommRecorder& recorder)
      : inner_(std::move(inner)), recorder_(recorder), log_(recorder.NewLog(stream)) {}

  Status AllReduceSum(std::string_view group, float* data, int64_t count) override {
    return Timed('a', group, count * 4, [&] { return inner_->AllReduceSum(group, data, count); });
  }
  Status AllReduceSumLowPrecision(std::string_view group, DataType dtype, void* data,
                                  int64_t count) override {
    return Timed('a', group, count * DataTypeSize(dtype),
                 [&] { return inner_->AllReduceSumLowPrecision(group, dtype, data, count); });
  }
  Status ReduceScatterSum(std::string_view group, float* data, int64_t count) override {
    return Timed('x', group, count * 4,
                 [&] { return inner_->ReduceScatterSum(group, data, count); });
  }
  Status ReduceScatterSumLowPrecision(std::string_view group, DataType dtype, void* data,
                                      int64_t count) override {
    return Timed('x', group, count * DataTypeSize(dtype),
                 [&] { return inner_->ReduceScatterSumLowPrecision(group, dtype, data, count); });
  }
  Status AllGather(std::string_view group, void* data, int64_t bytes) override {
    return Timed('g', group, bytes, [&] { return inner_->AllGather(group, data, bytes); });
  }
  Status Shift(std::string_view group, int offset, const void* send, void* recv,
               int64_t bytes) override {
    return inner_->Shift(group, offset, send, recv, bytes);
  }
  Status AllReduceMax(std::string_view group, float* data, int64_t count) override {
    return inner_->AllReduceMax(group, data, count);
  }
  int GroupRank(std::string_view group) const override { return inner_->GroupRank(group); }
  int GroupSize(std::string_view group) const override { return inner_->GroupSize(group); }
  Status Send(int peer, uint64_t tag, const Tensor& tensor) override {
    const double posted = MonotonicSeconds();
    Status s = inner_->Send(peer, tag, tensor);
    Record({.what = 's', .peer = peer, .tag = tag, .bytes = tensor.nbytes(), .began = posted});
    return s;
  }
  Status Recv(int peer, uint64_t tag, Tensor& tensor) override {
    const double posted = MonotonicSeconds();
    Status s = inner_->Recv(peer, tag, tensor);
    Record({.what = 'r',
            .peer = peer,
            .tag = tag,
            .bytes = tensor.nbytes(),
            .began = posted,
            .done = MonotonicSeconds()});
    return s;
  }
  Status Flush() override { return inner_->Flush(); }
  // Connections made before the first step, as in a run.
  Status ExpectCollective(std::string_view group) override {
    return inner_->ExpectCollective(group);
  }
  Status ExpectTransfer(int peer, bool send, uint64_t tag, const std::string& where) override {
    return inner_->ExpectTransfer(peer, send, tag, where);
  }
  Status Connect() override { return inner_->Connect(); }

 private:
  // Runs a collective of `kind` ('a', 'g', 'x') over `group`, recording it once measuring.
  template <typename Fn>
  Status Timed(char kind, std::string_view group, int64_t bytes, Fn run) {
    std::vector<StreamLog::Counter>& counters = log_->counters;
    int index = 0;  // a few counters per stream: no allocation per operation
    while (index < static_cast<int>(counters.size()) &&
           (counters[index].kind != kind || counters[index].group != group))
      ++index;
    if (index == static_cast<int>(counters.size()))
      counters.push_back({kind, std::string(group), 0});
    const int64_t seq = counters[index].count++;
    const double arrived = MonotonicSeconds();
    Status s = run();
    Record({.what = kind,
            .counter = index,
            .seq = seq,
            .bytes = bytes,
            .began = arrived,
            .done = MonotonicSeconds()});
    return s;
  }
  // Keeps `r` once measuring has started.
  void Record(const CommRecord& r) {
    if (recorder_.measuring()) log_->records.push_back(r);
  }

  std::unique_ptr<StreamComm> inner_;
  CommRecorder& recorder_;
  std::shared_ptr<StreamLog> log_;
};

}  // namespace

std::shared_ptr<StreamLog> CommRecorder::NewLog(StreamType stream) {
  std::lock_guard<std::mutex> lock(mu_);
  return logs_.emplace_back(std::make_shared<StreamLog>(stream));
}

std::string CommRecorder::Report(double process_cpu, const std::vector<double>& step_seconds,
                                 const cpu::CaughtSpins& caught) const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& log : logs_)
    for (const CommRecord& r : log->records) {
      if (r.what == 's')
        out += StrCat("s ", r.peer, " ", r.tag, " ", r.bytes, " ", Fmt(r.began), "\n");
      else if (r.what == 'r')
        out += StrCat("r ", r.peer, " ", r.tag, " ", r.bytes, " ", Fmt(r.began), " ", Fmt(r.done),
                      "\n");
      else
        out += StrCat(std::string(1, r.what), " ", StreamTypeName(log->stream), " ",
                      log->counters[r.counter].group, " ", r.seq, " ", r.bytes, " ", Fmt(r.began),
                      " ", Fmt(r.done), "\n");
    }
  for (double seconds : step_seconds) out += StrCat("t ", Fmt(seconds), "\n");
  out += StrCat("w ", caught.waits, " ", Fmt(caught.cpu_seconds), " ", caught.shared_waits, " ",
                Fmt(caught.shared_cpu_seconds), " ", Fmt(caught.shared_seconds), "\n");
  return out + StrCat("c ", Fmt(process_cpu), " ", step_seconds.size(), "\n");
}

StatusOr<std::unique_ptr<StreamComm>> TimedCommFactory::Create(StreamType stream) {
  PW_ASSIGN_OR_RETURN(std::unique_ptr<StreamComm> comm, inner_.Create(stream));
  return std::unique_ptr<StreamComm>(
      std::make_unique<TimedComm>(std::move(comm), stream, recorder_));
}

}  // namespace pw::tools
