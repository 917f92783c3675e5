#include "config/yaml_reader.h"

#include <algorithm>
#include <cmath>

#include "config/number_text.h"
#include "config/spec_keys.h"
#include "config/suggest.h"

namespace trainctl::config::detail {

namespace {

// A quoted or `!!str`-tagged scalar is a string even when it looks like a number.
bool is_quoted(const YAML::Node& node) {
  const std::string& tag = node.Tag();
  return tag == "!" || tag == "tag:yaml.org,2002:str";
}

// The same key in another section wins over a near miss in this one: `training.lr` is
// surely `optimizer.lr`, not a typo of a training key.
std::string unknown_key_hint(const std::string& section_path, const std::string& key,
                             const std::vector<std::string>& known) {
  const std::vector<std::string> elsewhere = key_in_other_sections(section_path, key);
  if (elsewhere.empty()) return did_you_mean(key, known);
  std::string names;
  for (size_t i = 0; i < elsewhere.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == elsewhere.size() ? " or " : ", ") + ("`" + elsewhere[i] + "`");
  }
  return " Did you mean " + names + "? (`" + key + "` belongs to another section.)";
}

std::string quote_default(const std::string& text) { return " (" + text + ")"; }

std::string format_range(const RealRange& r) {
  const bool has_max = std::isfinite(r.max);
  if (!has_max) return std::string(r.min_open ? "> " : ">= ") + format_real(r.min);
  return std::string("in ") + (r.min_open ? "(" : "[") + format_real(r.min) + ", " +
         format_real(r.max) + (r.max_open ? ")" : "]");
}

bool in_range(double v, const RealRange& r) {
  const bool above = r.min_open ? v > r.min : v >= r.min;
  const bool below = r.max_open ? v < r.max : v <= r.max;
  return above && below;
}

}  // namespace

std::string describe_value(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return is_quoted(node) ? "the string \"" + node.Scalar() + "\"" : "`" + node.Scalar() + "`";
    default:
      return "nothing";
  }
}

MapReader::MapReader(const YAML::Node& node, std::string path, std::vector<std::string> known,
                     Locations& locations, bool job_spec)
    : path_(std::move(path)), job_spec_(job_spec), locations_(&locations) {
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsMap()) {
    detail::fail(locations.describe(path_, node.Mark()), path_,
                 "must be a map of keys (`key: value` lines or `{key: value, ...}`); got " +
                     describe_value(node) + ".");
  }
  const std::string section_name = path_.empty() ? "the top level" : "`" + path_ + "`";
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key_node = it->first;
    if (!key_node.IsScalar()) {
      detail::fail(locations.describe(path_, key_node.Mark()), path_,
                   "keys must be plain names; got " + describe_value(key_node) + " as a key.");
    }
    Entry entry{key_node.Scalar(), key_node, it->second};
    const std::string key_path = path_of(entry.key);
    const std::string key_where = locations.describe(key_path, key_node.Mark());
    if (std::find(known.begin(), known.end(), entry.key) == known.end()) {
      detail::fail(key_where, key_path,
                   "unknown key." +
                       (job_spec_ ? unknown_key_hint(path_, entry.key, known)
                                  : did_you_mean(entry.key, known)) +
                       " Valid keys in " + section_name + ": " + join(known) + ".");
    }
    if (const Entry* first = find(entry.key)) {
      detail::fail(key_where, key_path,
                   "given twice (first at " + where(key_path, *first) + "); keep one.");
    }
    entries_.push_back(std::move(entry));
  }
}

bool MapReader::has(const std::string& key) const { return find(key) != nullptr; }

