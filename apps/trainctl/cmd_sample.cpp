// `trainctl sample RUN --prompt TEXT`: options and help; the decoding is in sample_command.cpp.
#include "cli.h"
#include "sample_command.h"

namespace trainctl::app {

void add_sample_command(CLI::App& app, Dispatches& out) {
  auto o = std::make_shared<SampleArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sample", "Generate text from a checkpoint (KV-cache decoding, one process, CPU or GPU)");
  cmd->add_option("from", o->from,
                  "A run directory (its newest valid checkpoint), its checkpoints/ or a step_N")
      ->required();
  cmd->add_option("--prompt", o->prompt, "Text to continue")->required();
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "Tokens to generate")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--temperature", o->temperature, "Softmax temperature; 0: greedy")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", o->top_k, "Sample among the K most likely (0: all)")
      ->capture_default_str()
      ->check(CLI::Validator(whole_number, "INT"));
  cmd->add_option("--seed", o->seed, "Random seed (same seed, same text)")
      ->capture_default_str()
      ->check(CLI::Validator(whole_number, "INT"));
  cmd->add_option("--tokenizer", o->tokenizer,
                  "BPE tokenizer (default: the one `data prepare` copied next to the run's "
                  "data; none: byte-level)");
  cmd->add_option("--threads", o->threads, "Compute threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--device", o->device, "cpu, or cuda (the first visible GPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->footer(
      "Example:\n  trainctl sample runs/quickstart --prompt \"ROMEO:\" --max-new-tokens 200 "
      "--temperature 0.8 --top-k 40 --seed 1\n\n"
      "Loads the checkpoint on one process whatever dp/tp/pp/ZeRO layout or device wrote it,\n"
      "and decodes on the CPU or, with --device cuda, on the first visible GPU (weights, cache\n"
      "and every op on the device; the same text for a seed up to float rounding). Text is bytes\n"
      "(vocab 256) unless the run's data came from `trainctl data prepare` (its tokenizer is\n"
      "used) or --tokenizer is given. The prompt and the sample go to stdout. Past the model's\n"
      "max_seq_len the context keeps its last max_seq_len/2 tokens. Works for gpt and llama\n"
      "checkpoints. Exit code 2 for a missing or damaged checkpoint, an empty prompt without\n"
      "an end-of-text token to start from, a prompt token outside the model's vocabulary, or\n"
      "--device cuda without a usable GPU.");
  out.push_back({cmd, [o] { return cmd_sample(*o); }});
}

}  // namespace trainctl::app
