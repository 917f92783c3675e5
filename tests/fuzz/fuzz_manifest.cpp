// Fuzz target: the reader of a prepared directory's manifest.json (data/manifest.h). The
// input is the file's text.
// Checks beyond "no crash": an accepted manifest has what parse_manifest documents (a
// vocab_size in 1..2^31-1 (uint16 shards up to 65536 ids, uint32 beyond), an eot_id inside it,
// plain shard and tokenizer names each listed once, a training shard, positive token counts), and
// it survives the round trip parse_manifest(format_manifest(m)) == m.
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>

#include "data/manifest.h"
#include "fuzz_support.h"
#include "util/error.h"

using namespace trainctl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  data::TokenManifest m;
  try {
    m = data::parse_manifest(text, "manifest.json");
  } catch (const InputError&) {
    return 0;  // refused with a message: the documented outcome for bad input
  }
  fuzz::require(m.vocab_size >= 1 && m.vocab_size <= 0x7fffffff, "vocab_size outside 1..2^31-1");
  fuzz::require(!m.eot_id || (*m.eot_id >= 0 && *m.eot_id < m.vocab_size),
                "eot_id outside the vocabulary");
  fuzz::require(!m.train.empty(), "no training shard");
  std::set<std::string> names;
  for (const auto* split : {&m.train, &m.val}) {
    for (const data::ShardEntry& s : *split) {
      fuzz::require(s.tokens > 0, "a shard without tokens");
      fuzz::require(!std::filesystem::path(s.file).has_parent_path() && s.file != "." &&
                        s.file != ".." && !s.file.empty(),
                    "a shard name that leaves the directory");
      fuzz::require(names.insert(s.file).second, "a shard listed twice");
    }
  }
  for (const std::string& f : m.tokenizer_files) {
    fuzz::require(names.insert(f).second, "a tokenizer file listed twice or as a shard");
  }
  data::TokenManifest again;
  try {
    again = data::parse_manifest(data::format_manifest(m), "again.json");
  } catch (const InputError&) {
    fuzz::require(false, "format_manifest of an accepted manifest does not parse");
  }
  fuzz::require(again == m, "format_manifest/parse_manifest round trip changed the manifest");
  return 0;
}
