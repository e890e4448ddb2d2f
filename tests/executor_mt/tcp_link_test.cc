// The transfer link (executor/comm/tcp_link.h), its two ends as threads: messages arrive
// whole and in any order the receiver asks for them, a send never waits for the receiver
// (what the socket does not take is written later, and Flush waits for it), and a receiver
// gone, a size that does not match or a sender that never comes are errors, not hangs.

#include "executor/comm/tcp_link.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <numeric>
#include <thread>
#include <vector>

#include "fresh_dir.h"

namespace pw {
namespace {

using namespace std::chrono_literals;

struct Ends {
  Status sender, receiver;
};

// Joins both ends of one link, each on its own thread, and runs `send` and `receive` there.
Ends OnLink(const std::function<Status(TcpLink&)>& send,
            const std::function<Status(TcpLink&)>& receive,
            std::chrono::milliseconds timeout = 30s) {
  const std::string dir = FreshDir("tcp_link");
  Ends ends;
  auto end = [&](bool sender, const std::function<Status(TcpLink&)>& body) -> Status {
    PW_ASSIGN_OR_RETURN(auto store, OpenStore(dir));
    TcpLinkOptions options;
    options.timeout = timeout;
    PW_ASSIGN_OR_RETURN(auto link, TcpLink::Join(*store, "0->1", sender, options));
    return body(*link);
  };
  std::thread s([&] { ends.sender = end(true, send); });
  std::thread r([&] { ends.receiver = end(false, receive); });
  s.join();
  r.join();
  std::filesystem::remove_all(dir);
  return ends;
}

std::vector<float> Values(size_t n, float first) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(TcpLink, DeliversMessagesInWhateverOrderTheReceiverAsks) {
  // Sent 1, 2, 3 (and an empty one); received 3, 1, 0, 2: the receiver keeps what comes
  // before it is asked for.
  const std::vector<size_t> sizes = {1000, 17, 300000, 0};
  std::vector<std::vector<float>> sent, got(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) sent.push_back(Values(sizes[i], 100.0f * i));
  Ends ends = OnLink(
      [&](TcpLink& link) -> Status {
        for (size_t i = 0; i < sizes.size(); ++i)
          PW_RETURN_IF_ERROR(link.Send(i, sent[i].data(), sent[i].size() * 4).status());
        return link.Flush();
      },
      [&](TcpLink& link) -> Status {
        for (size_t i : {2, 0, 3, 1}) {
          got[i].resize(sizes[i]);
          PW_RETURN_IF_ERROR(link.Recv(i, got[i].data(), sizes[i] * 4));
        }
        return OkStatus();
      });
  ASSERT_TRUE(ends.sender.ok()) << ends.sender.ToString();
  ASSERT_TRUE(ends.receiver.ok()) << ends.receiver.ToString();
  EXPECT_EQ(got, sent);
}

TEST(TcpLink, TheSameTagTwiceArrivesInSendOrder) {
  // A tag names one transfer of a step; the next step's transfer of it comes after.
  std::vector<float> first = Values(64, 1), second = Values(64, 1000), a(64), b(64);
  Ends ends = OnLink(
      [&](TcpLink& link) -> Status {
        PW_RETURN_IF_ERROR(link.Send(7, first.data(), 256).status());
        PW_RETURN_IF_ERROR(link.Send(7, second.data(), 256).status());
        PW_RETURN_IF_ERROR(link.Send(9, first.data(), 256).status());
        return link.Flush();
      },
      [&](TcpLink& link) -> Status {
        std::vector<float> other(64);
        PW_RETURN_IF_ERROR(link.Recv(9, other.data(), 256));  // both 7s are kept meanwhile
        PW_RETURN_IF_ERROR(link.Recv(7, a.data(), 256));
        return link.Recv(7, b.data(), 256);
      });
  ASSERT_TRUE(ends.sender.ok() && ends.receiver.ok());
  EXPECT_EQ(a, first);
  EXPECT_EQ(b, second);
}

TEST(TcpLink, ASendThatTheSocketCannotHoldReturnsAndIsWrittenLater) {
  // 64 MiB is more than the connection buffers: the send must return before the receiver
  // reads a byte (a pipeline's send stream may not wait for its receiver), and Flush waits
  // until the receiver has taken it all.
  const size_t n = 16 << 20;
  std::vector<float> big = Values(n, 0), got(n);
  std::atomic<bool> send_returned{false};
  Ends ends = OnLink(
      [&](TcpLink& link) -> Status {
        PW_ASSIGN_OR_RETURN(bool written, link.Send(1, big.data(), n * 4));
        send_returned = true;
        if (written) return Internal("64 MiB went into the socket at once");
        return link.Flush();
      },
      [&](TcpLink& link) -> Status {
        const auto until = std::chrono::steady_clock::now() + 20s;
        while (!send_returned && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(1ms);
        if (!send_returned) return Internal("the send waited for the receiver");
        return link.Recv(1, got.data(), n * 4);
      });
  ASSERT_TRUE(ends.sender.ok()) << ends.sender.ToString();
  ASSERT_TRUE(ends.receiver.ok()) << ends.receiver.ToString();
  EXPECT_TRUE(got == big);
}

TEST(TcpLink, ASizeThatDoesNotMatchIsAnError) {
  std::vector<float> data = Values(10, 0);
  Ends ends = OnLink(
      [&](TcpLink& link) -> Status {
        PW_RETURN_IF_ERROR(link.Send(3, data.data(), 40).status());
        return link.Flush();
      },
      [&](TcpLink& link) -> Status { return link.Recv(3, data.data(), 36); });
  EXPECT_TRUE(ends.sender.ok());
  EXPECT_EQ(ends.receiver.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ends.receiver.message().find("has 40 bytes, 36 expected"), std::string::npos)
      << ends.receiver.ToString();
}

TEST(TcpLink, AReceiverGoneFailsTheQueuedSend) {
  const size_t n = 16 << 20;
  std::vector<float> big = Values(n, 0);
  Ends ends = OnLink(
      [&](TcpLink& link) -> Status {
        PW_RETURN_IF_ERROR(link.Send(1, big.data(), n * 4).status());
        return link.Flush();
      },
      [&](TcpLink&) -> Status { return OkStatus(); });  // closes without reading
  EXPECT_FALSE(ends.sender.ok());
  EXPECT_EQ(ends.sender.code(), StatusCode::kUnavailable) << ends.sender.ToString();
}

TEST(TcpLink, ASenderGoneFailsTheReceive) {
  std::vector<float> data(8);
  Ends ends = OnLink([&](TcpLink&) -> Status { return OkStatus(); },
                     [&](TcpLink& link) -> Status { return link.Recv(1, data.data(), 32); });
  EXPECT_EQ(ends.receiver.code(), StatusCode::kUnavailable);
  EXPECT_NE(ends.receiver.message().find("connection closed"), std::string::npos)
      << ends.receiver.ToString();
}

TEST(TcpLink, ASenderThatNeverComesTimesOut) {
  const std::string dir = FreshDir("tcp_link_alone");
  auto store = OpenStore(dir);
  ASSERT_TRUE(store.ok());
  TcpLinkOptions options;
  options.timeout = 300ms;
  auto link = TcpLink::Join(**store, "2->3", /*sender=*/false, options);
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.status().message().find("link '2->3' (receiver): the sender did not connect"),
            std::string::npos)
      << link.status().ToString();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pw
