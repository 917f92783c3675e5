#pragma once
// manifest.json of a prepared token directory (`trainctl data prepare`): which llm.c token
// files hold the training and validation tokens, how many each, and the tokenizer that
// made them. `data: {type: tokens, path: DIR}` trains from it.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace trainctl::data {

struct ShardEntry {
  std::string file;  // relative to the directory
  int64_t tokens = 0;
};

struct TokenManifest {
  int64_t vocab_size = 0;      // the tokenizer's: model.vocab_size must be at least this
  std::string tokenizer_kind;  // "tokenizer.json" | "vocab.json + merges.txt"
  std::string tokenizer_hash;  // "fnv1a64:..." of the tokenizer files
  std::vector<std::string> tokenizer_files;  // copies in the directory
  std::string split_pattern;                 // gpt2 | llama3
  std::optional<int64_t> eot_id;             // separates documents, when the vocabulary has one
  std::string input;                         // what was prepared
  int64_t documents = 0;
  int64_t input_bytes = 0;
  double val_fraction = 0;
  std::vector<ShardEntry> train, val;

  int64_t train_tokens() const;
  int64_t val_tokens() const;
};

inline constexpr const char* kManifestName = "manifest.json";

// Whether `path` is a directory (then it must hold manifest.json to be token data).
bool is_token_directory(const std::filesystem::path& path);

// Reads and checks DIR/manifest.json: every field present and in range, shard names plain
// file names inside the directory. Throws InputError "<dir>/manifest.json: <problem>".
TokenManifest read_manifest(const std::filesystem::path& dir);

// Writes DIR/manifest.json atomically.
void write_manifest(const std::filesystem::path& dir, const TokenManifest& manifest);

}  // namespace trainctl::data
