#pragma once
// How many YAML documents a text holds, counted without building them and without
// trusting the parser to stop: yaml-cpp 0.7's LoadAll() never returns for a text with a
// stray `,` at the top level (",", "{a: 1},"): it yields empty documents forever while
// allocating, which a fuzzer found. A job spec is one document, so counting stops at two.
#include <optional>
#include <string>

#include <yaml-cpp/mark.h>

namespace trainctl::config::detail {

struct DocumentCount {
  int documents = 0;                 // 0, 1 or 2 (meaning "two or more")
  std::optional<YAML::Mark> second;  // where the second document starts, when there is one
};

// Throws YAML::Exception for text that is not YAML (as YAML::Load would).
DocumentCount count_yaml_documents(const std::string& text);

}  // namespace trainctl::config::detail
