#include "checkpoint/metadata_checksum.h"

#include "checkpoint/checksum.h"

namespace trainctl::checkpoint {

std::string metadata_checksum(const nlohmann::json& doc) {
  nlohmann::json rest = doc;
  rest.erase(kMetadataChecksumKey);
  // `replace` never throws on invalid UTF-8: such a document still gets a (mismatching) sum.
  const std::string text = rest.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return checksum_text(crc32c(text.data(), text.size()));
}

}  // namespace trainctl::checkpoint
