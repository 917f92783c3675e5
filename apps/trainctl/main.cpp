// The command line: parses arguments (CLI11; the only translation unit that includes it)
// and maps errors to the documented exit codes. The work is in commands.cpp.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <optional>

#include "ckpt_commands.h"
#include "comm/gloo/gloo_options.h"
#include "commands.h"
#include "data_commands.h"
#include "report_command.h"
#include "sample_command.h"
#include "util/error.h"
#include "util/exit_codes.h"
#include "util/log.h"
#include "worker/worker.h"

namespace {

using trainctl::app::LaunchArgs;

constexpr const char* kExitCodes =
    "Exit codes: 0 done, 1 internal error, 2 bad command line or job spec, 3 a worker failed,\n"
    "4 preempted (SIGTERM/SIGINT/SIGUSR1), 5 workers could not connect (rendezvous).";

constexpr const char* kClusterHelp =
    "Multi-node: run one launcher per node with the same --nnodes, --master-addr and\n"
    "--master-port, and --node-rank 0..N-1 (node 0 hosts the rendezvous store). Under Slurm\n"
    "these come from SLURM_* (srun --ntasks-per-node=1 trainctl ...). Nodes share a job token:\n"
    "--token/TRAINCTL_TOKEN, else node 0 writes run_dir/.rendezvous_token for the others.";

// at_least(1)'s message quotes DBL_MAX ("Value 0 not in range 0.000000 to 1797...");
// this one says what the option needs.
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

// Flags that record whether they were given, for ClusterFlags' optionals.
struct ClusterOptions {
  int nnodes = 1, node_rank = 0, master_port = 0;
  std::string master_addr, token, node_addr;
  CLI::Option *nnodes_opt = nullptr, *node_rank_opt = nullptr, *master_port_opt = nullptr,
              *master_addr_opt = nullptr, *token_opt = nullptr, *node_addr_opt = nullptr;

  void add_to(CLI::App* cmd, bool with_rendezvous) {
    nnodes_opt = cmd->add_option("--nnodes", nnodes, "Number of nodes (default: Slurm or 1)")
                     ->check(at_least(1));
    if (!with_rendezvous) return;
    node_rank_opt = cmd->add_option("--node-rank", node_rank, "This node's rank, 0..nnodes-1")
                        ->check(at_least(0));
    master_addr_opt =
        cmd->add_option("--master-addr", master_addr,
                        "Node 0's address (default: Slurm's first node or 127.0.0.1)");
    master_port_opt = cmd->add_option("--master-port", master_port,
                                      "Port of node 0's rendezvous store (default: 29500 + "
                                      "SLURM_JOB_ID % 1000, 29500; any free port on one node)")
                          ->check(CLI::Range(0, 65535));
    token_opt = cmd->add_option("--token", token, "Job token shared by all nodes")
                    ->envname("TRAINCTL_TOKEN");
    node_addr_opt = cmd->add_option("--node-addr", node_addr,
                                    "This node's address as other nodes reach it (default: the "
                                    "local address of the route to the master)");
  }

  trainctl::launch::ClusterFlags flags() const {
    trainctl::launch::ClusterFlags f;
    if (nnodes_opt && nnodes_opt->count()) f.nnodes = nnodes;
    if (node_rank_opt && node_rank_opt->count()) f.node_rank = node_rank;
    if (master_addr_opt && master_addr_opt->count()) f.master_addr = master_addr;
    if (master_port_opt && master_port_opt->count()) f.master_port = master_port;
    return f;
  }

