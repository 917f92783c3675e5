// Fuzz target: the tokenizer file readers (tokenizer/load_tokenizer.h) and the tokenizer
// built from what they accept. The input is a tokenizer.json, or GPT-2's vocab.json and
// merges.txt joined by the separator line kSeparator (vocab.json before it).
// Checks beyond "no crash": an accepted tokenizer's vocab_size is at most its number of
// tokens (no table sized by an untrusted id), every id it gives is inside the vocabulary,
// decoding gives back exactly the text encoded (nothing dropped), and a chunkable
// tokenizer gives the same ids for text cut at chunk_boundaries as for the whole.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/parallel_encode.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

using namespace trainctl;
using namespace trainctl::tokenizer;

namespace {

constexpr std::string_view kSeparator = "\n=== merges.txt ===\n";

TokenizerParts parse(const std::string& input) {
  const size_t at = input.find(kSeparator);
  if (at == std::string::npos) return parse_tokenizer_json(input, "tokenizer.json");
  return parse_gpt2_files(input.substr(0, at), input.substr(at + kSeparator.size()), "vocab.json",
                          "merges.txt");
}

std::vector<int32_t> encode(const Tokenizer& t, std::string_view text) {
  Encoder e(t);
  std::vector<int32_t> ids;
  e.encode(text, ids);
  return ids;
}

void check_text(const Tokenizer& t, std::string_view text, bool exact) {
  const std::vector<int32_t> ids = encode(t, text);
  for (int32_t id : ids) fuzz::require(id >= 0 && id < t.vocab_size(), "id outside the vocabulary");
  std::string back;
  try {
    t.decode(ids.data(), ids.size(), back);
  } catch (const InputError&) {
    fuzz::require(false, "an id the tokenizer gave does not decode");
  }
  fuzz::require(!exact || back == text, "decode(encode(text)) is not the text");

  std::vector<size_t> cuts = chunk_boundaries(t, text, 16);
  if (cuts.empty()) return;
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(text.size());
  std::vector<int32_t> pieces;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const std::vector<int32_t> part = encode(t, text.substr(cuts[i], cuts[i + 1] - cuts[i]));
    pieces.insert(pieces.end(), part.begin(), part.end());
  }
  fuzz::require(pieces == ids, "encoding at chunk_boundaries changed the ids");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  TokenizerParts parts;
  try {
    parts = parse(input);
  } catch (const InputError&) {
    return 0;  // refused with a message: the documented outcome for bad input
  }
  const size_t tokens = parts.vocab.size() + parts.added.size();
  // A prefix space is added to every segment (as `tokenizers` does): not decoded away.
  const bool exact = !parts.add_prefix_space;
  try {
    const Tokenizer t(std::move(parts));
    fuzz::require(t.vocab_size() >= 1 && static_cast<size_t>(t.vocab_size()) <= tokens,
                  "vocab_size exceeds the number of tokens");
    for (int32_t id = 0; id < t.vocab_size(); ++id) {
      try {
        (void)t.token_bytes(id);
      } catch (const InputError&) {
        // a gap in the numbering
      }
    }
    check_text(t,
               "Hello world's 123  4567\n\nthe cat in the hat\tcaf\xC3\xA9 \xE2\x80\x94 "
               "\xE6\x97\xA5\xE6\x9C\xAC <|endoftext|>x\r\n\x01 \xF0\x9F\x98\x80!\n"
               "Second line\nthird",
               exact);
    if (find_invalid_utf8(input) == std::string_view::npos) check_text(t, input, exact);
  } catch (const InputError&) {
    fuzz::require(false, "Tokenizer refused parts its loader accepted");
  }
  return 0;
}
