#pragma once
// What every command file shares: how a subcommand is registered with main.cpp, and the
// option groups several commands take (the job spec with --set, the multi-node flags).
// Each cmd_<name>.cpp adds its subcommand (options, help text, examples) and the handler
// that runs it; main.cpp only lists the commands, parses and maps errors to exit codes.
// CLI11 is precompiled once for the whole app (apps/trainctl/CMakeLists.txt).
#include <CLI/CLI.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"

namespace trainctl::app {

// A parsed subcommand and the function that runs it, returning the exit code.
struct Dispatch {
  CLI::App* command = nullptr;
  std::function<int()> run;
};
using Dispatches = std::vector<Dispatch>;

// One function per command file; each adds its subcommand(s) to `app` and their handlers
// to `out`.
void add_train_command(CLI::App& app, Dispatches& out);
void add_selftest_command(CLI::App& app, Dispatches& out);
void add_validate_command(CLI::App& app, Dispatches& out);
void add_plan_command(CLI::App& app, Dispatches& out);
void add_bench_command(CLI::App& app, Dispatches& out);
void add_inspect_command(CLI::App& app, Dispatches& out);
void add_ckpt_command(CLI::App& app, Dispatches& out);
void add_eval_command(CLI::App& app, Dispatches& out);
void add_sample_command(CLI::App& app, Dispatches& out);
void add_report_command(CLI::App& app, Dispatches& out);
void add_data_command(CLI::App& app, Dispatches& out);
// `completion bash|zsh` and the hidden `man`: generated from `app`, so add it last.
void add_completion_command(CLI::App& app, Dispatches& out);

extern const char* const kExitCodesHelp;
extern const char* const kClusterHelp;

// A whole-number option of at least `min`. CLI11's own at_least(1) message quotes DBL_MAX
// ("Value 0 not in range 0.000000 to 1797..."); this one says what the option needs.
CLI::Validator at_least(long long min);

// JOB and --set key.path=value, for the commands that read a job spec.
struct JobOptions {
  std::filesystem::path job;
  std::vector<std::string> overrides;
  void add_to(CLI::App* cmd);
};

// The multi-node flags; each records whether it was given, for ClusterFlags' optionals.
class ClusterOptions {
 public:
  // `with_rendezvous`: also --node-rank, --master-addr/port, --token, --node-addr.
  void add_to(CLI::App* cmd, bool with_rendezvous);
  launch::ClusterFlags flags() const;
  // flags(), the token (also from TRAINCTL_TOKEN) and --node-addr into `args`.
  void fill(LaunchArgs& args) const;

 private:
  int nnodes_ = 1, node_rank_ = 0, master_port_ = 0;
  std::string master_addr_, token_, node_addr_;
  CLI::Option *nnodes_opt_ = nullptr, *node_rank_opt_ = nullptr, *master_port_opt_ = nullptr,
              *master_addr_opt_ = nullptr, *node_addr_opt_ = nullptr;
};

}  // namespace trainctl::app
