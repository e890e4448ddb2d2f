// A rank placed by run-parallel's flags, torchrun's variables or Slurm's: which wins, what
// disagrees, and the store each convention names (docs/multi-host.md).

#include "tools/cluster_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace pw::tools {
namespace {

using ::testing::HasSubstr;

struct Env {
  std::map<std::string, std::string> vars;
  GetEnv Get() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

Flags ParseFlags(const std::vector<std::string>& args) {
  Flags flags;
  for (const char* name : {"rank", "world-size", "store", "hostname", "nproc"}) flags.Value(name);
  EXPECT_TRUE(flags.Parse(args).ok());
  return flags;
}

TEST(ClusterEnvTest, FlagsAlone) {
  Env env;
  auto p = ReadRankPlacement(ParseFlags({"--rank", "1", "--world-size", "2", "--store", "/tmp/s"}),
                             env.Get());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->has_value());
  EXPECT_EQ((*p)->rank, 1);
  EXPECT_EQ((*p)->world_size, 2);
  EXPECT_EQ((*p)->store, "/tmp/s");
  EXPECT_EQ((*p)->store_source, "--store");
}

TEST(ClusterEnvTest, NothingPlacesNoRank) {
  Env env;
  auto p = ReadRankPlacement(ParseFlags({"--nproc", "2"}), env.Get());
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->has_value());
}

TEST(ClusterEnvTest, TorchrunStoreIsOnMasterAddr) {
  Env env{{{"RANK", "3"},
           {"WORLD_SIZE", "4"},
           {"LOCAL_RANK", "1"},
           {"LOCAL_WORLD_SIZE", "2"},
           {"MASTER_ADDR", "node0"},
           {"MASTER_PORT", "29500"}}};
  auto p = ReadRankPlacement(ParseFlags({}), env.Get());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)->rank, 3);
  EXPECT_EQ((*p)->world_size, 4);
  EXPECT_EQ((*p)->local_rank, 1);
  EXPECT_EQ((*p)->local_world_size, 2);
  EXPECT_EQ((*p)->store, "redis://node0:6379");  // MASTER_PORT is torchrun's own store
  EXPECT_EQ((*p)->rank_source, "RANK=3");
  env.vars["PW_STORE_PORT"] = "7000";
  env.vars["TORCHELASTIC_RUN_ID"] = "job9";
  EXPECT_EQ((*ReadRankPlacement(ParseFlags({}), env.Get()))->store,
            "redis://node0:7000/torchrun-job9");
}

TEST(ClusterEnvTest, SlurmStoreIsTheFirstNodePerJobStep) {
  Env env{{{"SLURM_PROCID", "5"},
           {"SLURM_NTASKS", "8"},
           {"SLURM_LOCALID", "1"},
           {"SLURM_NTASKS_PER_NODE", "2(x4)"},
           {"SLURM_CPUS_PER_TASK", "6"},
           {"SLURM_NODELIST", "gpu[07-09,12]"},
           {"SLURM_JOB_ID", "4242"},
           {"SLURM_STEP_ID", "0"}}};
  auto p = ReadRankPlacement(ParseFlags({}), env.Get());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)->rank, 5);
  EXPECT_EQ((*p)->world_size, 8);
  EXPECT_EQ((*p)->local_rank, 1);
  EXPECT_EQ((*p)->local_world_size, -1);  // "2(x4)" is not a plain count
  EXPECT_EQ((*p)->cpus_per_rank, 6);
  EXPECT_EQ((*p)->store, "redis://gpu07:6379/slurm-4242.0");
  env.vars["PW_STORE_PORT"] = "7000";
  EXPECT_EQ((*ReadRankPlacement(ParseFlags({}), env.Get()))->store,
            "redis://gpu07:7000/slurm-4242.0");
  env.vars["PW_STORE"] = "/shared/run1";  // PW_STORE wins over the conventions
  EXPECT_EQ((*ReadRankPlacement(ParseFlags({}), env.Get()))->store, "/shared/run1");
}

