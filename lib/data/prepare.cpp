#include "data/prepare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

#include "data/input_documents.h"
#include "data/manifest.h"
#include "data/token_file.h"
#include "data/tokenize_file.h"
#include "tokenizer/parallel_encode.h"
#include "util/error.h"

namespace trainctl::data {

namespace {

namespace fs = std::filesystem;

constexpr size_t kChunkBytes = 1 << 20;

void check_options(const PrepareOptions& o) {
  if (!(o.val_fraction >= 0.0 && o.val_fraction <= 0.5)) {
    throw InputError("--val-fraction " + std::to_string(o.val_fraction) + " is outside [0, 0.5]");
  }
  if (o.shard_tokens < 1 || o.shard_tokens > 0x7fffffff) {
    throw InputError("--shard-tokens must be between 1 and 2^31-1 (llm.c's count is int32)");
  }
  std::error_code ec;
  const fs::file_status st = fs::status(o.out_dir, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st))
      throw InputError(o.out_dir.string() + ": exists and is not a directory");
    if (!fs::is_empty(o.out_dir, ec) && !fs::exists(o.out_dir / kManifestName, ec)) {
      throw InputError(o.out_dir.string() +
                       ": is a non-empty directory without manifest.json; give an empty or new "
                       "directory (a directory prepared before is replaced)");
    }
  }
}

std::vector<ShardEntry> write_split(const fs::path& dir, const char* split,
                                    const std::vector<int32_t>& tokens, size_t begin, size_t end,
                                    int64_t shard_tokens, int64_t vocab_size) {
  std::vector<ShardEntry> shards;
  for (size_t pos = begin, n = 0; pos < end; ++n) {
    const size_t count = std::min<size_t>(static_cast<size_t>(shard_tokens), end - pos);
    char name[64];
    std::snprintf(name, sizeof name, "%s_%06zu.bin", split, n);
    write_token_file(dir / name, tokens.data() + pos, count, vocab_size);
    shards.push_back({name, static_cast<int64_t>(count)});
    pos += count;
  }
  return shards;
}

// The documents' ids, concatenated in input order with the end-of-text token between
// documents (when the vocabulary has one). Long documents are encoded in chunks, so every
// thread has work and progress moves.
std::vector<int32_t> encode_input(const tokenizer::Tokenizer& tok, const InputDocuments& input,
                                  int threads, PrepareProgress& state,
                                  const std::function<void(const PrepareProgress&)>& progress) {
  std::vector<std::string_view> pieces;
  std::vector<bool> starts_document;
  for (const std::string& text : input.texts) {
    std::vector<size_t> cuts = tokenizer::chunk_boundaries(tok, text, kChunkBytes);
    cuts.insert(cuts.begin(), 0);
    cuts.push_back(text.size());
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      pieces.push_back(std::string_view(text).substr(cuts[i], cuts[i + 1] - cuts[i]));
      starts_document.push_back(i == 0);
    }
  }
  const auto ids = tokenizer::encode_documents(tok, pieces, threads, [&](size_t bytes) {
    state.done_bytes += bytes;
    if (progress) progress(state);
  });
  std::vector<int32_t> tokens;
  size_t total = 0;
  for (const auto& v : ids) total += v.size() + 1;
  tokens.reserve(total);
  const auto eot = tok.eot_id();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (starts_document[i] && i > 0 && eot) tokens.push_back(static_cast<int32_t>(*eot));
    tokens.insert(tokens.end(), ids[i].begin(), ids[i].end());
  }
  return tokens;
}

// The files an earlier `data prepare` left in the directory (its manifest's), to remove
// those the new one does not write again.
std::set<std::string> files_of_earlier_run(const fs::path& dir) {
  std::set<std::string> files;
  std::error_code ec;
  if (!fs::exists(dir / kManifestName, ec)) return files;
  TokenManifest old;
  try {
    old = read_manifest(dir);
  } catch (const InputError& e) {
    // "Prepare it again" would loop: say how to get out.
    throw InputError(std::string(e.what()) + ". --out " + dir.string() +
                     " holds that manifest: remove the directory or give another --out");
  }
  for (const auto* split : {&old.train, &old.val}) {
    for (const ShardEntry& s : *split) files.insert(s.file);
  }
  for (const std::string& f : old.tokenizer_files) files.insert(f);
  return files;
}

