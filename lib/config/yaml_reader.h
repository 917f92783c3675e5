#pragma once
// Typed, checked access to one YAML map (a section of the job spec). Every read checks the
// value's type and range and records where it was given; any problem throws InputError
// naming file:line:col (or the `--set` argument), the key path, what is wrong and the fix.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "config/locations.h"

namespace trainctl::config::detail {

struct IntRange {
  long long min = 0;
  long long max = std::numeric_limits<int>::max();
};

struct RealRange {
  double min = 0;
  bool min_open = false;  // true: min itself is not allowed
  double max = std::numeric_limits<double>::infinity();
  bool max_open = true;
};

using Aliases = std::vector<std::pair<std::string, std::string>>;

class MapReader {
 public:
  // `node` is the section's value (null reads as an empty section; anything but a map is
  // an error). Rejects keys that are not in `known` (suggesting the closest), duplicated
  // keys and keys that are not plain scalars. `path` is the section's key path ("" = top).
  MapReader(const YAML::Node& node, std::string path, std::vector<std::string> known,
            Locations& locations, bool job_spec = false);

  bool has(const std::string& key) const;
  // "training.steps" for key "steps".
  std::string path_of(const std::string& key) const;
  // Where the value of `key` is (its key's position when the value is empty).
  std::string where(const std::string& key) const;
  [[noreturn]] void fail_at(const std::string& key, const std::string& problem) const;

  // The top level of a job spec: its sections' keys come from config/spec_keys.h, and an
  // unknown key is also looked up in the other sections (`training.lr` -> `optimizer.lr`).
  static MapReader job_spec(const YAML::Node& root, Locations& locations);

  // A nested section; absent reads as empty. The first form is for job specs (keys from
  // config/spec_keys.h); the second for other files read with a MapReader.
  MapReader section(const std::string& key) const;
  MapReader section(const std::string& key, std::vector<std::string> known) const;

  // A list of maps (e.g. data.sources): one reader per item, its path "<key>[i]" and its keys
  // from `known`; absent reads as an empty list, anything but a list of maps is an error.
  std::vector<MapReader> list_of_maps(const std::string& key, std::vector<std::string> known) const;

  // Each read leaves `out` (the default) untouched when the key is absent.
  void read(const std::string& key, int& out, IntRange range) const;
  void read(const std::string& key, uint64_t& out) const;
  void read(const std::string& key, double& out, RealRange range) const;
  void read(const std::string& key, bool& out) const;
  // A non-empty string.
  void read(const std::string& key, std::string& out) const;
  void read(const std::string& key, std::filesystem::path& out) const;
  // One of `choices` (exact spelling); misspellings and `aliases` get a suggestion.
  void read_choice(const std::string& key, std::string& out,
                   const std::vector<std::string>& choices, const Aliases& aliases = {}) const;
  void read_choice(const std::string& key, int& out, const std::vector<int>& choices) const;
  // A two-element list of reals, e.g. `betas: [0.9, 0.95]`.
  void read_pair(const std::string& key, double& first, double& second, RealRange range) const;
  // A non-empty list of integers, e.g. `layers_per_stage: [7, 8, 8, 7]`.
  void read_list(const std::string& key, std::vector<int>& out, IntRange range) const;

 private:
  struct Entry {
    std::string key;
    YAML::Node key_node;
    YAML::Node value;
  };
  const Entry* find(const std::string& key) const;
  // The entry's value as a scalar, or an error naming what it is instead; `expected` is
  // e.g. "an integer" and `default_text` the value used when the key is left out.
  const std::string& scalar(const Entry& entry, const char* expected,
                            const std::string& default_text) const;
  std::string where(const std::string& key_path, const Entry& entry) const;
  void remember(const Entry& entry) const;

  std::string path_;
  bool job_spec_ = false;  // a job spec's section (cross-section hints for unknown keys)
  std::vector<Entry> entries_;
  Locations* locations_;
};

// How a YAML node reads in a message: "a list", "the string \"200\"", "`2.5`", "nothing".
std::string describe_value(const YAML::Node& node);

}  // namespace trainctl::config::detail
