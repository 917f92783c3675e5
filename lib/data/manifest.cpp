#include "data/manifest.h"

#include <nlohmann/json.hpp>
#include <set>

#include "data/token_file.h"
#include "data/tokenize_file.h"
#include "tokenizer/load_tokenizer.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace trainctl::data {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "trainctl-tokens";
constexpr int kVersion = 1;
// uint32 ids held in int32 by the readers.
constexpr int64_t kMaxVocab = 0x7fffffff;
constexpr const char* kPrepareAgain =
    "; the directory was changed after `trainctl data prepare`: prepare it again";

int64_t sum(const std::vector<ShardEntry>& shards) {
  int64_t n = 0;
  for (const ShardEntry& s : shards) n += s.tokens;
  return n;
}

json shards_json(const std::vector<ShardEntry>& shards) {
  json out = json::array();
  for (const ShardEntry& s : shards) out.push_back({{"file", s.file}, {"tokens", s.tokens}});
  return out;
}

// An integer field (a float would be cast, and one beyond int64 is undefined behavior).
int64_t integer(const json& node, const char* key, const std::string& where) {
  const json& v = node.at(key);
  if (!v.is_number_integer()) {
    throw InputError(where + ": " + key + " is " + v.dump() + ", not an integer" + kPrepareAgain);
  }
  return v.get<int64_t>();
}

int64_t integer_or_zero(const json& node, const char* key, const std::string& where) {
  return node.contains(key) ? integer(node, key, where) : 0;
}

bool plain_name(const std::string& name) {
  return !name.empty() && !fs::path(name).has_parent_path() && name != "." && name != "..";
}

void check_header(const json& doc, const std::string& where) {
  if (!doc.is_object() || doc.value("format", std::string()) != kFormat) {
    throw InputError(where + ": not a trainctl token manifest (\"format\" is not \"" +
                     std::string(kFormat) + "\")");
  }
  if (integer(doc, "version", where) != kVersion) {
    throw InputError(where + ": manifest version " + doc.at("version").dump() +
                     " is not supported (this trainctl reads version 1)");
  }
}

bool fnv_hash(const std::string& h) {
  const std::string prefix = "fnv1a64:";
  return h.size() == prefix.size() + 16 && h.rfind(prefix, 0) == 0 &&
         h.find_first_not_of("0123456789abcdef", prefix.size()) == std::string::npos;
}

void read_tokenizer(const json& t, const std::string& where, TokenManifest& m) {
  m.tokenizer_kind = t.at("kind").get<std::string>();
  m.tokenizer_hash = t.at("hash").get<std::string>();
  if (!fnv_hash(m.tokenizer_hash)) {
    throw InputError(where + ": tokenizer.hash '" + m.tokenizer_hash +
                     "' is not \"fnv1a64:<16 hex digits>\"" + kPrepareAgain);
  }
  m.tokenizer_files = t.at("files").get<std::vector<std::string>>();
  m.split_pattern = t.value("split_pattern", std::string());
  if (t.contains("eot_id") && !t.at("eot_id").is_null()) m.eot_id = integer(t, "eot_id", where);
  if (m.eot_id && (*m.eot_id < 0 || *m.eot_id >= m.vocab_size)) {
    throw InputError(where + ": tokenizer.eot_id " + std::to_string(*m.eot_id) +
                     " is outside the vocabulary (vocab_size " + std::to_string(m.vocab_size) +
                     ": ids 0.." + std::to_string(m.vocab_size - 1) + ")" + kPrepareAgain);
  }
}

std::vector<ShardEntry> read_shards(const json& doc, const std::string& split,
                                    const std::string& where) {
  std::vector<ShardEntry> shards;
  for (const json& s : doc.at(split).at("shards")) {
    ShardEntry e{s.at("file").get<std::string>(), integer(s, "tokens", where)};
    if (!plain_name(e.file)) {
      throw InputError(where + ": " + split + ".shards: '" + e.file +
                       "' is not a plain file name in the directory");
    }
    if (e.tokens <= 0) {
      throw InputError(where + ": " + split + ".shards: " + e.file + " has " +
                       std::to_string(e.tokens) + " tokens");
    }
    shards.push_back(std::move(e));
  }
  return shards;
}

