#include "config/overrides.h"

#include "config/variables.h"

namespace trainctl::config::detail {

namespace {

std::string trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

std::vector<std::string> split_key_path(const std::string& key_path, const std::string& argument) {
  std::vector<std::string> keys(1);
  for (char c : key_path) {
    if (c == '.') {
      keys.emplace_back();
    } else {
      keys.back() += c;
    }
  }
  for (const std::string& key : keys) {
    if (key.empty()) {
      fail(argument, key_path,
           "malformed key path; expected dot-separated names like `parallel.tp`.");
    }
  }
  return keys;
}

void apply_one(YAML::Node& root, const std::string& raw, Locations& locations) {
  const std::string text = trim(raw);
  const std::string argument = "--set " + text;
  const size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0) {
    fail(argument, "", "expected `key.path=value`, e.g. `--set parallel.tp=2`.");
  }
  const std::string key_path = trim(text.substr(0, equals));
  const std::vector<std::string> keys = split_key_path(key_path, argument);

  YAML::Node value;
  try {
    value = YAML::Load(text.substr(equals + 1));
  } catch (const YAML::Exception& e) {
    fail(argument, key_path,
         "the value is not valid YAML (" + e.msg + "); quote it if it is a string.");
  }
  // Variables as in a file (`--set 'run_dir=${SCRATCH}/x'`); errors name this argument.
  Locations here(argument);
  here.add_override(key_path, argument, {});
  expand_tree(value, key_path, process_environment(), here);

  // Walk (and create) the sections down to the last key. Node::reset rebinds the handle;
  // assigning one Node to another would overwrite the tree's contents instead.
  std::vector<std::string> created;
  std::string path;
  YAML::Node node;
  node.reset(root);
  for (size_t i = 0; i < keys.size(); ++i) {
    path += (i == 0 ? "" : ".") + keys[i];
    const bool last = i + 1 == keys.size();
    YAML::Node child = node[keys[i]];
    if (!child.IsDefined()) created.push_back(path);
    if (last) {
      node[keys[i]] = value;
      break;
    }
    if (!child.IsDefined() || child.IsNull()) {
      node[keys[i]] = YAML::Node(YAML::NodeType::Map);
    } else if (!child.IsMap()) {
      fail(argument, path,
           "holds a value, not a section, so `" + key_path + "` cannot be set; use `--set " + path +
               "=...`.");
    }
    YAML::Node next = node[keys[i]];
    node.reset(next);
  }
  locations.add_override(key_path, argument, std::move(created));
}

}  // namespace

void apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides,
                     Locations& locations) {
  for (const std::string& raw : overrides) apply_one(root, raw, locations);
}

}  // namespace trainctl::config::detail