void copy_tokenizer(const tokenizer::LoadedTokenizer& tok, const fs::path& dir, TokenManifest& m) {
  m.vocab_size = tok.tokenizer.vocab_size();
  m.tokenizer_kind = tok.tokenizer.kind();
  m.tokenizer_hash = tok.hash;
  m.split_pattern = tokenizer::to_string(tok.tokenizer.pattern());
  if (auto eot = tok.tokenizer.eot_id()) m.eot_id = *eot;
  std::error_code ec;
  for (const fs::path& f : tok.files) {
    const std::string name = f.filename().string();
    fs::copy_file(f, dir / name, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      throw InputError((dir / name).string() + ": cannot copy the tokenizer: " + ec.message());
    }
    m.tokenizer_files.push_back(name);
  }
}

std::string summary_line(const fs::path& dir, const TokenManifest& m, size_t bytes, size_t tokens) {
  char line[512];
  std::snprintf(line, sizeof line,
                "%s: %lld documents, %zu bytes -> %zu tokens (%.2f bytes/token); train %lld "
                "tokens in %zu shard%s, val %lld tokens in %zu shard%s; vocab_size %lld",
                (dir / kManifestName).string().c_str(), static_cast<long long>(m.documents), bytes,
                tokens, static_cast<double>(bytes) / static_cast<double>(tokens),
                static_cast<long long>(m.train_tokens()), m.train.size(),
                m.train.size() == 1 ? "" : "s", static_cast<long long>(m.val_tokens()),
                m.val.size(), m.val.size() == 1 ? "" : "s", static_cast<long long>(m.vocab_size));
  return line;
}

}  // namespace

PrepareSummary prepare_tokens(const tokenizer::LoadedTokenizer& tok, const PrepareOptions& o,
                              const std::function<void(const PrepareProgress&)>& progress) {
  check_options(o);
  const InputDocuments input = read_input_documents(o.input);
  PrepareProgress state{0, input.bytes, 0};
  const std::vector<int32_t> tokens =
      encode_input(tok.tokenizer, input, o.threads, state, progress);
  if (tokens.empty()) throw InputError(o.input.string() + ": encodes to no tokens");
  state.tokens = tokens.size();
  if (progress) progress(state);

  const auto n_val =
      static_cast<size_t>(std::floor(static_cast<double>(tokens.size()) * o.val_fraction));
  const size_t n_train = tokens.size() - n_val;
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) throw InputError(o.out_dir.string() + ": cannot create the directory: " + ec.message());
  std::set<std::string> old_files = files_of_earlier_run(o.out_dir);

  TokenManifest m;
  m.input = fs::absolute(o.input).lexically_normal().string();
  m.documents = static_cast<int64_t>(input.texts.size());
  m.input_bytes = static_cast<int64_t>(input.bytes);
  m.val_fraction = o.val_fraction;
  const int64_t vocab = tok.tokenizer.vocab_size();
  m.train = write_split(o.out_dir, "train", tokens, 0, n_train, o.shard_tokens, vocab);
  m.val = write_split(o.out_dir, "val", tokens, n_train, tokens.size(), o.shard_tokens, vocab);
  copy_tokenizer(tok, o.out_dir, m);
  write_manifest(o.out_dir, m);
  for (const auto* split : {&m.train, &m.val}) {
    for (const ShardEntry& s : *split) old_files.erase(s.file);
  }
  for (const std::string& f : m.tokenizer_files) old_files.erase(f);
  for (const std::string& f : old_files) fs::remove(o.out_dir / f, ec);
  return {m.train_tokens(), m.val_tokens(), summary_line(o.out_dir, m, input.bytes, tokens.size())};
}

}  // namespace trainctl::data
