#pragma once
// A byte-level BPE tokenizer (GPT-2, Llama 3 and the like), as loaded from a Hugging Face
// tokenizer.json or GPT-2's vocab.json + merges.txt (load_tokenizer.h). Encoding: added
// tokens (special tokens such as <|endoftext|>) are cut out of the text first, the rest is
// split by the pre-tokenizer's pattern (tokenizer/split_pattern.h) and each piece encoded
// by the BPE model; the ids equal those of `tokenizers`' encode(text,
// add_special_tokens=False). No template tokens (BOS) are added. Decoding maps ids back
// to bytes.
//
// A Tokenizer is immutable and shared by threads; each thread encodes with its own
// Encoder (which caches the pieces it has seen).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe_model.h"
#include "tokenizer/piece_cache.h"
#include "tokenizer/split_pattern.h"

namespace trainctl::tokenizer {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
};

struct TokenizerParts {
  std::string source;  // the file(s) it came from, for messages
  std::string kind;    // "tokenizer.json" | "vocab.json + merges.txt"
  std::vector<std::pair<std::string, int32_t>> vocab;  // bytes, id
  std::vector<std::pair<int32_t, int32_t>> merges;     // rank order
  std::vector<int32_t> merged_ids;
  BpeOptions bpe;
  SplitPattern pattern = SplitPattern::gpt2;
  bool add_prefix_space = false;
  std::vector<AddedToken> added;
};

class Tokenizer {
 public:
  explicit Tokenizer(TokenizerParts parts);

  const std::string& source() const { return source_; }
  const std::string& kind() const { return kind_; }
  SplitPattern pattern() const { return pattern_; }
  // One more than the largest id (model and added tokens), at most the number of tokens
  // (checked): the model's vocab_size must be at least this.
  int32_t vocab_size() const { return vocab_size_; }
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  // The end-of-text token (<|endoftext|> or <|end_of_text|>) if the vocabulary has one.
  std::optional<int32_t> eot_id() const { return eot_; }
  // Whether text may be cut at a line start and the pieces encoded separately with the
  // same result (tokenizer/parallel_encode.h).
  bool chunkable() const { return chunkable_; }

  // The bytes of token `id`; throws InputError for an id outside the vocabulary.
  std::string_view token_bytes(int32_t id) const;
  // Appends the text of `ids` (the inverse of encoding). Throws InputError for an unknown id.
  void decode(const int32_t* ids, size_t n, std::string& out) const;

 private:
  friend class Encoder;
  std::string source_, kind_;
  BpeModel model_;
  SplitPattern pattern_;
  bool add_prefix_space_;
  std::vector<AddedToken> added_;
  bool added_first_byte_[256] = {};
  std::optional<int32_t> eot_;
  bool chunkable_ = true;
  int32_t vocab_size_ = 0;
  std::vector<uint32_t> token_offsets_;  // [vocab_size + 1] into token_text_
  std::vector<bool> missing_;            // ids with no token (gaps in the numbering)
  std::string token_text_;
};

// Encodes text with one tokenizer on one thread, caching the ids of recent pieces.
class Encoder {
 public:
  explicit Encoder(const Tokenizer& tokenizer) : tok_(tokenizer) {}
  // Appends the ids of `text`, which must be valid UTF-8 (tokenizer/utf8.h checks).
  void encode(std::string_view text, std::vector<int32_t>& out);

 private:
  void encode_segment(std::string_view text, std::vector<int32_t>& out);
  void encode_piece(std::string_view piece, std::vector<int32_t>& out);

  const Tokenizer& tok_;
  std::vector<std::string_view> pieces_;
  PieceCache cache_;
  std::string scratch_;
};

}  // namespace trainctl::tokenizer