// Every file listed once: shards of both splits and the tokenizer's copies.
void check_listed_once(const TokenManifest& m, const std::string& where) {
  std::set<std::string> train;
  for (const ShardEntry& s : m.train) {
    if (!train.insert(s.file).second) {
      throw InputError(where + ": train.shards lists " + s.file +
                       " twice; it would be trained on twice as often as the others. List "
                       "each shard once, or prepare the directory again");
    }
  }
  std::set<std::string> val;
  for (const ShardEntry& s : m.val) {
    if (train.count(s.file) != 0) {
      throw InputError(where + ": val.shards lists " + s.file +
                       ", which is also a training shard; validation on data the model trains "
                       "on measures nothing. Prepare the directory again");
    }
    if (!val.insert(s.file).second) {
      throw InputError(where + ": val.shards lists " + s.file + " twice" + kPrepareAgain);
    }
  }
  std::set<std::string> tok;
  for (const std::string& f : m.tokenizer_files) {
    if (!plain_name(f) || train.count(f) != 0 || val.count(f) != 0 || !tok.insert(f).second) {
      throw InputError(where + ": tokenizer.files: '" + f +
                       "' is not a plain file name listed once, apart from the shards" +
                       kPrepareAgain);
    }
  }
}

}  // namespace

int64_t TokenManifest::train_tokens() const { return sum(train); }
int64_t TokenManifest::val_tokens() const { return sum(val); }

bool is_token_directory(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

std::string format_manifest(const TokenManifest& m) {
  const json doc = {
      {"format", kFormat},
      {"version", kVersion},
      {"vocab_size", m.vocab_size},
      {"tokenizer",
       {{"kind", m.tokenizer_kind},
        {"hash", m.tokenizer_hash},
        {"files", m.tokenizer_files},
        {"split_pattern", m.split_pattern},
        {"eot_id", m.eot_id ? json(*m.eot_id) : json(nullptr)}}},
      {"input", m.input},
      {"documents", m.documents},
      {"input_bytes", m.input_bytes},
      {"total_tokens", m.train_tokens() + m.val_tokens()},
      {"val_fraction", m.val_fraction},
      {"token_format", m.vocab_size <= TokenFile::kUint16Vocab
                           ? "llm.c uint16 (header: 256 int32, magic 20240520, version 1)"
                           : "llm.c uint32 (header: 256 int32, magic 20240520, version 2)"},
      {"train", {{"tokens", m.train_tokens()}, {"shards", shards_json(m.train)}}},
      {"val", {{"tokens", m.val_tokens()}, {"shards", shards_json(m.val)}}},
  };
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

void write_manifest(const fs::path& dir, const TokenManifest& m) {
  const std::string text = format_manifest(m);
  write_file_atomically(dir / kManifestName, text.data(), text.size());
}

TokenManifest parse_manifest(const std::string& text, const std::string& where) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range (1e400)
    throw InputError(where + ": not valid JSON (" + e.what() + ")");
  }
  TokenManifest m;
  try {
    check_header(doc, where);
    m.vocab_size = integer(doc, "vocab_size", where);
    if (m.vocab_size < 1 || m.vocab_size > kMaxVocab) {
      throw InputError(where + ": vocab_size " + std::to_string(m.vocab_size) + " is outside 1.." +
                       std::to_string(kMaxVocab));
    }
    read_tokenizer(doc.at("tokenizer"), where, m);
    m.input = doc.value("input", std::string());
    m.documents = integer_or_zero(doc, "documents", where);
    m.input_bytes = integer_or_zero(doc, "input_bytes", where);
    m.val_fraction = doc.value("val_fraction", 0.0);
    m.train = read_shards(doc, "train", where);
    m.val = read_shards(doc, "val", where);
  } catch (const json::exception& e) {
    throw InputError(where + ": a field is missing or has the wrong type (" + e.what() + ")");
  }
  if (m.train.empty()) throw InputError(where + ": lists no training shard");
  check_listed_once(m, where);
  return m;
}

TokenManifest read_manifest(const fs::path& dir) {
  const fs::path path = dir / kManifestName;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw InputError(dir.string() +
                     ": is a directory without manifest.json; point data.path at a directory "
                     "written by `trainctl data prepare`, or at one token file");
  }
  const RegularFile file(path, "token manifest");
  return parse_manifest(file.read_all(64ull << 20), path.string());
}

fs::path verified_tokenizer_file(const fs::path& dir, const TokenManifest& m) {
  if (m.tokenizer_files.empty()) return {};
  const fs::path first = dir / m.tokenizer_files.front();
  const std::vector<fs::path> files = tokenizer::tokenizer_files(first);
  const std::string actual = tokenizer::hash_tokenizer_files(files);
  if (actual == m.tokenizer_hash) return first;
  std::string names;
  for (const fs::path& f : files) names += (names.empty() ? "" : " + ") + f.string();
  throw InputError(names + ": the tokenizer's files hash to " + actual + " but " +
                   (dir / kManifestName).string() + " (tokenizer.hash) records " +
                   m.tokenizer_hash +
                   ": they were replaced or edited after `trainctl data prepare`, so their ids "
                   "are not the shards' ids. Restore the files the directory was prepared with, "
                   "or prepare it again");
}

}  // namespace trainctl::data
