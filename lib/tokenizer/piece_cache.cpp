#include "tokenizer/piece_cache.h"

#include <cstring>

namespace trainctl::tokenizer {

PieceCache::PieceCache() : slots_(kSlots) {}

uint64_t PieceCache::hash(std::string_view piece) {
  // Eight bytes at a time, multiplied and folded (pieces are short; quality only needs to
  // spread words over the table).
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ piece.size();
  const char* p = piece.data();
  size_t n = piece.size();
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
    p += 8;
    n -= 8;
  }
  uint64_t w = 0;
  std::memcpy(&w, p, n);
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 29);
}

const int32_t* PieceCache::find(std::string_view piece, uint64_t h, uint32_t* count) const {
  for (size_t i = h & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    const Slot& s = slots_[i];
    if (!s.used) return nullptr;
    if (s.hash == h && s.key_len == piece.size() &&
        std::memcmp(keys_.data() + s.key_offset, piece.data(), piece.size()) == 0) {
      *count = s.ids_count;
      return ids_.data() + s.ids_offset;
    }
  }
}

void PieceCache::clear() {
  for (Slot& s : slots_) s.used = false;
  entries_ = 0;
  keys_.clear();
  ids_.clear();
}

void PieceCache::insert(std::string_view piece, uint64_t h, const int32_t* ids, uint32_t count) {
  if (piece.size() > kMaxPiece || count > kMaxPiece) return;
  if (entries_ >= kMaxEntries || keys_.size() + piece.size() > 0xffffffffULL ||
      ids_.size() + count > 0xffffffffULL) {
    clear();
  }
  size_t i = h & (kSlots - 1);
  while (slots_[i].used) i = (i + 1) & (kSlots - 1);
  Slot& s = slots_[i];
  s = {h,
       static_cast<uint32_t>(keys_.size()),
       static_cast<uint32_t>(ids_.size()),
       static_cast<uint16_t>(piece.size()),
       static_cast<uint16_t>(count),
       true};
  keys_.append(piece);
  ids_.insert(ids_.end(), ids, ids + count);
  ++entries_;
}

}  // namespace trainctl::tokenizer