// srun may start torchrun, one task per node: RANK is the rank, SLURM_PROCID the node's.
TEST(ClusterEnvTest, TorchrunWinsOverSlurm) {
  Env env{{{"RANK", "3"},
           {"WORLD_SIZE", "4"},
           {"SLURM_PROCID", "1"},
           {"SLURM_NTASKS", "2"},
           {"SLURM_NODELIST", "n[1-2]"}}};
  auto p = ReadRankPlacement(ParseFlags({}), env.Get());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)->rank, 3);
  EXPECT_EQ((*p)->world_size, 4);
  EXPECT_EQ((*p)->store, "redis://n1:6379");
}

TEST(ClusterEnvTest, FlagsThatAgreeWithTheEnvironmentAreFine) {
  Env env{{{"RANK", "1"}, {"WORLD_SIZE", "2"}}};
  auto p = ReadRankPlacement(ParseFlags({"--rank", "01", "--world-size", "2", "--store", "/s"}),
                             env.Get());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)->rank, 1);
}

TEST(ClusterEnvTest, DisagreementsNameBoth) {
  Env env{{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"PW_STORE", "/a"}}};
  auto rank = ReadRankPlacement(ParseFlags({"--rank", "1"}), env.Get());
  EXPECT_EQ(rank.status().message(),
            "--rank 1 disagrees with RANK=0 from the environment: make them agree or drop one");
  auto world = ReadRankPlacement(ParseFlags({"--world-size", "3"}), env.Get());
  EXPECT_THAT(world.status().message(), HasSubstr("--world-size 3 disagrees with WORLD_SIZE=2"));
  auto store = ReadRankPlacement(ParseFlags({"--store", "/b"}), env.Get());
  EXPECT_THAT(store.status().message(), HasSubstr("--store /b disagrees with PW_STORE=/a"));
}

TEST(ClusterEnvTest, IncompleteOrBadVariables) {
  Env no_world{{{"RANK", "0"}}};
  EXPECT_THAT(ReadRankPlacement(ParseFlags({}), no_world.Get()).status().message(),
              HasSubstr("nothing gives the world size"));
  Env outside{{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"PW_STORE", "/s"}}};
  EXPECT_THAT(ReadRankPlacement(ParseFlags({}), outside.Get()).status().message(),
              HasSubstr("RANK=2 is outside [0, 2)"));
  Env bad_list{{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NODELIST", "n[1-2"}}};
  EXPECT_THAT(ReadRankPlacement(ParseFlags({}), bad_list.Get()).status().message(),
              HasSubstr("unclosed '['"));
}

TEST(ClusterEnvTest, EnvRankOfMany) {
  Env one{{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}};
  EXPECT_FALSE(EnvRankOfMany(one.Get()).has_value());  // srun -n 1 pipeweave ... --nproc 4
  Env many{{{"RANK", "0"}, {"WORLD_SIZE", "4"}}};
  EXPECT_EQ(EnvRankOfMany(many.Get()).value_or(""), "RANK=0 of WORLD_SIZE=4");
}

TEST(ClusterEnvTest, FirstSlurmNode) {
  EXPECT_EQ(*FirstSlurmNode("node1"), "node1");
  EXPECT_EQ(*FirstSlurmNode("node1,node2"), "node1");
  EXPECT_EQ(*FirstSlurmNode("gpu[07-09,12],cpu1"), "gpu07");
  EXPECT_EQ(*FirstSlurmNode("rack[3,5]-n"), "rack3-n");
  EXPECT_FALSE(FirstSlurmNode("").ok());
  EXPECT_FALSE(FirstSlurmNode("n[a-b]").ok());
}

TEST(ClusterEnvTest, StoreHostAndLocalAddress) {
  EXPECT_EQ(StoreHost("redis://10.0.0.5:6379/run"), "10.0.0.5");
  EXPECT_EQ(StoreHost("redis://node0"), "node0");
  EXPECT_EQ(StoreHost("/tmp/store"), "");
  auto local = LocalAddressToward("127.0.0.1");
  ASSERT_TRUE(local.ok()) << local.status().message();
  EXPECT_EQ(*local, "127.0.0.1");
}

}  // namespace
}  // namespace pw::tools
