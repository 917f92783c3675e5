#include "data/token_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "data/tokenize_file.h"

#include "util/error.h"
#include "util/regular_file.h"

namespace trainctl::data {

namespace {

// Where the tokens lie in the file.
struct TokenSpan {
  uint64_t offset = 0;
  size_t count = 0;
  std::string format;
  int width = 2;
};

// The width of an llm.c-layout file's tokens, from its magic and version; 0 if unknown.
int llmc_width(int32_t magic, int32_t version) {
  if (magic == TokenFile::kLlmcMagic && version == TokenFile::kLlmcVersion) return 2;
  if (magic == TokenFile::kLlmcMagic && version == TokenFile::kLlmcVersionUint32) return 4;
  if (magic == TokenFile::kLlmcLlama3Magic && version == TokenFile::kLlmcLlama3Version) return 4;
  return 0;
}

TokenSpan llmc_span(const RegularFile& file) {
  const std::string p = file.path().string();
  const uint64_t bytes = file.size();
  constexpr uint64_t header_bytes = TokenFile::kLlmcHeaderBytes;
  if (bytes < header_bytes) {
    throw InputError(p + ": starts with an llm.c magic number but is only " +
                     std::to_string(bytes) + " bytes, shorter than llm.c's " +
                     std::to_string(header_bytes) +
                     "-byte header; the file is truncated: write it again");
  }
  int32_t header[TokenFile::kLlmcHeaderInts];
  file.read_at(0, header, sizeof header);
  const int width = llmc_width(header[0], header[1]);
  if (width == 0) {
    throw InputError(p + ": llm.c token file version " + std::to_string(header[1]) + " (magic " +
                     std::to_string(header[0]) +
                     ") is not supported: trainctl reads magic 20240520 version 1 (uint16 "
                     "tokens) or version 2 (uint32 tokens), and llm.c's Llama 3 files (magic "
                     "20240801, version 7); write the tokens again with `trainctl data prepare`");
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
  if (__builtin_mul_overflow(static_cast<uint64_t>(claimed), static_cast<uint64_t>(width),
                             &token_bytes) ||
      __builtin_add_overflow(token_bytes, header_bytes, &expected)) {
    throw InputError(p + ": llm.c header says " + std::to_string(claimed) +
                     " tokens, more than any file can hold; the header is damaged");
  }
  // llm.c's own loader requires the exact size too: more bytes than the header announces
  // mean a wrong count (tokens would be ignored) or two files concatenated.
  if (expected != bytes) {
    throw InputError(p + ": llm.c header says " + std::to_string(claimed) +
                     (width == 4 ? " uint32 tokens (" : " tokens (") + std::to_string(expected) +
                     " bytes with the header) but the file is " + std::to_string(bytes) + " bytes" +
                     (expected > bytes ? " (truncated?)" : " (data after the last token?)") +
                     "; write the file again, or fix the count in the header");
  }
  return {header_bytes, static_cast<size_t>(claimed), width == 2 ? "llm.c" : "llm.c uint32", width};
}

TokenSpan raw_span(const RegularFile& file) {
  const uint64_t bytes = file.size();
  if (bytes % sizeof(uint16_t) != 0) {
    throw InputError(file.path().string() + ": raw token file has an odd size (" +
                     std::to_string(bytes) +
                     " bytes); nanoGPT .bin files hold little-endian uint16 tokens, 2 bytes "
                     "each: the file is truncated or not a token file");
  }
  return {0, static_cast<size_t>(bytes / sizeof(uint16_t)), "raw uint16", 2};
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
  const TokenSpan span =
      magic == kLlmcMagic || magic == kLlmcLlama3Magic ? llmc_span(file) : raw_span(file);

  map_bytes_ = static_cast<size_t>(file.size());
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw InputError(p + ": cannot memory-map token file: " + std::strerror(errno));
  }
  tokens_ = static_cast<const char*>(map_) + span.offset;
  count_ = span.count;
  width_ = span.width;
  format_ = span.format;
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

template <typename T>
uint32_t max_of(const T* p, size_t n) {
  T max = 0;
  for (size_t i = 0; i < n; ++i) max = p[i] > max ? p[i] : max;
  return max;
}

uint32_t TokenFile::max_token() const {
  return width_ == 2 ? max_of(static_cast<const uint16_t*>(tokens_), count_)
                     : max_of(static_cast<const uint32_t*>(tokens_), count_);
}

void TokenFile::copy(size_t begin, size_t count, int32_t* out) const {
  if (width_ == 2) {
    const uint16_t* p = static_cast<const uint16_t*>(tokens_) + begin;
    for (size_t i = 0; i < count; ++i) out[i] = p[i];
  } else {
    const uint32_t* p = static_cast<const uint32_t*>(tokens_) + begin;
    for (size_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(p[i]);
  }
}

void write_token_file(const std::filesystem::path& path, const int32_t* ids, size_t count,
                      int64_t vocab_size) {
  const bool narrow = vocab_size <= TokenFile::kUint16Vocab;
  const size_t width = narrow ? 2 : 4;
  std::vector<char> bytes(TokenFile::kLlmcHeaderBytes + count * width);
  int32_t header[TokenFile::kLlmcHeaderInts] = {};
  header[0] = TokenFile::kLlmcMagic;
  header[1] = narrow ? TokenFile::kLlmcVersion : TokenFile::kLlmcVersionUint32;
  header[2] = static_cast<int32_t>(count);
  std::memcpy(bytes.data(), header, sizeof header);
  char* dst = bytes.data() + sizeof header;
  for (size_t i = 0; i < count; ++i) {
    if (narrow) {
      const auto v = static_cast<uint16_t>(ids[i]);
      std::memcpy(dst + i * 2, &v, 2);
    } else {
      const auto v = static_cast<uint32_t>(ids[i]);
      std::memcpy(dst + i * 4, &v, 4);
    }
  }
  write_file_atomically(path, bytes.data(), bytes.size());
}

}  // namespace trainctl::data
