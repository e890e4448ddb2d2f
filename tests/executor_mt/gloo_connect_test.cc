// The Gloo communicator's up-front connections: contexts declared while lowering connect
// in one order every rank shares (whatever order each rank declared them in), and a
// rank's send and receive streams each have their own connection to a peer.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>
#include <vector>

#include "executor/comm/gloo_comm.h"
#include "executor/comm/kv_store.h"
#include "fresh_dir.h"

namespace pw {
namespace {

// mp=2, pp=2: rank r's pipeline peer is r ^ 2 and its mp peer r ^ 1.
TEST(GlooConnect, DeclaredInAnyOrderConnectsAndTransfers) {
  const std::string dir = FreshDir("gloo_connect");
  Mesh mesh;
  mesh.mp = 2;
  mesh.pp = 2;
  std::vector<Status> results(4);
  std::vector<float> received(4, 0);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 4; ++rank) {
    ranks.emplace_back([&, rank] {
      auto run = [&]() -> Status {
        PW_ASSIGN_OR_RETURN(auto store, OpenStore(dir));
        GlooOptions options;
        options.timeout = std::chrono::seconds(30);
        PW_ASSIGN_OR_RETURN(auto factory, MakeGlooCommFactory(*store, mesh, rank, options));
        PW_ASSIGN_OR_RETURN(auto mp, factory->Create(StreamType::kMpComm));
        PW_ASSIGN_OR_RETURN(auto send, factory->Create(StreamType::kPpSend));
        PW_ASSIGN_OR_RETURN(auto recv, factory->Create(StreamType::kPpRecv));
        const int peer = rank ^ 2;
        // Even ranks declare the transfers first, odd ranks the collective first: joining
        // in declaration order would leave ranks waiting on each other.
        if (rank % 2 == 0) {
          PW_RETURN_IF_ERROR(send->ExpectTransfer(peer, true, 7, "send"));
          PW_RETURN_IF_ERROR(recv->ExpectTransfer(peer, false, 7, "recv"));
          PW_RETURN_IF_ERROR(mp->ExpectCollective("mp"));
        } else {
          PW_RETURN_IF_ERROR(mp->ExpectCollective("mp"));
          PW_RETURN_IF_ERROR(recv->ExpectTransfer(peer, false, 7, "recv"));
          PW_RETURN_IF_ERROR(send->ExpectTransfer(peer, true, 7, "send"));
        }
        PW_RETURN_IF_ERROR(mp->Connect());
        PW_RETURN_IF_ERROR(send->Connect());  // already connected: a no-op
        Tensor out(DataType::kFloat32, Shape{1});
        out.f32()[0] = static_cast<float>(rank + 1);
        PW_RETURN_IF_ERROR(send->Send(peer, 7, out));
        Tensor in(DataType::kFloat32, Shape{1});
        PW_RETURN_IF_ERROR(recv->Recv(peer, 7, in));
        PW_RETURN_IF_ERROR(send->Flush());
        float sum = 1;
        PW_RETURN_IF_ERROR(mp->AllReduceSum("mp", &sum, 1));
        received[rank] = in.f32()[0] + 10 * sum;
        return OkStatus();
      };
      results[rank] = run();
    });
  }
  for (auto& t : ranks) t.join();
  for (int rank = 0; rank < 4; ++rank) {
    ASSERT_TRUE(results[rank].ok()) << "rank " << rank << ": " << results[rank].ToString();
    EXPECT_EQ(received[rank], static_cast<float>((rank ^ 2) + 1) + 20) << "rank " << rank;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pw
