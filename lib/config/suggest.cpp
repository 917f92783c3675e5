#include "config/suggest.h"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace trainctl::config::detail {

namespace {
char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

bool same_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

// The '_'-separated words of a key, sorted: `lr_min` and `min_lr` have the same ones.
std::vector<std::string> sorted_words(std::string_view key) {
  std::vector<std::string> words(1);
  for (char c : key) {
    if (c == '_') {
      words.emplace_back();
    } else {
      words.back() += lower(c);
    }
  }
  std::sort(words.begin(), words.end());
  return words;
}
}  // namespace

int edit_distance(std::string_view a, std::string_view b) {
  // One row of the classic dynamic programme: row[j] = distance(a[0..i), b[0..j)).
  std::vector<int> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int substitution = diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
    }
  }
  return row[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates,
                          const std::vector<std::pair<std::string, std::string>>& aliases) {
  for (const auto& [alias, target] : aliases) {
    if (same_ignoring_case(alias, word)) return target;
  }
  for (const auto& candidate : candidates) {
    if (sorted_words(word) == sorted_words(candidate)) return candidate;
  }
  std::string best;
  int best_distance = 0;
  for (const auto& candidate : candidates) {
    const int d = edit_distance(word, candidate);
    if (best.empty() || d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  // A third of the longer word (at least 2 edits) separates typos from different words:
  // `n_layers` -> `n_layer`, `lr_min` stays unmatched against `lr`.
  const int allowed = std::max<int>(2, static_cast<int>(std::max(word.size(), best.size()) / 3));
  return (!best.empty() && best_distance <= allowed) ? best : std::string();
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    out += items[i];
  }
  return out;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates,
                         const std::vector<std::pair<std::string, std::string>>& aliases) {
  const std::string match = closest_match(word, candidates, aliases);
  return match.empty() ? std::string() : " Did you mean `" + match + "`?";
}

}  // namespace trainctl::config::detail
