#include "data/token_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/regular_file.h"

namespace trainctl::data {

namespace {

// Where the tokens lie in the file.
struct TokenSpan {
  uint64_t offset = 0;
  size_t count = 0;
  std::string format;
};

TokenSpan llmc_span(const RegularFile& file) {
  const std::string p = file.path().string();
  const uint64_t bytes = file.size();
  constexpr uint64_t header_bytes = TokenFile::kLlmcHeaderBytes;
  if (bytes < header_bytes) {
    throw InputError(p + ": starts with the llm.c magic " + std::to_string(TokenFile::kLlmcMagic) +
                     " but is only " + std::to_string(bytes) + " bytes, shorter than llm.c's " +
                     std::to_string(header_bytes) +
                     "-byte header; the file is truncated: write it again");
  }
  int32_t header[TokenFile::kLlmcHeaderInts];
  file.read_at(0, header, sizeof header);
  if (header[1] != TokenFile::kLlmcVersion) {
    throw InputError(p + ": llm.c token file version " + std::to_string(header[1]) +
                     " is not supported: trainctl reads version 1 (uint16 tokens; llm.c's "
                     "version 2 stores uint32 tokens); write the tokens as version 1 with a "
                     "vocabulary of at most 65536");
  }
  // The count is a signed 32-bit field: a negative one must never turn into a huge size_t
  // whose byte count wraps around to something that fits the file.
  const int32_t claimed = header[2];
  if (claimed <= 0) {
    throw InputError(p + ": llm.c header says " + std::to_string(claimed) +
                     " tokens; a token file needs at least one. The header is damaged or was "
                     "written by another tool: write the file again");
  }
  uint64_t token_bytes = 0, expected = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(claimed), uint64_t{sizeof(uint16_t)},
                             &token_bytes) ||
      __builtin_add_overflow(token_bytes, header_bytes, &expected)) {
    throw InputError(p + ": llm.c header says " + std::to_string(claimed) +
                     " tokens, more than any file can hold; the header is damaged");
  }
  // llm.c's own loader requires the exact size too: more bytes than the header announces
  // mean a wrong count (tokens would be ignored) or two files concatenated.
  if (expected != bytes) {
    throw InputError(p + ": llm.c header says " + std::to_string(claimed) + " tokens (" +
                     std::to_string(expected) + " bytes with the header) but the file is " +
                     std::to_string(bytes) + " bytes" +
                     (expected > bytes ? " (truncated?)" : " (data after the last token?)") +
                     "; write the file again, or fix the count in the header");
  }
  return {header_bytes, static_cast<size_t>(claimed), "llm.c"};
}

TokenSpan raw_span(const RegularFile& file) {
  const uint64_t bytes = file.size();
  if (bytes % sizeof(uint16_t) != 0) {
    throw InputError(file.path().string() + ": raw token file has an odd size (" +
                     std::to_string(bytes) +
                     " bytes); nanoGPT .bin files hold little-endian uint16 tokens, 2 bytes "
                     "each: the file is truncated or not a token file");
  }
  return {0, static_cast<size_t>(bytes / sizeof(uint16_t)), "raw uint16"};
}

}  // namespace

TokenFile::TokenFile(const std::filesystem::path& path) : path_(path) {
  const RegularFile file(path, "token file (data.path)");
  const std::string p = path.string();
  if (file.size() == 0) {
    throw InputError(p +
                     ": token file is empty (0 bytes); point data.path at a tokenized "
                     "corpus (nanoGPT .bin or llm.c format)");
  }
  int32_t magic = 0;
  if (file.size() >= sizeof magic) file.read_at(0, &magic, sizeof magic);
  // Checked before mapping, so a refused file leaves nothing mapped behind.
  const TokenSpan span = magic == kLlmcMagic ? llmc_span(file) : raw_span(file);

  map_bytes_ = static_cast<size_t>(file.size());
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw InputError(p + ": cannot memory-map token file: " + std::strerror(errno));
  }
  tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const char*>(map_) + span.offset);
  count_ = span.count;
  format_ = span.format;
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

uint16_t TokenFile::max_token() const {
  uint16_t max = 0;
  for (size_t i = 0; i < count_; ++i) max = tokens_[i] > max ? tokens_[i] : max;
  return max;
}

}  // namespace trainctl::data
