// trainctl's command line: lists the commands (one cmd_<name>.cpp each: options, help,
// examples and handler), parses, runs the one given and maps errors to the documented exit
// codes (util/exit_codes.h).
#include <cstdio>
#include <exception>

#include "cli.h"
#include "config/suggest.h"
#include "util/error.h"
#include "util/exit_codes.h"
#include "util/log.h"
#include "worker/worker.h"

namespace {

using namespace trainctl::app;

// `trainctl trian job.yaml`: CLI11 would say only "A subcommand is required".
void check_command_name(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return;
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == argv[1]) return;  // hidden ones (`worker`, `man`) run too
    if (!sub->get_group().empty()) names.push_back(sub->get_name());  // but are not suggested
  }
  throw trainctl::InputError("unknown command '" + std::string(argv[1]) + "'." +
                             trainctl::config::detail::did_you_mean(argv[1], names) +
                             " Commands: " + trainctl::config::detail::join(names) +
                             " (trainctl --help)");
}

int run(int argc, char** argv) {
  CLI::App app{"trainctl: distributed training of GPT and Llama models from a YAML job spec"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + "\nRun with --help for the options.\n";
  });
  app.footer(std::string("Run `trainctl <command> --help` for a command's options.\n") +
             kExitCodesHelp);

  Dispatches commands;
  for (auto add : {add_train_command, add_selftest_command, add_validate_command, add_plan_command,
                   add_bench_command, add_inspect_command, add_ckpt_command, add_eval_command,
                   add_sample_command, add_report_command, add_data_command}) {
    add(app, commands);
  }
  CLI::App* worker = app.add_subcommand("worker", "Run one worker (started by the launcher)");
  worker->group("");                      // hidden: users never type it
  add_completion_command(app, commands);  // last: it lists the commands above

  check_command_name(app, argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? trainctl::kExitOk : trainctl::kExitBadInput;
  }
  if (worker->parsed()) return trainctl::worker::run_worker();
  // One CPU kernel path for the whole job: a bad TRAINCTL_CPU_ISA stops here, before any
  // worker starts (the launcher passes its choice on to its workers).
  check_cpu_kernels();
  trainctl::log::init(-1, 0);
  for (const Dispatch& command : commands) {
    if (command.command->parsed()) return command.run();
  }
  return trainctl::kExitInternal;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const trainctl::InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return trainctl::kExitBadInput;
  } catch (const trainctl::RendezvousError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return trainctl::kExitRendezvous;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return trainctl::kExitInternal;
  }
}
