// Fuzz target: the token-file reader (data/token_file.h: llm.c header with uint16 or uint32
// ids, or raw uint16) and the pre-launch checks built on it (data/file_checks.h). The input
// is the file's bytes.
// Checks beyond "no crash": an accepted file's token count fits inside the file (so no
// reader can run past the mapping), and every token is readable and below max_token()+1.
#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "data/file_checks.h"
#include "data/token_file.h"
#include "fuzz_support.h"
#include "util/error.h"

using namespace trainctl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemoryFile file;  // one memfd per process, rewritten for each input
  const std::string path = file.write(data, size);
  try {
    const data::TokenFile tokens(path);
    const size_t header =
        tokens.format().starts_with("llm.c") ? data::TokenFile::kLlmcHeaderBytes : 0;
    fuzz::require(tokens.size() > 0, "accepted an empty token file");
    const size_t width = static_cast<size_t>(tokens.bytes_per_token());
    fuzz::require(width == 2 || width == 4, "a token width other than 2 or 4 bytes");
    fuzz::require(tokens.size() <= (size - header) / width, "token count exceeds the file");
    const uint32_t max = tokens.max_token();
    uint32_t seen = 0;
    for (size_t i = 0; i < tokens.size(); ++i)
      seen = tokens.token(i) > seen ? tokens.token(i) : seen;
    fuzz::require(seen == max, "max_token() disagrees with a scan of the tokens");

    // The checks `validate` runs, at a vocabulary the data may or may not fit.
    const int vocab = 1 + (size > 0 ? data[0] : 0) * 256;
    try {
      fuzz::require(data::check_token_ids(tokens, vocab) < static_cast<uint32_t>(vocab),
                    "check_token_ids passed an id >= vocab");
    } catch (const InputError&) {
      fuzz::require(max >= static_cast<uint32_t>(vocab), "check_token_ids refused ids that fit");
    }
    data::DatasetOptions options;
    options.type = "tokens";
    options.path = path;
    options.vocab_size = 65536;
    options.seq_len = 4;
    options.val_fraction = 0.25;
    try {
      data::check_split_sizes(tokens.size(), options);
      const std::string line = data::check_dataset_file(options);
      fuzz::require(!line.empty(), "check_dataset_file accepted a file without describing it");
    } catch (const InputError&) {
    }
  } catch (const InputError&) {
  }
  return 0;
}
