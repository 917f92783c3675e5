#include "config/variables.h"

#include <cctype>
#include <cstdlib>
#include <set>

#include "util/error.h"

namespace trainctl::config::detail {

namespace {

// Defaults may hold variables with defaults of their own; deeper than this is no real spec
// (and unbounded nesting would recurse once per level of a 1 MiB value).
constexpr int kMaxNesting = 8;

std::string expand(const std::string& text, const EnvLookup& env, int depth);

bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The index of the `}` closing the `${` whose body starts at `begin` (nested `${...}` in a
// default are skipped), or npos.
size_t closing_brace(const std::string& text, size_t begin) {
  int depth = 1;
  for (size_t i = begin; i < text.size(); ++i) {
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      ++i;
    } else if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '{') {
      ++depth;
      ++i;
    } else if (text[i] == '}' && --depth == 0) {
      return i;
    }
  }
  return std::string::npos;
}

std::string unset_message(const std::string& name) {
  return "environment variable " + name + " is not set. Set it (export " + name +
         "=...), give a default (${" + name + ":-value}), or write $$ for a literal $.";
}

// `body` is what stands between `${` and `}`: NAME or NAME:-default.
std::string expand_braced(const std::string& body, const EnvLookup& env, int depth) {
  size_t end = 0;
  while (end < body.size() && name_char(body[end])) ++end;
  const std::string name = body.substr(0, end);
  const bool has_default = body.compare(end, 2, ":-") == 0;
  if (name.empty() || !name_start(name[0]) || (end != body.size() && !has_default)) {
    throw InputError("`${" + body +
                     "}` is not a variable: write ${NAME} or ${NAME:-default}, NAME made of "
                     "letters, digits and '_' (not starting with a digit), or $$ for a "
                     "literal $.");
  }
  const std::optional<std::string> value = env(name);
  if (has_default && (!value || value->empty())) {
    if (depth >= kMaxNesting) {
      throw InputError("variables nested more than " + std::to_string(kMaxNesting) +
                       " deep in a default (${A:-${B:-...}}); write fewer levels.");
    }
    return expand(body.substr(end + 2), env, depth + 1);
  }
  if (!value) throw InputError(unset_message(name));
  return *value;
}

}  // namespace

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::string expand_variables(const std::string& text, const EnvLookup& env) {
  return expand(text, env, 0);
}

namespace {

std::string expand(const std::string& text, const EnvLookup& env, int depth) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c != '$' || (next != '$' && next != '{' && !name_start(next))) {
      out += c;
    } else if (next == '$') {
      out += '$';
      ++i;
    } else if (next == '{') {
      const size_t close = closing_brace(text, i + 2);
      if (close == std::string::npos) {
        throw InputError("`" + text.substr(i) +
                         "` has no closing }: write ${NAME}, or $$ for a literal $.");
      }
      out += expand_braced(text.substr(i + 2, close - i - 2), env, depth);
      i = close;
    } else {
      size_t end = i + 1;
      while (end < text.size() && name_char(text[end])) ++end;
      const std::string name = text.substr(i + 1, end - i - 1);
      const std::optional<std::string> value = env(name);
      if (!value) throw InputError(unset_message(name));
      out += *value;
      i = end - 1;
    }
  }
  return out;
}

// Aliases (`*anchor`) make one node appear in several places: each is expanded once (its
// mark is unique within a document), which also keeps a tree of aliases from being walked
// exponentially often.
void expand_node(YAML::Node node, const std::string& path, const EnvLookup& env,
                 const Locations& locations, std::set<int>& done) {
  const YAML::Mark mark = node.Mark();
  if (!mark.is_null() && !done.insert(mark.pos).second) return;
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    if (text.find('$') == std::string::npos) return;
    try {
      node = expand_variables(text, env);
    } catch (const InputError& e) {
      fail(locations.describe(path, mark), path, e.what());
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      expand_node(node[i], path + "[" + std::to_string(i) + "]", env, locations, done);
    }
  } else if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
      expand_node(it->second, path.empty() ? key : path + "." + key, env, locations, done);
    }
  }
}

}  // namespace

void expand_tree(YAML::Node node, const std::string& path, const EnvLookup& env,
                 const Locations& locations) {
  std::set<int> done;
  expand_node(node, path, env, locations, done);
}

std::string expand_home(const std::string& path, const EnvLookup& env) {
  if (path.empty() || path[0] != '~') return path;
  if (path.size() > 1 && path[1] != '/') {
    throw InputError("`" + path +
                     "`: only ~ and ~/... (your home directory) are expanded; write the other "
                     "user's directory in full.");
  }
  const std::optional<std::string> home = env("HOME");
  if (!home || home->empty()) {
    throw InputError("`" + path + "` starts with ~ but HOME is not set; write the full path.");
  }
  return *home + path.substr(1);
}

}  // namespace trainctl::config::detail
