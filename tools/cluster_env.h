#pragma once
// Where one rank process of a multi-machine run stands: its rank, the world size, the store
// and the address it listens on, from `run-parallel`'s flags and from the environment that
// cluster launchers set (docs/multi-host.md is the reference):
//
//   torchrun:  RANK  WORLD_SIZE  LOCAL_RANK  LOCAL_WORLD_SIZE  MASTER_ADDR
//              TORCHELASTIC_RUN_ID
//   Slurm:     SLURM_PROCID  SLURM_NTASKS  SLURM_LOCALID  SLURM_NODELIST  SLURM_JOB_ID
//              SLURM_STEP_ID  SLURM_NTASKS_PER_NODE  SLURM_CPUS_PER_TASK
//   pipeweave: PW_STORE (any --store value)  PW_STORE_PORT (the Redis port, default 6379)
//
// torchrun's variables win over Slurm's (srun may start torchrun, one task per node).
// The store, first that applies: --store; PW_STORE; redis://MASTER_ADDR:PW_STORE_PORT
// [/torchrun-RUN_ID]; redis://<first node of SLURM_NODELIST>:PW_STORE_PORT/slurm-JOB.STEP.
// MASTER_PORT is torchrun's own store (its agent listens there) and is left alone. A flag
// and a variable that both give the rank, the world size or the store must agree.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/status.h"
#include "tools/flags.h"

namespace pw::tools {

struct RankPlacement {
  std::string rank_source;  // "--rank 1", "RANK=1", "SLURM_PROCID=1"
  int64_t rank = 0;
  std::string world_source;  // "--world-size 2", "WORLD_SIZE=2", "SLURM_NTASKS=2"
  int64_t world_size = 0;
  int local_rank = -1;        // -1: not given
  int local_world_size = -1;  // ranks on this machine; -1: not given
  int cpus_per_rank = -1;     // Slurm's SLURM_CPUS_PER_TASK; -1: not given
  std::string store;
  std::string store_source;  // "--store", "PW_STORE=...", "MASTER_ADDR", ...
  std::string hostname;      // empty: not given (see LocalAddressToward)
};

using GetEnv = std::function<const char*(const char* name)>;

// The placement from --rank/--world-size/--store/--hostname and the environment; nullopt
// when neither gives a rank (the launcher's mode, --nproc). One error line naming the
// flag and the variable when they disagree, or a variable that does not parse.
StatusOr<std::optional<RankPlacement>> ReadRankPlacement(const Flags& flags, const GetEnv& env);

// Where the environment places this process as one rank of several ("RANK=0 of
// WORLD_SIZE=4"), else nullopt: the launcher (--nproc) refuses to start ranks of its own
// then. A world of one (srun -n 1) places nothing.
std::optional<std::string> EnvRankOfMany(const GetEnv& env);

// The variables ReadRankPlacement reads, which the launcher removes from its ranks'
// environment (they are placed by flags).
const std::vector<const char*>& PlacementVariables();

// The first host of a Slurm node list: "gpu[07-09,12],cpu1" -> "gpu07".
StatusOr<std::string> FirstSlurmNode(const std::string& nodelist);

// The address this machine uses to reach `host` (the route's source address): the one to
// listen on when the store is on another machine.
StatusOr<std::string> LocalAddressToward(const std::string& host);

// The host of a store spec ("redis://H:P/X" -> "H"); empty for a directory.
std::string StoreHost(const std::string& store);

}  // namespace pw::tools
