#include "config/locations.h"

#include <algorithm>

#include "util/error.h"

namespace trainctl::config::detail {

namespace {
bool is_at_or_under(const std::string& key_path, const std::string& prefix) {
  return key_path == prefix ||
         (key_path.size() > prefix.size() && key_path.compare(0, prefix.size(), prefix) == 0 &&
          (key_path[prefix.size()] == '.' || key_path[prefix.size()] == '['));
}
}  // namespace

void Locations::add_override(std::string key_path, std::string argument,
                             std::vector<std::string> created) {
  overrides_.push_back({std::move(key_path), std::move(argument), std::move(created)});
}

const Locations::Override* Locations::override_for(const std::string& key_path) const {
  // The last override wins, as it does for the values themselves.
  for (auto it = overrides_.rbegin(); it != overrides_.rend(); ++it) {
    if (is_at_or_under(key_path, it->key_path) ||
        std::find(it->created.begin(), it->created.end(), key_path) != it->created.end()) {
      return &*it;
    }
  }
  return nullptr;
}

void Locations::set_file(const std::string& key_path, std::string name) {
  files_[key_path] = std::move(name);
}

const std::string& Locations::file_of(const std::string& key_path) const {
  for (std::string path = key_path;;) {
    if (auto it = files_.find(path); it != files_.end()) return it->second;
    if (path.empty()) return origin_;
    const size_t cut = path.find_last_of(".[");
    path.resize(cut == std::string::npos ? 0 : cut);
  }
}

void Locations::set_dir(const std::string& name, std::filesystem::path dir) {
  dirs_[name] = std::move(dir);
}

std::filesystem::path Locations::base_dir(const std::string& key_path) const {
  if (from_override(key_path)) return std::filesystem::current_path();
  const auto it = dirs_.find(file_of(key_path));
  return it != dirs_.end() ? it->second : std::filesystem::current_path();
}

std::string Locations::relative_rule(const std::string& key_path) const {
  const std::string dir = base_dir(key_path).string();
  if (from_override(key_path)) {
    return "(a relative path given with --set is resolved against the current directory, " + dir +
           ")";
  }
  return "(a relative path in a spec file is resolved against that file's directory, " + dir +
         " for " + file_of(key_path) + ")";
}

std::string Locations::describe(const std::string& key_path, const YAML::Mark& mark) const {
  if (const Override* o = override_for(key_path)) return o->argument;
  const std::string& file = file_of(key_path);
  if (mark.is_null()) return file;
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

bool Locations::from_override(const std::string& key_path) const {
  return override_for(key_path) != nullptr;
}

void Locations::remember(const std::string& key_path, std::string where) {
  remembered_[key_path] = std::move(where);
}

std::string Locations::where(const std::string& key_path) const {
  for (std::string path = key_path;;) {
    if (auto it = remembered_.find(path); it != remembered_.end()) return it->second;
    const size_t dot = path.rfind('.');
    if (dot == std::string::npos) return origin_;
    path.resize(dot);
  }
}

void fail(const std::string& where, const std::string& key_path, const std::string& problem) {
  throw InputError(where + ": " + (key_path.empty() ? "" : key_path + ": ") + problem);
}

}  // namespace trainctl::config::detail
