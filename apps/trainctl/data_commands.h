#pragma once
// `trainctl data prepare|encode|decode`: text to training tokens with a BPE tokenizer
// (lib/tokenizer, lib/data/prepare.h). Each returns the process exit code and lets
// InputError propagate (main.cpp maps it to 2).
#include <filesystem>

namespace trainctl::app {

struct DataPrepareArgs {
  std::filesystem::path tokenizer, input, out;
  double val_fraction = 0.005;
  int threads = 0;  // 0: every core
  long long shard_tokens = 100'000'000;
};
int cmd_data_prepare(const DataPrepareArgs& args);

// One UTF-8 file to uint32 token ids, with the encoding speed on stderr.
int cmd_data_encode(const std::filesystem::path& tokenizer, const std::filesystem::path& input,
                    const std::filesystem::path& out, int threads);
// uint32 token ids back to text.
int cmd_data_decode(const std::filesystem::path& tokenizer, const std::filesystem::path& input,
                    const std::filesystem::path& out);

}  // namespace trainctl::app
