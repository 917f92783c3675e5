#pragma once
// `trainctl sample`: text from a checkpoint, decoded one token at a time with a key/value
// cache (model/gpt_decode.h) in one process, on the CPU or one GPU, whatever layout or
// device trained it.
#include <cstdint>
#include <filesystem>
#include <string>

namespace trainctl::app {

struct SampleArgs {
  std::filesystem::path from;       // a run directory, checkpoints/ directory or step_N
  std::filesystem::path tokenizer;  // BPE tokenizer (default: the run's prepared data's)
  std::string prompt;
  int max_new_tokens = 200;
  double temperature = 0.8;
  int top_k = 0;
  uint64_t seed = 1337;
  int threads = 1;
  std::string device = "cpu";  // cpu | cuda (GPU 0 of the visible ones)
};

// Throws InputError naming the option and its range when a number is out of it:
// --temperature not a finite number in [0, 100] (NaN included), --max-new-tokens outside
// [0, 1000000], --top-k negative, --threads outside [1, 256].
void check_sample_args(const SampleArgs& args);

// A CLI11 check (main.cpp) for the text of a whole-number option: digits only, so "-1"
// neither wraps around in the unsigned --seed nor gets an unreadable range message; returns
// "" when the text is fine, else the reason.
std::string whole_number(std::string& text);

// Prints the prompt followed by the sampled text on stdout (after check_sample_args). Throws
// InputError (exit 2) for a missing checkpoint (or a model kind sampling refuses), an empty prompt
// without a BOS token, a prompt token outside the model's vocabulary, or --device cuda where no GPU
// can be used.
int cmd_sample(const SampleArgs& args);

}  // namespace trainctl::app
