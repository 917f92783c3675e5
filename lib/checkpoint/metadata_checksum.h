#pragma once
// The checksum metadata.json carries of itself. A checksum cannot cover the bytes it is
// written into, so it covers the document without it, in one canonical text: the compact
// JSON of every other member, keys sorted (nlohmann::json's order), UTF-8 unescaped; in
// Python json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False) for
// documents of strings and integers. Re-indenting the file keeps it valid; changing any
// value, key or number's spelling (20 -> 21, 20 -> 20.0) does not.
//
// A CRC-32C detects edits and damage, not deliberate forgery: whoever edits the file on
// purpose can recompute it.
#include <nlohmann/json.hpp>
#include <string>

namespace trainctl::checkpoint {

inline constexpr const char* kMetadataChecksumKey = "metadata_checksum";

// "crc32c:xxxxxxxx" of `doc` without its kMetadataChecksumKey member (doc: a JSON object).
std::string metadata_checksum(const nlohmann::json& doc);

}  // namespace trainctl::checkpoint
