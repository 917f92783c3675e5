#pragma once
// Where each value of a job spec came from (file:line:col or a `--set` argument), so that
// every error message can point at the exact spot a user has to edit.
#include <yaml-cpp/mark.h>

#include <filesystem>
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

  // Included files (config/includes.h): the values at or under `key_path` were set by the
  // file `name` (as messages show it). Without an entry, a value is the origin's.
  void set_file(const std::string& key_path, std::string name);
  // The file that set the value at `key_path` (its closest recorded ancestor's), or origin.
  const std::string& file_of(const std::string& key_path) const;
  // The directory of the file `name` (the origin's too), for relative paths.
  void set_dir(const std::string& name, std::filesystem::path dir);

  // The one rule for relative paths (docs/job-spec.md, "Relative paths"): a value given with
  // `--set` is resolved against the current directory, a value in a file against the
  // directory of the file that set it (an included file's, for a value it set).
  std::filesystem::path base_dir(const std::string& key_path) const;
  // That rule, for this key, as messages state it: "(a relative path in a spec file is
  // resolved against that file's directory, /work/configs for base.yaml)".
  std::string relative_rule(const std::string& key_path) const;

  // Values at or under `key_path` now come from `argument` (`--set a.b=1`); `created` lists
  // the key paths that did not exist before the override added them (new sections/keys).
  void add_override(std::string key_path, std::string argument, std::vector<std::string> created);

  // "job.yaml:7:7" (1-based) for a node of the file that set `key_path` (file_of), or the
  // `--set` argument for a node that an override supplied or created. A null mark gives the
  // bare file name.
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
  std::map<std::string, std::string> files_;           // key path -> the file that set it
  std::map<std::string, std::filesystem::path> dirs_;  // file name -> its directory
  std::vector<Override> overrides_;
  std::map<std::string, std::string> remembered_;
};

// Throws InputError "<where>: <key_path>: <problem>" (the key path is left out when empty).
[[noreturn]] void fail(const std::string& where, const std::string& key_path,
                       const std::string& problem);

}  // namespace trainctl::config::detail
