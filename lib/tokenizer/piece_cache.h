#pragma once
// The ids of recently encoded pieces (one Encoder's, so one thread's): most words of a text
// recur, and a lookup is much cheaper than merging. Open addressing over flat arrays; the
// whole cache is dropped when it fills up.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainctl::tokenizer {

class PieceCache {
 public:
  PieceCache();
  // The cached ids of `piece` (nullptr when absent); *count is set when found.
  const int32_t* find(std::string_view piece, uint64_t hash, uint32_t* count) const;
  void insert(std::string_view piece, uint64_t hash, const int32_t* ids, uint32_t count);
  static uint64_t hash(std::string_view piece);

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0, ids_offset = 0;
    uint16_t key_len = 0, ids_count = 0;
    bool used = false;
  };
  void clear();

  static constexpr size_t kSlots = 1 << 17;  // power of two
  static constexpr size_t kMaxEntries = kSlots / 2;
  static constexpr size_t kMaxPiece = 0xffff;
  std::vector<Slot> slots_;
  size_t entries_ = 0;
  std::string keys_;
  std::vector<int32_t> ids_;
};

}  // namespace trainctl::tokenizer
