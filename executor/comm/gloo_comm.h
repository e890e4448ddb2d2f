#pragma once
// Communication between rank processes over Gloo's TCP transport. Contexts (full meshes
// of TCP pairs) are made on first use, by rendezvous through the run's KvStore, one per
// (stream, group): the mp group, the dp group, and for point-to-point the rank's pipeline
// (shared by pp_send and pp_recv, since a send on one rank meets a recv on another; tags
// keep transfers apart). Collectives on different streams never share a context, so they
// never interleave.

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
