#include "data/manifest.h"

#include <nlohmann/json.hpp>

#include "data/tokenize_file.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace trainctl::data {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "trainctl-tokens";
constexpr int kVersion = 1;

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

}  // namespace

int64_t TokenManifest::train_tokens() const { return sum(train); }
int64_t TokenManifest::val_tokens() const { return sum(val); }

bool is_token_directory(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

void write_manifest(const fs::path& dir, const TokenManifest& m) {
  json doc = {
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
      {"token_format", "llm.c uint16 (header: 256 int32, magic 20240520, version 1)"},
      {"train", {{"tokens", m.train_tokens()}, {"shards", shards_json(m.train)}}},
      {"val", {{"tokens", m.val_tokens()}, {"shards", shards_json(m.val)}}},
  };
  const std::string text = doc.dump(2) + "\n";
  write_file_atomically(dir / kManifestName, text.data(), text.size());
}

TokenManifest read_manifest(const fs::path& dir) {
  const fs::path path = dir / kManifestName;
  const std::string where = path.string();
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw InputError(dir.string() +
                     ": is a directory without manifest.json; point data.path at a directory "
                     "written by `trainctl data prepare`, or at one token file");
  }
  const RegularFile file(path, "token manifest");
  json doc;
  try {
    doc = json::parse(file.read_all(64ull << 20));
  } catch (const json::parse_error& e) {
    throw InputError(where + ": not valid JSON (" + e.what() + ")");
  }
  TokenManifest m;
  try {
    if (!doc.is_object() || doc.value("format", std::string()) != kFormat) {
      throw InputError(where + ": not a trainctl token manifest (\"format\" is not \"" +
                       std::string(kFormat) + "\")");
    }
    if (doc.at("version").get<int>() != kVersion) {
      throw InputError(where + ": manifest version " + doc.at("version").dump() +
                       " is not supported (this trainctl reads version 1)");
    }
    m.vocab_size = doc.at("vocab_size").get<int64_t>();
    if (m.vocab_size < 1 || m.vocab_size > 65536) {
      throw InputError(where + ": vocab_size " + std::to_string(m.vocab_size) +
                       " is outside 1..65536 (uint16 tokens)");
    }
    const json& t = doc.at("tokenizer");
    m.tokenizer_kind = t.at("kind").get<std::string>();
    m.tokenizer_hash = t.at("hash").get<std::string>();
    m.tokenizer_files = t.at("files").get<std::vector<std::string>>();
    m.split_pattern = t.value("split_pattern", std::string());
    if (t.contains("eot_id") && !t.at("eot_id").is_null()) m.eot_id = t.at("eot_id").get<int64_t>();
    m.input = doc.value("input", std::string());
    m.documents = doc.value("documents", int64_t{0});
    m.input_bytes = doc.value("input_bytes", int64_t{0});
    m.val_fraction = doc.value("val_fraction", 0.0);
    for (const char* split : {"train", "val"}) {
      std::vector<ShardEntry>& shards = std::string(split) == "train" ? m.train : m.val;
      for (const json& s : doc.at(split).at("shards")) {
        ShardEntry e{s.at("file").get<std::string>(), s.at("tokens").get<int64_t>()};
        const fs::path name(e.file);
        if (e.file.empty() || name.has_parent_path() || e.file == "." || e.file == "..") {
          throw InputError(where + ": shard '" + e.file +
                           "' is not a plain file name in the directory");
        }
        if (e.tokens <= 0) {
          throw InputError(where + ": shard " + e.file + " has " + std::to_string(e.tokens) +
                           " tokens");
        }
        shards.push_back(std::move(e));
      }
    }
    for (const std::string& f : m.tokenizer_files) {
      if (fs::path(f).has_parent_path()) {
        throw InputError(where + ": tokenizer file '" + f + "' is not a plain file name");
      }
    }
  } catch (const json::exception& e) {
    throw InputError(where + ": a field is missing or has the wrong type (" + e.what() + ")");
  }
  if (m.train.empty()) throw InputError(where + ": lists no training shard");
  return m;
}

}  // namespace trainctl::data
