#pragma once
// The BPE model of a byte-level tokenizer: a vocabulary of byte strings and a ranked merge
// list. A piece of text (one pre-tokenizer split) starts as one symbol per byte and merges
// the adjacent pair of lowest rank, leftmost first, until no pair has a merge: the order
// Hugging Face `tokenizers` merges in, so the ids are the same.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace trainctl::tokenizer {

struct BpeOptions {
  // A piece that is itself in the vocabulary is one token without merging (Llama 3).
  bool ignore_merges = false;
};

class BpeModel {
 public:
  // `vocab`: each token's bytes (byte-level alphabet already decoded) and id; `merges`:
  // pairs of token ids in rank order, each with the id of the merged token. Every byte must
  // have a one-byte token (the loaders check; InputError otherwise), so no input byte is
  // ever dropped.
  BpeModel(const std::vector<std::pair<std::string, int32_t>>& vocab,
           const std::vector<std::pair<int32_t, int32_t>>& merges,
           const std::vector<int32_t>& merged_ids, BpeOptions options);

  // Appends the ids of one piece (its raw bytes).
  void encode_piece(std::string_view bytes, std::vector<int32_t>& out) const;

  // One more than the largest id.
  int32_t id_end() const { return id_end_; }
  // The id of a token's bytes, if it is in the vocabulary.
  std::optional<int32_t> id_of(std::string_view bytes) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* find_merge(int32_t a, int32_t b) const {
    auto it = merges_.find(key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }

  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t byte_ids_[256];
  int32_t id_end_ = 0;
  BpeOptions options_;
};

}  // namespace trainctl::tokenizer
