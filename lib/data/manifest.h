#pragma once
// manifest.json of a prepared token directory (`trainctl data prepare`): which llm.c-layout token
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
  bool operator==(const ShardEntry&) const = default;
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
  bool operator==(const TokenManifest&) const = default;
};

inline constexpr const char* kManifestName = "manifest.json";

// Whether `path` is a directory (then it must hold manifest.json to be token data).
bool is_token_directory(const std::filesystem::path& path);

// Reads and checks DIR/manifest.json (parse_manifest). Throws InputError
// "<dir>/manifest.json: <problem>".
TokenManifest read_manifest(const std::filesystem::path& dir);

// Writes DIR/manifest.json atomically.
void write_manifest(const std::filesystem::path& dir, const TokenManifest& manifest);

// The text write_manifest writes, and its inverse: parse_manifest(format_manifest(m)) == m
// for every manifest parse_manifest accepts. Checked: every field present with its type;
// vocab_size in 1..2^31-1 (shards hold uint16 ids up to 65536, uint32 beyond); eot_id, when set,
// inside the vocabulary; a tokenizer hash of the form "fnv1a64:<16 hex digits>"; shard and
// tokenizer names plain file names in the directory, each listed once (a shard listed twice would
// be trained twice; a validation shard that is also a training shard would be validated on data
// trained on); at least one training shard. Throws InputError "<where>: <field>: <problem>".
std::string format_manifest(const TokenManifest& manifest);
TokenManifest parse_manifest(const std::string& text, const std::string& where);

// The tokenizer file of prepared directory `dir` (to pass to load_tokenizer), after checking
// that the files load_tokenizer would read from it hash to manifest.tokenizer_hash (reads
// them, a few MB at most; no parsing). Empty when the manifest lists no tokenizer file.
// Throws InputError naming the file when it is missing or replaced: its ids would not be
// the shards' ids.
std::filesystem::path verified_tokenizer_file(const std::filesystem::path& dir,
                                              const TokenManifest& manifest);

}  // namespace trainctl::data
