#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/vocab_parts.h"
#include "util/error.h"

namespace trainctl::tokenizer {

Tokenizer::Tokenizer(TokenizerParts parts)
    : source_(std::move(parts.source)),
      kind_(std::move(parts.kind)),
      model_(parts.vocab, parts.merges, parts.merged_ids, parts.bpe),
      pattern_(parts.pattern),
      add_prefix_space_(parts.add_prefix_space),
      added_(std::move(parts.added)) {
  vocab_size_ = model_.id_end();
  int32_t lowest = 0;
  for (const auto& [bytes, id] : parts.vocab) lowest = std::min(lowest, id);
  for (const AddedToken& a : added_) {
    vocab_size_ = std::max(vocab_size_, a.id + 1);
    lowest = std::min(lowest, a.id);
  }
  // The loaders refuse such ids with the token named (tokenizer/vocab_parts.h); this guards
  // the tables below, sized by the largest id, against any other caller.
  if (lowest < 0 || vocab_size_ > id_bound(parts.vocab.size(), added_.size())) {
    throw InputError(source_ + ": token ids must lie in [0, " +
                     std::to_string(id_bound(parts.vocab.size(), added_.size())) +
                     "), the number of tokens; they run from " + std::to_string(lowest) + " to " +
                     std::to_string(vocab_size_ - 1));
  }
  std::vector<const std::string*> text(static_cast<size_t>(vocab_size_), nullptr);
  for (const auto& [bytes, id] : parts.vocab) text[static_cast<size_t>(id)] = &bytes;
  for (const AddedToken& a : added_) {
    text[static_cast<size_t>(a.id)] = &a.content;
    if (!a.content.empty()) added_first_byte_[static_cast<unsigned char>(a.content[0])] = true;
    if (a.content.find('\n') != std::string::npos) chunkable_ = false;
  }
  if (add_prefix_space_) chunkable_ = false;
  token_offsets_.reserve(text.size() + 1);
  token_offsets_.push_back(0);
  for (size_t id = 0; id < text.size(); ++id) {
    if (text[id] != nullptr) token_text_ += *text[id];
    token_offsets_.push_back(static_cast<uint32_t>(token_text_.size()));
  }
  // A gap in the ids has no text: mark it so decode refuses it.
  missing_.assign(text.size(), false);
  for (size_t id = 0; id < text.size(); ++id) missing_[id] = text[id] == nullptr;
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>"}) {
    for (const AddedToken& a : added_) {
      if (!eot_ && a.content == name) eot_ = a.id;
    }
    if (!eot_) eot_ = model_.id_of(name);
  }
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size_ || missing_[static_cast<size_t>(id)]) {
    throw InputError("token id " + std::to_string(id) + " is not in the vocabulary of " + source_ +
                     " (ids 0.." + std::to_string(vocab_size_ - 1) + ")");
  }
  const uint32_t begin = token_offsets_[static_cast<size_t>(id)];
  return std::string_view(token_text_)
      .substr(begin, token_offsets_[static_cast<size_t>(id) + 1] - begin);
}

void Tokenizer::decode(const int32_t* ids, size_t n, std::string& out) const {
  for (size_t i = 0; i < n; ++i) out += token_bytes(ids[i]);
}

void Encoder::encode(std::string_view text, std::vector<int32_t>& out) {
  if (tok_.added_.empty()) {
    encode_segment(text, out);
    return;
  }
  size_t start = 0;
  for (size_t pos = 0; pos < text.size();) {
    if (!tok_.added_first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const AddedToken* best = nullptr;
    for (const AddedToken& a : tok_.added_) {
      if (!a.content.empty() && text.substr(pos, a.content.size()) == a.content &&
          (best == nullptr || a.content.size() > best->content.size())) {
        best = &a;
      }
    }
    if (best == nullptr) {
      ++pos;
      continue;
    }
    encode_segment(text.substr(start, pos - start), out);
    out.push_back(best->id);
    pos += best->content.size();
    start = pos;
  }
  encode_segment(text.substr(start), out);
}

void Encoder::encode_segment(std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) return;
  if (tok_.add_prefix_space_ && text[0] != ' ') {
    scratch_.assign(1, ' ');
    scratch_.append(text);
    text = scratch_;
  }
  pieces_.clear();
  split_text(text, tok_.pattern_, pieces_);
  for (std::string_view piece : pieces_) encode_piece(piece, out);
}

void Encoder::encode_piece(std::string_view piece, std::vector<int32_t>& out) {
  const uint64_t h = PieceCache::hash(piece);
  uint32_t count = 0;
  if (const int32_t* ids = cache_.find(piece, h, &count)) {
    out.insert(out.end(), ids, ids + count);
    return;
  }
  const size_t first = out.size();
  tok_.model_.encode_piece(piece, out);
  cache_.insert(piece, h, out.data() + first, static_cast<uint32_t>(out.size() - first));
}

}  // namespace trainctl::tokenizer