  void fill(LaunchArgs& args) const {
    args.cluster = flags();
    // count() is 0 when the value came from TRAINCTL_TOKEN; the string is set either way.
    if (!token.empty()) args.token = token;
    if (node_addr_opt && node_addr_opt->count()) args.node_addr = node_addr;
  }
};

int run(int argc, char** argv) {
  CLI::App app{"trainctl: distributed training of GPT models from a YAML job spec"};
  app.set_version_flag("--version", trainctl::app::version_text());
  app.require_subcommand(1);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + "\nRun with --help for the options.\n";
  });
  app.footer(std::string("Run `trainctl <command> --help` for a command's options.\n") +
             kExitCodes);

  LaunchArgs launch_args;
  // One set per subcommand: each option object belongs to one CLI::App.
  ClusterOptions train_cluster, selftest_cluster;
  std::vector<std::string> overrides;
  int repeat = 1;
  bool quick = false;

  auto add_job = [&](CLI::App* cmd) {
    cmd->add_option("job", launch_args.job, "Job spec (YAML)")->required();
    cmd->add_option("--set", overrides,
                    "Override a spec value: key.path=value (repeatable), e.g. "
                    "--set training.steps=50")
        ->allow_extra_args(false);
  };

  CLI::App* train =
      app.add_subcommand("train", "Train a model: launch the job's workers on this node");
  add_job(train);
  train
      ->add_option("--resume", launch_args.resume,
                   "Where training starts: auto (the newest complete checkpoint in "
                   "run_dir/checkpoints, else from scratch), none (from scratch), or a "
                   "checkpoint directory (any dp/tp/pp layout)")
      ->default_val("auto");
  std::string profile;
  train
      ->add_option("--profile", profile,
                   "Record a timeline of steps A..B on every rank (as logging.profile_steps: "
                   "[A, B]), merged into run_dir/trace.json for Perfetto UI / chrome://tracing")
      ->check([](const std::string& v) {
        const size_t colon = v.find(':');
        const bool digits = colon != std::string::npos && colon > 0 && colon + 1 < v.size() &&
                            v.find_first_not_of("0123456789") == colon &&
                            v.find_first_not_of("0123456789", colon + 1) == std::string::npos;
        return digits ? std::string() : "expected A:B, two step numbers (e.g. 3:4); got " + v;
      });
  train_cluster.add_to(train, true);
  train->footer(
      std::string("Example:\n  trainctl train job.yaml --set training.steps=50\n"
                  "  trainctl train job.yaml --resume runs/job/checkpoints/step_00000100\n"
                  "  trainctl train job.yaml --profile 3:4   # timeline -> run_dir/trace.json\n"
                  "  srun --ntasks-per-node=1 trainctl train job.yaml   # Slurm, N nodes\n\n") +
      kClusterHelp + "\n\n" + kExitCodes);

  CLI::App* selftest = app.add_subcommand(
      "selftest", "Launch the job's layout and verify every group's collectives (no training)");
  add_job(selftest);
  selftest_cluster.add_to(selftest, true);
  selftest->add_option("--repeat", repeat, "Run the self-test this many times (soak test)")
      ->check(at_least(1));
  selftest->add_flag("--quick", quick,
                     "Small messages only (up to 4096 floats): checks every group's wiring in a "
                     "fraction of the time, not the large-message paths");
  selftest->footer(std::string("Checks a new cluster or node before a long job: every rank runs\n"
                               "allreduce, reduce-scatter, allgather, broadcast, send/recv and\n"
                               "barrier in the world, DP, TP and PP groups and compares exactly.\n"
                               "Example:\n  trainctl selftest job.yaml --set parallel.dp=4\n\n") +
                   kClusterHelp + "\n\n" + kExitCodes);

  CLI::App* validate = app.add_subcommand(
      "validate", "Check a job spec and show the resolved setup and rank map (starts nothing)");
  add_job(validate);
  ClusterOptions validate_cluster;
  validate_cluster.add_to(validate, false);
  validate->footer(
      "Example:\n  trainctl validate job.yaml --set parallel.tp=2 --nnodes 2\n\n"
      "Prints the model and batch arithmetic, a memory estimate and which node, local slot\n"
      "and (dp, tp, pp) coordinates each rank gets. Exit code 2 when the spec is invalid.");

  CLI::App* plan = app.add_subcommand(
      "plan", "Draw the job's pipeline schedule and its bubble (simulated; starts nothing)");
  add_job(plan);
  int plan_micro_batches = 0;
  CLI::Option* plan_micro_batches_opt =
      plan->add_option("--micro-batches", plan_micro_batches,
                       "Micro-batches per step (default: the spec's gradient accumulation "
                       "steps, global_batch_size / (micro_batch_size × dp))")
          ->check(at_least(1));
  bool plan_json = false;
  plan->add_flag("--json", plan_json,
                 "Print the plan as one JSON object (memory_mb: each rank's estimate by part)");
  std::string plan_cluster;
  plan->add_option("--cluster", plan_cluster,
                   "Also predict step time, tokens/s, MFU and where the time goes on this "
                   "cluster file (configs/clusters/; docs/cost-model.md)");
  plan->footer(
      "Example:\n  trainctl plan job.yaml --set parallel.pp=4 --set parallel.schedule=gpipe\n"
      "  trainctl plan job.yaml --set parallel.schedule=interleaved "
      "--set parallel.virtual_stages=2\n\n"
      "Prints each rank's (dp, tp, pp) coordinates and the transformer blocks of each pipeline\n"
      "stage (and of each chunk, for interleaved), then simulates parallel.pp stages running\n"
      "parallel.schedule (gpipe | 1f1b | interleaved) with forward = 1 and backward = 2 time\n"
      "units per stage and free communication: the bubble (idle share of the stages' time)\n"
      "next to its closed form, the peak activations each stage holds, and one timeline line\n"
      "per stage, and each rank's memory: parameters, gradients, optimizer state,\n"
      "activations (the micro-batches its schedule keeps in flight, after recomputation),\n"
      "communication buffers, workspace and total. Exit code 2 when the spec is invalid.");

  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  trainctl::app::BenchCommArgs bench_args;
  std::string device = "cpu";
  std::string bench_run_dir;
  CLI::App* bench_comm = bench->add_subcommand(
      "comm", "Collective bandwidth (nccl-tests style) between workers on this node");
  bench_comm->add_option("--world", bench_args.world, "Number of workers")
      ->capture_default_str()
      ->check(at_least(1));
  bench_comm->add_option("--device", device, "Device backend")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu"}));
  bench_comm->add_option("--min-bytes", bench_args.min_bytes, "Smallest message (e.g. 4K)")
      ->capture_default_str()
      ->transform(CLI::AsSizeValue(false));
  bench_comm->add_option("--max-bytes", bench_args.max_bytes, "Largest message (e.g. 64M)")
      ->capture_default_str()
      ->transform(CLI::AsSizeValue(false));
  bench_comm->add_option("--iters", bench_args.iters, "Timed iterations per size")
      ->capture_default_str()
      ->check(at_least(1));
  bench_comm
      ->add_option("--allreduce-algo", bench_args.allreduce_algo,
                   "Allreduce algorithm, as runtime.allreduce_algo in a job spec: auto "
                   "(shared memory between workers on one host), or a TCP one to compare")
      ->capture_default_str()
      ->check([](const std::string& name) {
        try {
          trainctl::comm::parse_allreduce_algo(name);  // the one list of algorithm names
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  bench_comm->add_option("--run-dir", bench_run_dir,
                         "Keep the run directory (worker logs) here; default: a temporary "
                         "directory, removed after a successful run (several nodes: required, "
                         "on a file system every node shares)");
  ClusterOptions bench_cluster;
  bench_cluster.add_to(bench_comm, true);
  bench_comm->footer(
      "Example:\n  trainctl bench comm --world 4 --min-bytes 1K --max-bytes 16M\n"
      "  trainctl bench comm --allreduce-algo ring     # the same over TCP only\n\n"
      "Columns: message size, time per call (slowest rank's median), algorithm bandwidth\n"
      "(size / time), bus bandwidth (comparable across world sizes, as nccl-tests) and the\n"
      "algorithm each size used: shm (shared memory, workers on one host), direct or ring\n"
      "(over TCP), hierarchical (shared memory within hosts, TCP across them).\n\n"
      "Several nodes: --world workers in all, one launcher per node with the same --nnodes,\n"
      "--master-addr, --master-port, --token and a shared --run-dir (or under Slurm).");

  CLI::App* inspect = app.add_subcommand("inspect", "Look inside a job's computation");
  inspect->require_subcommand(1);
  std::string inspect_out;
  CLI::App* inspect_step = inspect->add_subcommand(
      "step",
      "Run the job's first training step on one worker and write all of its inputs "
      "and results");
  add_job(inspect_step);
  inspect_step->add_option("--out", inspect_out, "Directory for the files (created)")->required();
  std::string inspect_from;
  inspect_step->add_option("--from", inspect_from,
                           "Start from a checkpoint's parameters (a step directory, checkpoints/ "
                           "or a run directory; any dp/tp/pp layout) instead of the initial ones");
  inspect_step->footer(
      "Example:\n  trainctl inspect step job.yaml --out step0\n"
      "  /usr/bin/python3 tests/torch/check_against_torch.py step0   # compare with PyTorch\n\n"
      "Writes weights.safetensors (initial parameters, nanoGPT names), batch.safetensors\n"
      "(tokens, targets), grads.safetensors (gradients of the mean loss of the first\n"
      "micro-batch), updated.safetensors (after clipping and one optimizer step) and\n"
      "step.json (loss, gradient norm, model and optimizer settings).");

  CLI::App* ckpt = app.add_subcommand("ckpt", "Show, verify or export a checkpoint");
  ckpt->require_subcommand(1);
  std::string ckpt_path, ckpt_out;
  bool ckpt_tensors = false, ckpt_json = false;
  auto add_ckpt = [&](CLI::App* cmd) {
    cmd->add_option("checkpoint", ckpt_path,
                    "A step directory (run_dir/checkpoints/step_NNNNNNNN), a checkpoints/ "
                    "directory or a run directory (then its latest complete checkpoint)")
        ->required();
  };
  CLI::App* ckpt_info = ckpt->add_subcommand(
      "info", "What a checkpoint holds: step, data position, layout, model, files");
  add_ckpt(ckpt_info);
  ckpt_info->add_flag("--tensors", ckpt_tensors,
                      "List every tensor: global shape, how it is split, number of shards");
  ckpt_info->add_flag("--json", ckpt_json, "Print metadata.json instead");
  ckpt_info->footer("Example:\n  trainctl ckpt info runs/gpt-tiny-3d --tensors");
  CLI::App* ckpt_verify = ckpt->add_subcommand(
      "verify", "Recompute every file's checksum and check that every tensor is complete");
  add_ckpt(ckpt_verify);
  ckpt_verify->footer(
      "Example:\n  trainctl ckpt verify runs/gpt-tiny-3d/checkpoints/step_00000100\n"
      "  trainctl ckpt verify runs/gpt-tiny-3d      # every checkpoint, and the newest valid "
      "one\n\n"
      "Checks metadata.json (its own checksum and every field), every file's size and\n"
      "checksum, and that every tensor of the model is whole. Exit code 0 when intact; 2 when\n"
      "anything is truncated, altered, edited or missing (each problem is named on stderr:\n"
      "resume from an older checkpoint with --resume PATH) or the path holds no checkpoint.");
  CLI::App* ckpt_export = ckpt->add_subcommand(
      "export",
      "Write the model as one safetensors file with nanoGPT names (loads in PyTorch), or as a "
      "Hugging Face folder (--format hf)");
  add_ckpt(ckpt_export);
  std::string ckpt_format = "nanogpt", ckpt_tokenizer;
  ckpt_export->add_option("--out", ckpt_out,
                          "The safetensors file to write; with --format hf the folder (default: "
                          "the run directory's hf/)");
  ckpt_export
      ->add_option("--format", ckpt_format,
                   "nanogpt: one safetensors file; hf: a folder transformers loads with "
                   "AutoModelForCausalLM.from_pretrained (GPT2LMHeadModel; GPT models only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"nanogpt", "hf"}));
  bool ckpt_force = false;
  ckpt_export->add_flag("--force", ckpt_force,
                        "--format hf: write into an --out folder that already holds files "
                        "(without it such a folder is refused)");
  ckpt_export->add_option("--tokenizer", ckpt_tokenizer,
                          "--format hf: the tokenizer files to include (tokenizer.json or "
                          "vocab.json); default: those of the run's `data prepare` directory");
  ckpt_export->footer(
      "Example:\n  trainctl ckpt export runs/gpt-tiny-3d --out model.safetensors\n\n"
      "Reassembles every parameter from the shards of whatever dp/tp/pp layout wrote the\n"
      "checkpoint, with its global shape (nn.Linear's [out, in]) and nanoGPT's name\n"
      "(transformer.h.0.attn.c_attn.weight, ...); lm_head.weight is tied to\n"
      "transformer.wte.weight and not stored. Optimizer state is left out. --out must lie\n"
      "outside every checkpoint directory; a damaged or incomplete checkpoint is refused\n"
      "(exit 2) and nothing is written.\n\n"
      "--format hf writes DIR/model.safetensors (GPT2LMHeadModel names; the attn.c_attn,\n"
      "attn.c_proj, mlp.c_fc and mlp.c_proj weights transposed to Conv1D's [in, out]),\n"
      "DIR/config.json (GPT2Config) and the tokenizer files (tokenizer.json and\n"
      "tokenizer_config.json, which AutoTokenizer loads), e.g.\n"
      "  trainctl ckpt export runs/gpt-bpe --format hf     # -> runs/gpt-bpe/hf/\n"
      "  python -c \"from transformers import AutoModelForCausalLM as M; "
      "M.from_pretrained('runs/gpt-bpe/hf')\"\n"
      "DIR may not be the run directory or inside it (but its hf/), and must be new or\n"
      "empty unless --force (exit 2).");
  ckpt->footer(
      "Checkpoints are written by `trainctl train` to run_dir/checkpoints/step_NNNNNNNN/ (one\n"
      "safetensors shard per rank plus metadata.json with checksums); checkpoints/latest names\n"
      "the newest complete one.\n"
      "Example:\n  trainctl ckpt verify runs/gpt-tiny-3d && trainctl ckpt export runs/gpt-tiny-3d "
      "--out model.safetensors");

  CLI::App* eval_cmd = app.add_subcommand(
      "eval", "Validation loss and bits per byte of a checkpoint on the job's data");
  add_job(eval_cmd);
  std::string eval_from;
  eval_cmd
      ->add_option("--from", eval_from,
                   "A checkpoint: a step_N directory, a checkpoints/ or a run directory (its "
                   "newest valid checkpoint); any dp/tp/pp/ZeRO layout")
      ->required();
  eval_cmd->footer(
      "Example:\n  trainctl eval job.yaml --from runs/job\n"
      "  trainctl eval job.yaml --from runs/job/checkpoints/step_00000200 --set parallel.tp=2\n\n"
      "Launches the job's layout on this node (workers in eval mode; logs in run_dir/eval/),\n"
      "loads the checkpoint "
      "into it and evaluates training.eval_batches validation batches: the same batches a\n"
      "training run evaluates, so the loss equals the val_loss metrics.jsonl logged at that\n"
      "step. Prints\n"
      "  eval step N: val_loss L, bits per byte B (T tokens, Y bytes)\n"
      "with B = L * T / (Y * ln 2): Y = T for byte-level data; for `data prepare` data, the\n"
      "bytes of the target tokens' text under its tokenizer. Exit code 2 for a missing or\n"
      "damaged checkpoint or one of another model.");
  CLI::App* sample_cmd = app.add_subcommand(
      "sample", "Generate text from a checkpoint (KV-cache decoding, one process, CPU or GPU)");
  trainctl::app::SampleArgs sample_args;
  sample_cmd
      ->add_option("from", sample_args.from,
                   "A run directory (its newest valid checkpoint), its checkpoints/ or a step_N")
      ->required();
  sample_cmd->add_option("--prompt", sample_args.prompt, "Text to continue")->required();
  sample_cmd->add_option("--max-new-tokens", sample_args.max_new_tokens, "Tokens to generate")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  sample_cmd->add_option("--temperature", sample_args.temperature, "Softmax temperature; 0: greedy")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  sample_cmd->add_option("--top-k", sample_args.top_k, "Sample among the K most likely (0: all)")
      ->capture_default_str()
      ->check(CLI::Validator(trainctl::app::whole_number, "INT"));
  sample_cmd->add_option("--seed", sample_args.seed, "Random seed (same seed, same text)")
      ->capture_default_str()
      ->check(CLI::Validator(trainctl::app::whole_number, "INT"));
  sample_cmd->add_option("--tokenizer", sample_args.tokenizer,
                         "BPE tokenizer (default: the one `data prepare` copied next to the run's "
                         "data; none: byte-level)");
  sample_cmd->add_option("--threads", sample_args.threads, "Compute threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  sample_cmd->add_option("--device", sample_args.device, "cpu, or cuda (the first visible GPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  sample_cmd->footer(
      "Example:\n  trainctl sample runs/quickstart --prompt \"ROMEO:\" --max-new-tokens 200 "
      "--temperature 0.8 --top-k 40 --seed 1\n\n"
      "Loads the checkpoint on one process whatever dp/tp/pp/ZeRO layout or device wrote it,\n"
      "and decodes on the CPU or, with --device cuda, on the first visible GPU (weights, cache\n"
      "and every op on the device; the same text for a seed up to float rounding). Text is bytes\n"
      "(vocab 256) unless the run's data came from `trainctl data prepare` (its tokenizer is\n"
      "used) or --tokenizer is given. The prompt and the sample go to stdout. Past the model's\n"
      "max_seq_len the context keeps its last max_seq_len/2 tokens. Exit code 2 for a missing\n"
      "or non-GPT checkpoint, an empty prompt without an end-of-text token to start from, a\n"
      "prompt token outside the model's vocabulary, or --device cuda without a usable GPU.");
  CLI::App* report = app.add_subcommand(
      "report", "One HTML page of a run's curves, throughput, step time, rank map and timeline");
  trainctl::app::ReportArgs report_args;
  report->add_option("run_dir", report_args.runs, "Run directories (several: curves overlaid)")
      ->required();
  report->add_option("--out", report_args.out, "The HTML file to write")->required();
  report->add_option("--x", report_args.x, "x axis of the curves: step or tokens (seen so far)")
      ->capture_default_str()
      ->check(CLI::IsMember({"step", "tokens"}));
  report->add_option("--png", report_args.png,
                     "Also write a picture of the page (needs a headless chromium)");
  report
      ->add_option("--peak-tflops", report_args.peak_tflops,
                   "Each worker's peak TFLOP/s: adds MFU (model FLOP/s / (workers x peak))")
      ->check(CLI::PositiveNumber);
  report->footer(
      "Example:\n  trainctl report runs/quickstart --out report.html\n"
      "  trainctl report runs/a runs/b --out compare.html --x tokens --png compare.png\n\n"
      "One self-contained HTML file (inline SVG, no scripts, works offline): loss and\n"
      "validation loss (runs overlaid), tokens/s, model FLOP/s (and MFU with --peak-tflops),\n"
      "the step-time breakdown (compute, exposed communication, pipeline bubble, DP wait),\n"
      "memory and the fp16 loss scale when logged, the rank map, and a Gantt chart of every\n"
      "rank when the run was profiled (trace.json, `train --profile A:B`). Reads a running\n"
      "job too: an unfinished last line of metrics.jsonl is skipped. Exit code 2 when a\n"
      "directory is not a run or has no metrics yet, or --png finds no chromium.");
  CLI::App* data_cmd =
      app.add_subcommand("data", "Tokenize text into training data with a BPE tokenizer");
  data_cmd->require_subcommand(1);
  trainctl::app::DataPrepareArgs prepare_args;
  CLI::App* data_prepare = data_cmd->add_subcommand(
      "prepare", "Tokenize text (a file, a folder of them, or JSONL) into llm.c token shards");
  data_prepare
      ->add_option("--tokenizer", prepare_args.tokenizer,
                   "A Hugging Face tokenizer.json (byte-level BPE), GPT-2's vocab.json "
                   "(merges.txt beside it), or a directory holding either")
      ->required();
  data_prepare
      ->add_option("--input", prepare_args.input,
                   "A UTF-8 text file, a *.jsonl file (a string field \"text\" per line), or a "
                   "directory of *.txt / *.jsonl files")
      ->required();
  data_prepare->add_option("--out", prepare_args.out, "Output directory (created)")->required();
  data_prepare
      ->add_option("--val-fraction", prepare_args.val_fraction,
                   "Share of the tokens (the tail) held out for validation")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.5));
  data_prepare
      ->add_option("--threads", prepare_args.threads, "Encoding threads (default: all cores)")
      ->check(CLI::PositiveNumber);
  data_prepare
      ->add_option("--shard-tokens", prepare_args.shard_tokens, "Tokens per .bin file at most")
      ->capture_default_str()
      ->check(CLI::Range(1LL, 2147483647LL));
  data_prepare->footer(
      "Example:\n  trainctl data prepare --tokenizer tokenizer.json --input corpus/ --out "
      "data/corpus\n\n"
      "Writes DIR/train_NNNNNN.bin and DIR/val_NNNNNN.bin (llm.c format: uint16 tokens, so a\n"
      "vocabulary of at most 65536), a copy of the tokenizer files and DIR/manifest.json\n"
      "(token counts, vocab_size, tokenizer hash, shards). Documents are separated by the\n"
      "end-of-text token when the vocabulary has one. Train on it with\n"
      "  data: {type: tokens, path: DIR}\n"
      "and model.vocab_size at least the tokenizer's. Exit code 2 for an unsupported or\n"
      "malformed tokenizer, an input that is empty or not UTF-8.");
  std::string data_tokenizer, data_input, data_out;
  int data_threads = 0;
  CLI::App* data_encode = data_cmd->add_subcommand(
      "encode", "Encode one UTF-8 text file into token ids (raw little-endian uint32)");
  CLI::App* data_decode =
      data_cmd->add_subcommand("decode", "Decode token ids (raw little-endian uint32) into text");
  for (CLI::App* cmd : {data_encode, data_decode}) {
    cmd->add_option("--tokenizer", data_tokenizer, "tokenizer.json, vocab.json or a directory")
        ->required();
    cmd->add_option("--input", data_input, "The file to read")->required();
    cmd->add_option("--out", data_out, "The file to write")->required();
  }
  data_encode->add_option("--threads", data_threads, "Encoding threads (default: all cores)")
      ->check(CLI::PositiveNumber);
  data_encode->footer(
      "Example:\n  trainctl data encode --tokenizer tokenizer.json --input a.txt --out a.ids "
      "--threads 1\n\nPrints the encoding speed (MB/s) on stderr. The ids equal those of\n"
      "Hugging Face tokenizers' encode(text, add_special_tokens=False).");

  CLI::App* worker = app.add_subcommand("worker", "Run one worker (started by the launcher)");
  worker->group("");  // hidden: users never type it

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? trainctl::kExitOk : trainctl::kExitBadInput;
  }

  if (worker->parsed()) return trainctl::worker::run_worker();
  // One CPU kernel path for the whole job: a bad TRAINCTL_CPU_ISA stops here, before any
  // worker starts (the launcher passes its choice on to its workers).
  trainctl::app::check_cpu_kernels();

  trainctl::log::init(-1, 0);
  if (train->parsed() && !profile.empty()) {
    const size_t colon = profile.find(':');
    overrides.push_back("logging.profile_steps=[" + profile.substr(0, colon) + ", " +
                        profile.substr(colon + 1) + "]");
  }
  launch_args.overrides = overrides;
  if (train->parsed() || selftest->parsed()) {
    (train->parsed() ? train_cluster : selftest_cluster).fill(launch_args);
    return train->parsed() ? trainctl::app::cmd_train(launch_args)
                           : trainctl::app::cmd_selftest(launch_args, repeat, quick);
  }
  if (validate->parsed()) {
    return trainctl::app::cmd_validate(launch_args.job, overrides, validate_cluster.flags());
  }
  if (plan->parsed()) {
    std::optional<int> micro_batches;
    if (plan_micro_batches_opt->count()) micro_batches = plan_micro_batches;
    return trainctl::app::cmd_plan(launch_args.job, overrides, micro_batches, plan_json,
                                   plan_cluster);
  }
  if (inspect_step->parsed()) {
    std::optional<std::filesystem::path> from;
    if (!inspect_from.empty()) from = inspect_from;
    return trainctl::app::cmd_inspect_step(launch_args.job, overrides, inspect_out, from);
  }
  if (ckpt_info->parsed()) return trainctl::app::cmd_ckpt_info(ckpt_path, ckpt_tensors, ckpt_json);
  if (ckpt_verify->parsed()) return trainctl::app::cmd_ckpt_verify(ckpt_path);
  if (ckpt_export->parsed()) {
    if (ckpt_format == "hf") {
      return trainctl::app::cmd_ckpt_export_hf(ckpt_path, ckpt_out, ckpt_tokenizer, ckpt_force);
    }
    if (ckpt_out.empty()) throw trainctl::InputError("ckpt export: --out FILE is required");
    if (!ckpt_tokenizer.empty() || ckpt_force) {
      throw trainctl::InputError("ckpt export: --tokenizer and --force go with --format hf only");
    }
    return trainctl::app::cmd_ckpt_export(ckpt_path, ckpt_out);
  }
  if (data_prepare->parsed()) return trainctl::app::cmd_data_prepare(prepare_args);
  if (data_encode->parsed()) {
    return trainctl::app::cmd_data_encode(data_tokenizer, data_input, data_out, data_threads);
  }
  if (data_decode->parsed()) {
    return trainctl::app::cmd_data_decode(data_tokenizer, data_input, data_out);
  }
  if (report->parsed()) return trainctl::app::cmd_report(report_args);
  if (sample_cmd->parsed()) return trainctl::app::cmd_sample(sample_args);
  if (eval_cmd->parsed()) return trainctl::app::cmd_eval(launch_args, eval_from);
  if (bench_comm->parsed()) {
    if (!bench_run_dir.empty()) bench_args.run_dir = bench_run_dir;
    trainctl::app::LaunchArgs cluster_args;
    bench_cluster.fill(cluster_args);
    bench_args.cluster = cluster_args.cluster;
    bench_args.token = cluster_args.token;
    bench_args.node_addr = cluster_args.node_addr;
    return trainctl::app::cmd_bench_comm(bench_args);
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
