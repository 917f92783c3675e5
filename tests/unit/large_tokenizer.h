#pragma once
// A byte-level BPE tokenizer with more ids than uint16 holds (for uint32 token files): the
// 256 byte tokens, the 676 pairs of lowercase letters ("ab"), then pairs of those pairs
// ("abcd", id 932 + 676*i + j for pairs i and j) up to `vocab_size` ids in all, and an
// <|endoftext|> after them. A four-letter word whose first pair is late in the alphabet ("yz..",
// "z...") encodes to one id above 65535.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/byte_level.h"

namespace trainctl::test {

inline std::filesystem::path write_large_tokenizer(const std::filesystem::path& dir,
                                                   int vocab_size = 70000) {
  const trainctl::tokenizer::ByteLevelAlphabet a;
  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json merges = nlohmann::json::array();
  for (int b = 0; b < 256; ++b) vocab[a.utf8_of(static_cast<unsigned char>(b))] = b;
  std::vector<std::string> pairs;
  int id = 256;
  for (char x = 'a'; x <= 'z'; ++x) {
    for (char y = 'a'; y <= 'z'; ++y) {
      pairs.push_back(std::string{x, y});
      vocab[pairs.back()] = id++;
      merges.push_back(std::string{x} + " " + std::string{y});
    }
  }
  for (size_t i = 0; i < pairs.size() && id < vocab_size; ++i) {
    for (size_t j = 0; j < pairs.size() && id < vocab_size; ++j) {
      vocab[pairs[i] + pairs[j]] = id++;
      merges.push_back(pairs[i] + " " + pairs[j]);
    }
  }
  nlohmann::json doc = {
      {"added_tokens", {{{"id", id}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  std::ofstream(dir / "tokenizer.json") << doc.dump();
  return dir / "tokenizer.json";
}

// The id of four-letter word `w` in that tokenizer (when below vocab_size).
inline int large_tokenizer_id(const std::string& w) {
  const int i = (w[0] - 'a') * 26 + (w[1] - 'a'), j = (w[2] - 'a') * 26 + (w[3] - 'a');
  return 256 + 676 + i * 676 + j;
}

}  // namespace trainctl::test
