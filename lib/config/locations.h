#pragma once
// Where each value of a job spec came from (file:line:col or a `--set` argument), so that
// every error message can point at the exact spot a user has to edit.
#include <yaml-cpp/mark.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace trainctl::config::detail {

class Locations {
 public:
  // `origin` names the spec in messages (the file as the user typed it).
  explicit Locations(std::string origin) : origin_(std::move(origin)) {}

  const std::string& origin() const { return origin_; }

  // Values at or under `key_path` now come from `argument` (`--set a.b=1`); `created` lists
  // the key paths that did not exist before the override added them (new sections/keys).
  void add_override(std::string key_path, std::string argument, std::vector<std::string> created);

  // "job.yaml:7:7" (1-based) for a node of the file, or the `--set` argument for a node that
  // an override supplied or created. A null mark gives the bare origin.
  std::string describe(const std::string& key_path, const YAML::Mark& mark) const;

  // Whether the value at `key_path` was supplied by a `--set` override.
  bool from_override(const std::string& key_path) const;

  // Records where an explicitly given key's value is, for cross-field messages.
  void remember(const std::string& key_path, std::string where);
  bool given(const std::string& key_path) const { return remembered_.count(key_path) > 0; }
  // Where `key_path` was given; for a default, its enclosing section, else the bare origin.
  std::string where(const std::string& key_path) const;

 private:
  struct Override {
    std::string key_path;
    std::string argument;
    std::vector<std::string> created;
  };
  const Override* override_for(const std::string& key_path) const;

  std::string origin_;
  std::vector<Override> overrides_;
  std::map<std::string, std::string> remembered_;
};

// Throws InputError "<where>: <key_path>: <problem>" (the key path is left out when empty).
[[noreturn]] void fail(const std::string& where, const std::string& key_path,
                       const std::string& problem);

}  // namespace trainctl::config::detail
