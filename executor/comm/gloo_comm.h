#pragma once
// Communication between rank processes over Gloo's TCP transport. Contexts (full meshes
// of TCP pairs) are made by rendezvous through the run's KvStore, one per (stream, group)
// for collectives (the mp, dp or pp group) and one per ordered pair of ranks for
// point-to-point transfers (used by the sender's pp_send stream and the receiver's pp_recv
// stream only; tags keep transfers apart). So collectives on different streams never
// interleave, and a rank's send and receive streams never share a connection. Contexts
// the plan declared while it was lowered connect before the first step, in one order all
// ranks share (StreamComm::Connect); any other connects on first use.

#include <chrono>
#include <memory>
#include <string>

#include "executor/comm/kv_store.h"
#include "executor/comm/stream_comm.h"
#include "ir/rank_layout.h"

namespace pw {

struct GlooOptions {
  std::string hostname = "127.0.0.1";  // address this rank listens on
  // How long one transfer or collective may wait for its peers.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

// `store` must outlive the factory and every comm it makes.
StatusOr<std::unique_ptr<CommFactory>> MakeGlooCommFactory(KvStore& store, const Mesh& mesh,
                                                           int rank, GlooOptions options = {});

}  // namespace pw
