#pragma once
// Communication between rank processes over TCP. Collectives run on rings of TCP
// connections that the calling stream's thread drives itself (tcp_ring.h), one ring per
// (stream, group) (the mp, dp or pp group); point-to-point transfers run on one TCP link
// per ordered pair of ranks (tcp_link.h: the sender's pp_send stream writes, the receiver's
// pp_recv stream reads; tags keep transfers apart), or, for comparison, on Gloo's TCP
// pairs (GlooOptions::transfers). All rendezvous through the run's KvStore. So collectives on
// different streams never interleave, and a rank's send and receive streams never share a
// connection. Rings and contexts the plan declared while it was lowered connect before the first
// step, in one order all ranks share (StreamComm::Connect); any other connects on first use.

#include <chrono>
#include <memory>
#include <string>

#include "executor/comm/kv_store.h"
#include "executor/comm/stream_comm.h"
#include "ir/rank_layout.h"

namespace pw {

// What carries point-to-point transfers.
enum class TransferTransport {
  kTcpLink,  // this project's own links (tcp_link.h): no thread but the two streams wakes
  kGloo,     // Gloo's TCP pairs: a handshake through both sides' network threads
};

struct GlooOptions {
  std::string hostname = "127.0.0.1";  // address this rank listens on
  TransferTransport transfers = TransferTransport::kTcpLink;
  // How long one transfer or collective may wait for its peers.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

// `store` must outlive the factory and every comm it makes.
StatusOr<std::unique_ptr<CommFactory>> MakeGlooCommFactory(KvStore& store, const Mesh& mesh,
                                                           int rank, GlooOptions options = {});

}  // namespace pw
