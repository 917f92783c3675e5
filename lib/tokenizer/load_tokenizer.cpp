#include "tokenizer/load_tokenizer.h"

#include <cstdio>

#include "util/error.h"
#include "util/regular_file.h"

namespace trainctl::tokenizer {

namespace {

namespace fs = std::filesystem;

// Llama 3's tokenizer.json is 9 MB; a vocabulary file beyond this is the wrong file.
constexpr uint64_t kMaxTokenizerBytes = 256ull << 20;

std::string read_file(const fs::path& path, const char* what) {
  const RegularFile file(path, what);
  return file.read_all(kMaxTokenizerBytes);
}

std::string hex_hash(uint64_t h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

uint64_t fnv1a64(std::string_view bytes, uint64_t state) {
  for (char c : bytes) {
    state ^= static_cast<unsigned char>(c);
    state *= 0x100000001b3ULL;
  }
  return state;
}

std::vector<fs::path> tokenizer_files(const fs::path& path) {
  std::error_code ec;
  fs::path vocab_path;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(path / "tokenizer.json", ec)) return {path / "tokenizer.json"};
    if (!fs::exists(path / "vocab.json", ec)) {
      throw InputError(path.string() +
                       ": holds neither tokenizer.json nor vocab.json + merges.txt");
    }
    vocab_path = path / "vocab.json";
  } else if (path.filename() == "vocab.json") {
    vocab_path = path;
  } else {
    return {path};
  }
  const fs::path merges_path = vocab_path.parent_path() / "merges.txt";
  if (!fs::exists(merges_path, ec)) {
    throw InputError(vocab_path.string() + ": GPT-2's vocab.json needs merges.txt beside it (" +
                     merges_path.string() + " does not exist)");
  }
  return {vocab_path, merges_path};
}

std::string hash_tokenizer_files(const std::vector<fs::path>& files) {
  uint64_t h = kFnvOffset;
  for (const fs::path& f : files) h = fnv1a64(read_file(f, "tokenizer file"), h);
  return hex_hash(h);
}

LoadedTokenizer load_tokenizer(const fs::path& path) {
  const std::vector<fs::path> files = tokenizer_files(path);
  if (files.size() == 1) {
    const std::string text = read_file(files[0], "tokenizer file");
    TokenizerParts parts = parse_tokenizer_json(text, files[0].string());
    return {Tokenizer(std::move(parts)), files, hex_hash(fnv1a64(text))};
  }
  const std::string vocab = read_file(files[0], "vocabulary file (vocab.json)");
  const std::string merges = read_file(files[1], "merge list (merges.txt)");
  TokenizerParts parts = parse_gpt2_files(vocab, merges, files[0].string(), files[1].string());
  return {Tokenizer(std::move(parts)), files, hex_hash(fnv1a64(merges, fnv1a64(vocab)))};
}

}  // namespace trainctl::tokenizer
