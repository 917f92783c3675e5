#pragma once
// "Did you mean ...?" hints for misspelled keys and enum values.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainctl::config::detail {

// Case-insensitive Levenshtein distance (so `1F1B` is close to `1f1b`).
int edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is close enough to be a plausible typo, else "".
// `aliases` maps well-known other spellings to a candidate (e.g. gpu -> cuda) and wins
// over edit distance, because `gpu` is one edit from `cpu` but means `cuda`.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates,
                          const std::vector<std::pair<std::string, std::string>>& aliases = {});

// "a, b, c" for messages.
std::string join(const std::vector<std::string>& items, std::string_view separator = ", ");

// " Did you mean `x`?" or "" when nothing is close: append to an error message.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates,
                         const std::vector<std::pair<std::string, std::string>>& aliases = {});

}  // namespace trainctl::config::detail
