// Tokenizer files that would make trainctl allocate from an id, drop text or decode other
// text than was encoded are refused at load, naming the file, the token and what is
// expected (issue 36).
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_scratch.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/load_tokenizer.h"

using namespace trainctl;
using namespace trainctl::tokenizer;
using trainctl::test::input_error_of;
using Json = nlohmann::json;

namespace {

// Every byte a token (ids 0..255), "th" = 256, "the" = 257 (merges t+h, th+e), and
// <|endoftext|> = 258 as an added token: 258 entries + 1 added token.
Json base_tokenizer_json() {
  const ByteLevelAlphabet a;
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[a.utf8_of(static_cast<unsigned char>(b))] = b;
  vocab["th"] = 256;
  vocab["the"] = 257;
  return {{"added_tokens", {{{"id", 258}, {"content", "<|endoftext|>"}, {"special", true}}}},
          {"pre_tokenizer", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"t h", "th e"}}}}};
}

std::string error_of(const Json& doc) {
  return input_error_of([&] { Tokenizer(parse_tokenizer_json(doc.dump(), "tok.json")); });
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a tokenizer id beyond the number of tokens is refused, never allocated", "[tokenizer]") {
  const Tokenizer ok(parse_tokenizer_json(base_tokenizer_json().dump(), "tok.json"));
  CHECK(ok.vocab_size() == 259);

  Json huge = base_tokenizer_json();
  huge["model"]["vocab"]["zz"] = 2000000000;  // 259 entries + 1 added: ids below 260
  const std::string e = error_of(huge);
  CHECK(e.rfind("tok.json: token 'zz' has id 2000000000; ids must lie in [0, 260)", 0) == 0);
  CHECK(has(e, "259 vocabulary entries and 1 added token, numbered from 0"));

  Json sparse = base_tokenizer_json();
  sparse["model"]["vocab"]["zz"] = 100000000;
  CHECK(has(error_of(sparse), "'zz' has id 100000000"));

  // A gap of up to the number of added tokens is a vocabulary (Llama 3 numbers its added
  // tokens after the model's); one past it is not.
  Json gap = base_tokenizer_json();
  gap["model"]["vocab"]["zz"] = 259;
  CHECK(Tokenizer(parse_tokenizer_json(gap.dump(), "tok.json")).vocab_size() == 260);

  Json added = base_tokenizer_json();
  added["added_tokens"][0]["id"] = 5000000000LL;  // beyond int32: was truncated
  CHECK(has(error_of(added), "added token '<|endoftext|>' has id 5000000000"));
  added["added_tokens"][0]["id"] = 70000;
  CHECK(has(error_of(added), "added token '<|endoftext|>' has id 70000; ids must lie in [0, 259)"));
}

TEST_CASE("GPT-2 vocab.json with an id beyond its size is refused", "[tokenizer]") {
  trainctl::test::ScratchDir dir("tok_gpt2_ids");
  Json vocab = base_tokenizer_json()["model"]["vocab"];
  vocab["<|endoftext|>"] = 258;
  vocab["zz"] = 2000000000;
  std::ofstream(dir.path / "vocab.json") << vocab.dump();
  std::ofstream(dir.path / "merges.txt") << "#version: 0.2\nt h\nth e\n";
  const std::string e = input_error_of([&] { load_tokenizer(dir.path / "vocab.json"); });
  CHECK(has(e, "vocab.json + "));
  CHECK(has(e, "token 'zz' has id 2000000000; ids must lie in [0, 261)"));
}

TEST_CASE("token ids that do not number the tokens are refused by Tokenizer itself",
          "[tokenizer]") {
  TokenizerParts parts = parse_tokenizer_json(base_tokenizer_json().dump(), "tok.json");
  parts.added[0].id = 1 << 30;  // a caller other than the loaders
  CHECK(has(input_error_of([&] { Tokenizer t(std::move(parts)); }),
            "tok.json: token ids must lie in [0, 259)"));
}

TEST_CASE("a byte-level vocabulary without every byte is refused naming the missing bytes",
          "[tokenizer]") {
  // Without the check, "the cat in the hat" encoded and decoded as "the ct in the ht".
  Json no_a = base_tokenizer_json();
  no_a["model"]["vocab"].erase("a");
  no_a["model"]["vocab"]["zz"] = 97;  // keep the ids dense
  const std::string e = error_of(no_a);
  CHECK(e.rfind("tok.json: the vocabulary has no token for 1 of the 256 bytes: 'a' (byte 0x61)",
                0) == 0);
  CHECK(has(e, "needs every byte as a token"));

  Json no_space = base_tokenizer_json();
  no_space["model"]["vocab"].erase("\xC4\xA0");  // Ġ: the space byte
  no_space["model"]["vocab"].erase("\xC4\x80");  // Ā: byte 0
  no_space["model"]["vocab"]["x1"] = 32;
  no_space["model"]["vocab"]["x2"] = 0;
  CHECK(
      has(error_of(no_space), "no token for 2 of the 256 bytes: 'Ā' (byte 0x00), 'Ġ' (byte 0x20)"));

  // Every byte present: every text comes back.
  const Tokenizer t(parse_tokenizer_json(base_tokenizer_json().dump(), "tok.json"));
  Encoder enc(t);
  std::vector<int32_t> ids;
  std::string text = "the cat in the hat<|endoftext|>\t\xC3\xA9\x01";
  enc.encode(text, ids);
  std::string back;
  t.decode(ids.data(), ids.size(), back);
  CHECK(back == text);
}

TEST_CASE("added tokens and merges that would decode to other text are refused", "[tokenizer]") {
  Json clash = base_tokenizer_json();
  clash["added_tokens"][0]["id"] = 97;  // the vocabulary's 'a'
  CHECK(has(error_of(clash),
            "added token '<|endoftext|>' has id 97, which the vocabulary gives "
            "to 'a'"));

  Json twice = base_tokenizer_json();
  twice["added_tokens"].push_back({{"id", 258}, {"content", "<|other|>"}});
  CHECK(has(error_of(twice),
            "id 258 is given to both added tokens '<|endoftext|>' and "
            "'<|other|>'"));

  // 'Ā' is byte 0 in the byte alphabet, '€' is outside it (its own UTF-8): their merge's
  // token "Ā€" would be the 4 bytes of its spelling, not byte 0 followed by '€'.
  Json merge = base_tokenizer_json();
  merge["model"]["vocab"]["\xE2\x82\xAC"] = 258;
  merge["model"]["vocab"]["\xC4\x80\xE2\x82\xAC"] = 259;
  merge["added_tokens"][0]["id"] = 260;
  merge["model"]["merges"].push_back("\xC4\x80 \xE2\x82\xAC");
  CHECK(has(error_of(merge),
            "merge 3 ('Ā' '€') gives a token whose bytes are not those of its "
            "two parts"));
}

TEST_CASE("a number beyond double in a tokenizer file or JSONL input is an InputError",
          "[tokenizer]") {
  // nlohmann::json reports it as out_of_range, not parse_error: it escaped as a crash.
  CHECK(has(input_error_of([] { parse_tokenizer_json("{\"x\": 1e400}", "tok.json"); }),
            "tok.json: not valid JSON"));
  CHECK(has(input_error_of([] { parse_gpt2_files("{\"a\": 1e400}", "a b\n", "v.json", "m.txt"); }),
            "v.json: not valid JSON"));
}
