#include "cli.h"

namespace trainctl::app {

const char* const kExitCodesHelp =
    "Exit codes: 0 done, 1 internal error, 2 bad command line or job spec, 3 a worker failed,\n"
    "4 preempted (SIGTERM/SIGINT/SIGUSR1), 5 workers could not connect (rendezvous).";

const char* const kClusterHelp =
    "Multi-node: run one launcher per node with the same --nnodes, --master-addr and\n"
    "--master-port, and --node-rank 0..N-1 (node 0 hosts the rendezvous store). Under Slurm\n"
    "these come from SLURM_* (srun --ntasks-per-node=1 trainctl ...). Nodes share a job token:\n"
    "--token/TRAINCTL_TOKEN, else node 0 writes run_dir/.rendezvous_token for the others.";

CLI::Validator at_least(long long min) {
  return CLI::Validator(
      [min](std::string& text) {
        long long value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "expected a whole number; got " + text;
        if (value < min) return "must be at least " + std::to_string(min) + "; got " + text;
        return std::string();
      },
      ">= " + std::to_string(min));
}

void JobOptions::add_to(CLI::App* cmd) {
  cmd->add_option("job", job, "Job spec (YAML)")->required();
  cmd->add_option("--set", overrides,
                  "Override a spec value: key.path=value (repeatable), e.g. "
                  "--set training.steps=50")
      ->allow_extra_args(false);
}

void ClusterOptions::add_to(CLI::App* cmd, bool with_rendezvous) {
  nnodes_opt_ = cmd->add_option("--nnodes", nnodes_, "Number of nodes (default: Slurm or 1)")
                    ->check(at_least(1));
  if (!with_rendezvous) return;
  node_rank_opt_ = cmd->add_option("--node-rank", node_rank_, "This node's rank, 0..nnodes-1")
                       ->check(at_least(0));
  master_addr_opt_ = cmd->add_option("--master-addr", master_addr_,
                                     "Node 0's address (default: Slurm's first node or 127.0.0.1)");
  master_port_opt_ = cmd->add_option("--master-port", master_port_,
                                     "Port of node 0's rendezvous store (default: 29500 + "
                                     "SLURM_JOB_ID % 1000, 29500; any free port on one node)")
                         ->check(CLI::Range(0, 65535));
  cmd->add_option("--token", token_, "Job token shared by all nodes")->envname("TRAINCTL_TOKEN");
  node_addr_opt_ = cmd->add_option("--node-addr", node_addr_,
                                   "This node's address as other nodes reach it (default: the "
                                   "local address of the route to the master)");
}

launch::ClusterFlags ClusterOptions::flags() const {
  launch::ClusterFlags f;
  if (nnodes_opt_ && nnodes_opt_->count()) f.nnodes = nnodes_;
  if (node_rank_opt_ && node_rank_opt_->count()) f.node_rank = node_rank_;
  if (master_addr_opt_ && master_addr_opt_->count()) f.master_addr = master_addr_;
  if (master_port_opt_ && master_port_opt_->count()) f.master_port = master_port_;
  return f;
}

void ClusterOptions::fill(LaunchArgs& args) const {
  args.cluster = flags();
  // count() is 0 when the value came from TRAINCTL_TOKEN; the string is set either way.
  if (!token_.empty()) args.token = token_;
  if (node_addr_opt_ && node_addr_opt_->count()) args.node_addr = node_addr_;
}

}  // namespace trainctl::app
