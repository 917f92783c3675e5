#pragma once
// Reading one field of a checkpoint's JSON (metadata.json, a shard's record) strictly: the
// type must be exactly right (an integer is not read from 1e15 or 20.5, nor wrapped from
// 2^63 to a negative number) and the value within the range the writer can produce. Every
// failure is a CheckpointCorrupt whose message names the file and the field's path, e.g.
// `.../step_00000020/metadata.json: "step" is -7; it must be an integer in [1, 2147483647]`.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace trainctl::checkpoint {

// Where a field lives: `file` names the JSON file in messages, `prefix` the path of the
// object holding the field inside it ("" at the top, "data." for data.samples_consumed).
struct JsonPlace {
  std::string file;
  std::string prefix;
  JsonPlace in(const std::string& key) const { return {file, prefix + key + "."}; }
  std::string field(const std::string& key) const { return prefix + key; }
};

// The member `key` of `object`; throws when it is missing (or `object` is not an object).
const nlohmann::json& json_member(const nlohmann::json& object, const std::string& key,
                                  const JsonPlace& place);
// An integer member in [lo, hi].
int64_t json_int(const nlohmann::json& object, const std::string& key, int64_t lo, int64_t hi,
                 const JsonPlace& place);
// The same for a value that is not a member (an array element); `field` names it.
int64_t json_int_value(const nlohmann::json& v, const std::string& field, int64_t lo, int64_t hi,
                       const JsonPlace& place);
// A string member.
std::string json_string(const nlohmann::json& object, const std::string& key,
                        const JsonPlace& place);
// An array member.
const nlohmann::json& json_array(const nlohmann::json& object, const std::string& key,
                                 const JsonPlace& place);

// Throws the CheckpointCorrupt these functions throw: "<file>: "<field>" <problem>; the
// file was edited or damaged: resume from another checkpoint".
[[noreturn]] void bad_field(const JsonPlace& place, const std::string& field,
                            const std::string& problem);

}  // namespace trainctl::checkpoint
