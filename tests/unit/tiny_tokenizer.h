#pragma once
// A minimal byte-level BPE tokenizer.json for tests: every byte a token (id = byte value),
// one merge ("t" "h" -> 256) and <|endoftext|> = 257, so encodings are easy to predict.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"

namespace trainctl::test {

inline std::filesystem::path write_tiny_tokenizer(const std::filesystem::path& dir) {
  const trainctl::tokenizer::ByteLevelAlphabet a;
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[a.utf8_of(static_cast<unsigned char>(b))] = b;
  vocab["th"] = 256;
  nlohmann::json doc = {
      {"added_tokens", {{{"id", 257}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"t h"}}}}};
  std::ofstream(dir / "tokenizer.json") << doc.dump();
  return dir / "tokenizer.json";
}

}  // namespace trainctl::test
