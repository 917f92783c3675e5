// The BPE tokenizer on hand-made vocabularies: split patterns, merge order, decoding, the
// files it refuses. (Equality with Hugging Face `tokenizers` on real text:
// tests/tokenizer/check_against_tokenizers.sh.)
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_scratch.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/parallel_encode.h"
#include "tokenizer/split_pattern.h"
#include "tokenizer/utf8.h"

using namespace trainctl;
using namespace trainctl::tokenizer;
using trainctl::test::input_error_of;
using Json = nlohmann::json;

namespace {

std::vector<std::string> pieces(std::string_view text, SplitPattern p) {
  std::vector<std::string_view> v;
  split_text(text, p, v);
  return {v.begin(), v.end()};
}

// Every byte as a token (ids 0..255 in byte order), then "he", "th", "the", "Ġt"; merges
// ranked h+e, t+h, t+he, Ġ+t: "the" must merge h+e first (lowest rank), then t+he.
Json tiny_tokenizer_json() {
  const ByteLevelAlphabet a;
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[a.utf8_of(static_cast<unsigned char>(b))] = b;
  vocab["he"] = 256;
  vocab["th"] = 257;
  vocab["the"] = 258;
  vocab["Ġt"] = 259;
  return {
      {"version", "1.0"},
      {"added_tokens", Json::array({{{"id", 260},
                                     {"content", "<|endoftext|>"},
                                     {"special", true},
                                     {"lstrip", false},
                                     {"rstrip", false},
                                     {"single_word", false}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"vocab", vocab},
        {"merges", Json::array({"h e", Json::array({"t", "h"}), "t he", "Ġ t"})}}}};
}

Tokenizer tiny() {
  return Tokenizer(parse_tokenizer_json(tiny_tokenizer_json().dump(), "tiny.json"));
}

std::vector<int32_t> encode(const Tokenizer& t, std::string_view text) {
  Encoder e(t);
  std::vector<int32_t> ids;
  e.encode(text, ids);
  return ids;
}

}  // namespace

TEST_CASE("GPT-2 split pattern: contractions, letters, numbers, trailing spaces", "[tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(pieces("Hello world's  \n\n123 ab", SplitPattern::gpt2) ==
        V{"Hello", " world", "'s", "  \n", "\n", "123", " ab"});
  CHECK(pieces("I'M (x) a", SplitPattern::gpt2) == V{"I", "'", "M", " (", "x", ")", " a"});
  CHECK(pieces("caf\xC3\xA9 \xE2\x80\x94 end  ", SplitPattern::gpt2) ==
        V{"caf\xC3\xA9", " \xE2\x80\x94", " end", "  "});
}

TEST_CASE("Llama 3 split pattern: case-free contractions, 3-digit numbers, newlines",
          "[tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(pieces("Hello world's  \n\n1234 ab", SplitPattern::llama3) ==
        V{"Hello", " world", "'s", "  \n\n", "123", "4", " ab"});
  CHECK(pieces("I'M (x).\n\nNo", SplitPattern::llama3) == V{"I", "'M", " (", "x", ").\n\n", "No"});
  CHECK(pieces("\tword", SplitPattern::llama3) == V{"\tword"});
}

TEST_CASE("pattern_from_regex knows the GPT-2 and Llama 3 spellings only", "[tokenizer]") {
  CHECK(pattern_from_regex(regex_of(SplitPattern::gpt2)) == SplitPattern::gpt2);
  CHECK(pattern_from_regex(regex_of(SplitPattern::llama3)) == SplitPattern::llama3);
  CHECK_FALSE(pattern_from_regex("\\w+|\\s+").has_value());
}

TEST_CASE("BPE merges the lowest-ranked pair first and decodes back", "[tokenizer]") {
  const Tokenizer t = tiny();
  CHECK(t.vocab_size() == 261);
  CHECK(t.eot_id() == 260);
  // "the": h+e (rank 0) before t+h (rank 1), then t+he; " the" is " " + "the" (no Ġ+the).
  CHECK(encode(t, "the") == std::vector<int32_t>{258});
  CHECK(encode(t, " the") == std::vector<int32_t>{32, 258});
  CHECK(encode(t, "th") == std::vector<int32_t>{257});
  CHECK(encode(t, " t") == std::vector<int32_t>{259});
  // Added tokens are cut out first and decode as their text.
  const std::string text = "the<|endoftext|>\xC3\xA9!";
  const std::vector<int32_t> ids = encode(t, text);
  CHECK(ids == std::vector<int32_t>{258, 260, 0xC3, 0xA9, '!'});
  std::string back;
  t.decode(ids.data(), ids.size(), back);
  CHECK(back == text);
  const int32_t bad = 999;
  CHECK(input_error_of([&] { t.decode(&bad, 1, back); }).find("token id 999") != std::string::npos);
}