std::string MapReader::path_of(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

const MapReader::Entry* MapReader::find(const std::string& key) const {
  for (const Entry& e : entries_) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

std::string MapReader::where(const std::string& key_path, const Entry& entry) const {
  // yaml-cpp marks an empty value at the start of the next line, and a section merged from
  // included files (config/includes.h) has no mark: point at the key instead.
  const bool unmarked = entry.value.IsNull() || entry.value.Mark().is_null();
  const YAML::Node& at = unmarked ? entry.key_node : entry.value;
  return locations_->describe(key_path, at.Mark());
}

std::string MapReader::where(const std::string& key) const {
  const Entry* e = find(key);
  return e ? where(path_of(key), *e) : locations_->where(path_of(key));
}

void MapReader::fail_at(const std::string& key, const std::string& problem) const {
  detail::fail(where(key), path_of(key), problem);
}

void MapReader::remember(const Entry& entry) const {
  const std::string key_path = path_of(entry.key);
  locations_->remember(key_path, where(key_path, entry));
}

MapReader MapReader::job_spec(const YAML::Node& root, Locations& locations) {
  return MapReader(root, "", section_keys(""), locations, true);
}

MapReader MapReader::section(const std::string& key) const {
  const std::vector<std::string>& known = section_keys(path_of(key));
  const Entry* e = find(key);
  if (!e) return MapReader(YAML::Node(), path_of(key), known, *locations_, true);
  remember(*e);
  return MapReader(e->value, path_of(key), known, *locations_, true);
}

MapReader MapReader::section(const std::string& key, std::vector<std::string> known) const {
  const Entry* e = find(key);
  if (!e) return MapReader(YAML::Node(), path_of(key), std::move(known), *locations_);
  remember(*e);
  return MapReader(e->value, path_of(key), std::move(known), *locations_);
}

std::vector<MapReader> MapReader::list_of_maps(const std::string& key,
                                               std::vector<std::string> known) const {
  std::vector<MapReader> out;
  const Entry* e = find(key);
  if (!e) return out;
  if (!e->value.IsSequence()) {
    fail_at(key, "expected a list of maps (`- {key: value, ...}` lines); got " +
                     describe_value(e->value) + ".");
  }
  remember(*e);
  for (size_t i = 0; i < e->value.size(); ++i) {
    const std::string item_path = path_of(key) + "[" + std::to_string(i) + "]";
    locations_->remember(item_path, locations_->describe(path_of(key), e->value[i].Mark()));
    out.emplace_back(e->value[i], item_path, known, *locations_);
  }
  return out;
}

const std::string& MapReader::scalar(const Entry& entry, const char* expected,
                                     const std::string& default_text) const {
  if (entry.value.IsNull()) {
    fail_at(entry.key, "has no value; give " + std::string(expected) +
                           ", or delete the line to use the default" + quote_default(default_text) +
                           ".");
  }
  if (!entry.value.IsScalar()) {
    fail_at(entry.key,
            "expected " + std::string(expected) + "; got " + describe_value(entry.value) + ".");
  }
  remember(entry);
  return entry.value.Scalar();
}

void MapReader::read(const std::string& key, int& out, IntRange range) const {
  const Entry* e = find(key);
  if (!e) return;
  const std::string& text = scalar(*e, "an integer", std::to_string(out));
  const auto value = is_quoted(e->value) ? std::nullopt : parse_integer(text);
  if (!value) {
    std::string hint = ".";
    if (is_quoted(e->value)) {
      hint = " (remove the quotes).";
    } else if (parse_real(text)) {
      hint = " (write a whole number in plain digits, e.g. 200).";
    }
    fail_at(key, "expected an integer; got " + describe_value(e->value) + hint);
  }
  if (*value < range.min || *value > range.max) {
    // An open-ended range still has int's limit: above it, say that limit.
    const bool open_ended = range.max == std::numeric_limits<int>::max() && *value <= range.max;
    fail_at(key, (open_ended ? "must be >= " + std::to_string(range.min)
                             : "must be between " + std::to_string(range.min) + " and " +
                                   std::to_string(range.max) +
                                   (range.max == std::numeric_limits<int>::max()
                                        ? " (2^31 - 1, the largest trainctl supports)"
                                        : "")) +
                     "; got " + text + ".");
  }
  out = static_cast<int>(*value);
}

void MapReader::read(const std::string& key, uint64_t& out) const {
  const Entry* e = find(key);
  if (!e) return;
  const std::string& text = scalar(*e, "a non-negative integer", std::to_string(out));
  const auto value = is_quoted(e->value) ? std::nullopt : parse_unsigned(text);
  if (!value) {
    fail_at(key, "expected an integer in [0, 2^64); got " + describe_value(e->value) + ".");
  }
  out = *value;
}

void MapReader::read(const std::string& key, double& out, RealRange range) const {
  const Entry* e = find(key);
  if (!e) return;
  const std::string& text = scalar(*e, "a number", format_real(out));
  const auto value = is_quoted(e->value) ? std::nullopt : parse_real(text);
  if (!value) {
    fail_at(key, "expected a number; got " + describe_value(e->value) +
                     (is_quoted(e->value) ? " (remove the quotes)." : "."));
  }
  if (!std::isfinite(*value)) fail_at(key, "must be a finite number; got " + text + ".");
  if (!in_range(*value, range))
    fail_at(key, "must be " + format_range(range) + "; got " + text + ".");
  out = *value;
}

void MapReader::read(const std::string& key, bool& out) const {
  const Entry* e = find(key);
  if (!e) return;
  const std::string& text = scalar(*e, "true or false", out ? "true" : "false");
  if (!is_quoted(e->value)) {
    if (text == "true" || text == "True" || text == "TRUE") {
      out = true;
      return;
    }
    if (text == "false" || text == "False" || text == "FALSE") {
      out = false;
      return;
    }
  }
  fail_at(key, "expected true or false; got " + describe_value(e->value) + ".");
}

void MapReader::read(const std::string& key, std::string& out) const {
  const Entry* e = find(key);
  if (!e) return;
  const std::string& text = scalar(*e, "a string", "\"" + out + "\"");
  if (text.empty()) fail_at(key, "must not be empty.");
  out = text;
}

void MapReader::read(const std::string& key, std::filesystem::path& out) const {
  const Entry* e = find(key);
  if (!e) return;
  const std::string& text = scalar(*e, "a path", out.empty() ? "none" : out.string());
  if (text.empty()) fail_at(key, "must not be empty.");
  out = text;
}

void MapReader::read_choice(const std::string& key, std::string& out,
                            const std::vector<std::string>& choices, const Aliases& aliases) const {
  const Entry* e = find(key);
  if (!e) return;
  const std::string& text = scalar(*e, ("one of " + join(choices, " | ")).c_str(), out);
  if (std::find(choices.begin(), choices.end(), text) == choices.end()) {
    fail_at(key, "must be one of " + join(choices, " | ") + "; got " + describe_value(e->value) +
                     "." + did_you_mean(text, choices, aliases));
  }
  out = text;
}

void MapReader::read_choice(const std::string& key, int& out,
                            const std::vector<int>& choices) const {
  std::vector<std::string> names;
  for (int c : choices) names.push_back(std::to_string(c));
  const Entry* e = find(key);
  if (!e) return;
  const std::string& text =
      scalar(*e, ("one of " + join(names, " | ")).c_str(), std::to_string(out));
  const auto value = is_quoted(e->value) ? std::nullopt : parse_integer(text);
  if (!value || std::find(choices.begin(), choices.end(), *value) == choices.end()) {
    fail_at(key,
            "must be one of " + join(names, " | ") + "; got " + describe_value(e->value) + ".");
  }
  out = static_cast<int>(*value);
}

void MapReader::read_pair(const std::string& key, double& first, double& second,
                          RealRange range) const {
  const Entry* e = find(key);
  if (!e) return;
  const std::string example = "[" + format_real(first) + ", " + format_real(second) + "]";
  if (!e->value.IsSequence() || e->value.size() != 2) {
    const std::string got = e->value.IsSequence()
                                ? "a list of " + std::to_string(e->value.size()) + " values"
                                : describe_value(e->value);
    fail_at(key, "expected a list of two numbers like " + example + "; got " + got + ".");
  }
  remember(*e);
  double values[2] = {first, second};
  for (size_t i = 0; i < 2; ++i) {
    const YAML::Node item = e->value[i];
    const std::string item_path = path_of(key) + "[" + std::to_string(i) + "]";
    const std::string item_where = locations_->describe(path_of(key), item.Mark());
    const auto value =
        (item.IsScalar() && !is_quoted(item)) ? parse_real(item.Scalar()) : std::nullopt;
    if (!value || !std::isfinite(*value)) {
      detail::fail(item_where, item_path, "expected a number; got " + describe_value(item) + ".");
    }
    if (!in_range(*value, range)) {
      detail::fail(item_where, item_path,
                   "must be " + format_range(range) + "; got " + item.Scalar() + ".");
    }
    values[i] = *value;
  }
  first = values[0];
  second = values[1];
}

void MapReader::read_list(const std::string& key, std::vector<int>& out, IntRange range) const {
  const Entry* e = find(key);
  if (!e) return;
  if (!e->value.IsSequence() || e->value.size() == 0) {
    fail_at(key,
            "expected a list of integers like [3, 4, 4, 3]; got " + describe_value(e->value) + ".");
  }
  remember(*e);
  std::vector<int> values;
  for (size_t i = 0; i < e->value.size(); ++i) {
    const YAML::Node item = e->value[i];
    const std::string item_path = path_of(key) + "[" + std::to_string(i) + "]";
    const std::string item_where = locations_->describe(path_of(key), item.Mark());
    const auto value =
        (item.IsScalar() && !is_quoted(item)) ? parse_integer(item.Scalar()) : std::nullopt;
    if (!value) {
      detail::fail(item_where, item_path, "expected an integer; got " + describe_value(item) + ".");
    }
    if (*value < range.min || *value > range.max) {
      detail::fail(item_where, item_path,
                   "must be between " + std::to_string(range.min) + " and " +
                       std::to_string(range.max) + "; got " + item.Scalar() + ".");
    }
    values.push_back(static_cast<int>(*value));
  }
  out = std::move(values);
}

}  // namespace trainctl::config::detail
