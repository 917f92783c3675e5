#include "checkpoint/json_field.h"

#include "checkpoint/errors.h"

namespace trainctl::checkpoint {

using nlohmann::json;

namespace {
// A value as it appears in the file, cut short: a damaged field may be megabytes long.
std::string shown(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}
}  // namespace

void bad_field(const JsonPlace& place, const std::string& field, const std::string& problem) {
  throw CheckpointCorrupt(place.file + ": \"" + field + "\" " + problem +
                          "; the file was edited or damaged: resume from another checkpoint");
}

const json& json_member(const json& object, const std::string& key, const JsonPlace& place) {
  if (!object.is_object()) {
    bad_field(
        place,
        place.prefix.empty() ? "(top level)" : place.prefix.substr(0, place.prefix.size() - 1),
        "is not a JSON object");
  }
  const auto it = object.find(key);
  if (it == object.end()) bad_field(place, place.field(key), "is missing");
  return *it;
}

int64_t json_int_value(const json& v, const std::string& field, int64_t lo, int64_t hi,
                       const JsonPlace& place) {
  const std::string range =
      "; it must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  // nlohmann keeps integers beyond int64 (up to 2^64 - 1) as unsigned: compare before any
  // conversion so 2^63 is never read as a negative number.
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (hi < 0 || u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo))) {
      bad_field(place, field, "is " + std::to_string(u) + range);
    }
    return static_cast<int64_t>(u);
  }
  if (!v.is_number_integer()) bad_field(place, field, "is " + shown(v) + range);
  const int64_t n = v.get<int64_t>();
  if (n < lo || n > hi) bad_field(place, field, "is " + std::to_string(n) + range);
  return n;
}

int64_t json_int(const json& object, const std::string& key, int64_t lo, int64_t hi,
                 const JsonPlace& place) {
  return json_int_value(json_member(object, key, place), place.field(key), lo, hi, place);
}

std::string json_string(const json& object, const std::string& key, const JsonPlace& place) {
  const json& v = json_member(object, key, place);
  if (!v.is_string()) bad_field(place, place.field(key), "is " + shown(v) + ", not a string");
  return v.get<std::string>();
}

const json& json_array(const json& object, const std::string& key, const JsonPlace& place) {
  const json& v = json_member(object, key, place);
  if (!v.is_array()) bad_field(place, place.field(key), "is not an array");
  return v;
}

}  // namespace trainctl::checkpoint