TEST_CASE("encode_text on several threads gives the single-thread ids", "[tokenizer]") {
  const Tokenizer t = tiny();
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "the theme\nThere the " + std::to_string(i) + " th\n";
  const std::vector<int32_t> one = encode(t, text);
  CHECK(chunk_boundaries(t, text, 4096).size() > 10);
  CHECK(encode_text(t, text, 3) == one);
}

TEST_CASE("unsupported or malformed tokenizer.json is refused naming the problem", "[tokenizer]") {
  auto error_of = [](const Json& doc) {
    return input_error_of([&] { parse_tokenizer_json(doc.dump(), "tok.json"); });
  };
  Json wp = tiny_tokenizer_json();
  wp["model"]["type"] = "WordPiece";
  CHECK(error_of(wp).find("tok.json: model.type is WordPiece") == 0);
  Json no_merges = tiny_tokenizer_json();
  no_merges["model"].erase("merges");
  CHECK(error_of(no_merges).find("tok.json: model.merges is missing") == 0);
  Json bad_merge = tiny_tokenizer_json();
  bad_merge["model"]["merges"].push_back("x yz");
  CHECK(error_of(bad_merge).find("'yz', which is not in the vocabulary") != std::string::npos);
  Json norm = tiny_tokenizer_json();
  norm["normalizer"] = {{"type", "NFC"}};
  CHECK(error_of(norm).find("normalizer") != std::string::npos);
  Json split = tiny_tokenizer_json();
  split["pre_tokenizer"] = {{"type", "Whitespace"}};
  CHECK(error_of(split).find("pre_tokenizer is Whitespace") != std::string::npos);
  Json strip = tiny_tokenizer_json();
  strip["added_tokens"][0]["lstrip"] = true;
  CHECK(error_of(strip).find("lstrip") != std::string::npos);
  CHECK(input_error_of([] {
          parse_tokenizer_json("{\"model\": ", "tok.json");
        }).find("tok.json: not valid JSON") == 0);
}

TEST_CASE("GPT-2's vocab.json + merges.txt load like the tokenizer.json", "[tokenizer]") {
  trainctl::test::ScratchDir dir("gpt2_files");
  const Json doc = tiny_tokenizer_json();
  Json vocab = doc["model"]["vocab"];
  vocab["<|endoftext|>"] = 260;
  {
    std::ofstream(dir.path / "vocab.json") << vocab.dump();
    std::ofstream(dir.path / "merges.txt") << "#version: 0.2\nh e\nt h\nt he\n\xC4\xA0 t\n";
  }
  const LoadedTokenizer t = load_tokenizer(dir.path / "vocab.json");
  CHECK(t.files.size() == 2);
  CHECK(t.hash.rfind("fnv1a64:", 0) == 0);
  CHECK(encode(t.tokenizer, "the<|endoftext|> t") == std::vector<int32_t>{258, 260, 259});
  std::filesystem::remove(dir.path / "merges.txt");
  CHECK(input_error_of([&] { load_tokenizer(dir.path / "vocab.json"); }).find("merges.txt") !=
        std::string::npos);
}

TEST_CASE("text that is not UTF-8 is refused with its offset and line", "[tokenizer]") {
  CHECK(find_invalid_utf8("plain ascii") == std::string_view::npos);
  CHECK(find_invalid_utf8("caf\xC3\xA9") == std::string_view::npos);
  CHECK(find_invalid_utf8("ab\nc\xE9") == 4);
  CHECK(find_invalid_utf8("\xED\xA0\x80") == 0);  // a surrogate
  CHECK(find_invalid_utf8("\xC0\xAF") == 0);      // overlong
  CHECK(input_error_of([] { require_utf8("ab\nc\xE9", "x.txt"); }) ==
        "x.txt: not UTF-8 text: invalid byte 0xE9 at offset 4 (line 2); convert it to UTF-8 "
        "first (e.g. iconv -f latin1 -t utf-8)");
}
