#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <queue>

#include "util/error.h"

namespace trainctl::tokenizer {

BpeModel::BpeModel(const std::vector<std::pair<std::string, int32_t>>& vocab,
                   const std::vector<std::pair<int32_t, int32_t>>& merges,
                   const std::vector<int32_t>& merged_ids, BpeOptions options)
    : options_(options) {
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  ids_.reserve(vocab.size());
  for (const auto& [bytes, id] : vocab) {
    ids_.emplace(bytes, id);
    id_end_ = std::max(id_end_, id + 1);
    if (bytes.size() == 1) byte_ids_[static_cast<unsigned char>(bytes[0])] = id;
  }
  for (int b = 0; b < 256; ++b) {
    if (byte_ids_[b] < 0) {
      throw InputError("the vocabulary has no token for byte " + std::to_string(b) +
                       "; a byte-level BPE vocabulary needs all 256");
    }
  }
  merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    // The first of two identical merges wins, as in `tokenizers`.
    merges_.emplace(key(merges[r].first, merges[r].second),
                    Merge{static_cast<int32_t>(r), merged_ids[r]});
  }
}

std::optional<int32_t> BpeModel::id_of(std::string_view bytes) const {
  auto it = ids_.find(std::string(bytes));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  if (options_.ignore_merges) {
    if (auto id = id_of(bytes)) {
      out.push_back(*id);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(bytes.size());
  for (char c : bytes) {
    const auto n = static_cast<int32_t>(sym.size());
    sym.push_back({byte_ids_[static_cast<unsigned char>(c)], n - 1, n + 1, true});
  }
  sym.back().next = -1;

  // (rank, position) pairs, lowest rank first and leftmost among equal ranks.
  struct Candidate {
    int32_t rank, pos, id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int32_t pos) {
    if (pos < 0) return;
    const int32_t next = sym[static_cast<size_t>(pos)].next;
    if (next < 0) return;
    if (const Merge* m =
            find_merge(sym[static_cast<size_t>(pos)].id, sym[static_cast<size_t>(next)].id)) {
      queue.push({m->rank, pos, m->id});
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = sym[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[static_cast<size_t>(left.next)];
    // Stale: either symbol changed since the candidate was queued.
    const Merge* m = find_merge(left.id, right.id);
    if (m == nullptr || m->id != top.id || m->rank != top.rank) continue;
    left.id = top.id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) sym[static_cast<size_t>(left.next)].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next)
    out.push_back(sym[static_cast<size_t>(i)].id);
}

}  // namespace trainctl::tokenizer
