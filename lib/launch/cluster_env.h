#pragma once
// Where this launcher sits in a multi-node job: how many nodes, which one this is, and
// where node 0's rendezvous store listens. Resolved from command-line flags first, then
// from Slurm's environment (one launcher per node: `srun --ntasks-per-node=1 trainctl ...`),
// else a single-node job on 127.0.0.1.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainctl::launch {

// The port used when neither a flag nor Slurm gives one (torchrun's default too).
inline constexpr int kDefaultMasterPort = 29500;

// Expands a Slurm compressed host list: "node[01-03,7]" -> node01 node02 node03 node7,
// "a[1-2],b3" -> a1 a2 b3, "gpu-[001-002]-x" -> gpu-001-x gpu-002-x. Zero padding of a
// range's start is kept ("[08-10]" -> 08 09 10). Several bracket groups in one name
// ("r[1-2]n[1-2]") expand to their product. Throws InputError on malformed lists.
std::vector<std::string> expand_nodelist(std::string_view list);

// Values given on the command line; unset fields fall back to the environment.
struct ClusterFlags {
  std::optional<int> nnodes;
  std::optional<int> node_rank;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
};

struct ClusterPlacement {
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;  // 0: any free port (single node only)
  std::string source;  // "flags", "slurm" or "single node": said in logs and errors
};

// Reads one environment variable; injectable so tests need not touch the process env.
// process_env() is the launcher's and the CLI's one reader of the environment (a worker
// reads its own once, into launch/worker_env.h's WorkerEnv).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup process_env();

// Flags override Slurm (SLURM_JOB_NODELIST or SLURM_NODELIST, SLURM_NNODES, SLURM_NODEID,
// SLURM_JOB_ID). Under Slurm the master is the first host of the node list and the port
// is derived from the job id (29500 + id % 1000) so that every node computes the same one.
// Without either, master_addr is 127.0.0.1 (several launchers on one machine, as torchrun)
// and a single-node job listens on any free port (0), so concurrent jobs never clash.
// Throws InputError on inconsistent values (node rank outside [0, nnodes), bad numbers).
ClusterPlacement resolve_cluster(const ClusterFlags& flags, const EnvLookup& env);

// The local IP address this node uses to reach `host` (the source address the kernel
// picks for a route to it; no packet is sent). Other nodes reach this one's workers at
// that address, so it is what Gloo listens on. "127.0.0.1" for a loopback master.
// Throws RendezvousError when `host` cannot be resolved or has no route.
std::string local_address_towards(const std::string& host, int port);

}  // namespace trainctl::launch
