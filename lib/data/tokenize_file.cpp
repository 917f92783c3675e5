#include "data/tokenize_file.h"

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "tokenizer/parallel_encode.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace trainctl::data {

namespace {
constexpr uint64_t kMaxTextBytes = 64ull << 30;

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

void write_file_atomically(const std::filesystem::path& path, const void* bytes, size_t size) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    throw InputError(path.string() + ": cannot write: " + std::strerror(errno));
  }
  const bool ok = std::fwrite(bytes, 1, size, f) == size;
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    throw InputError(path.string() + ": write failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw InputError(path.string() + ": cannot rename the temporary file: " + ec.message());
}

EncodeStats encode_file(const tokenizer::Tokenizer& tokenizer, const std::filesystem::path& input,
                        const std::filesystem::path& out, int threads) {
  const RegularFile file(input, "text file");
  const std::string text = file.read_all(kMaxTextBytes);
  tokenizer::require_utf8(text, input.string());
  const double cpu0 = process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tokenizer::encode_text(tokenizer, text, threads);
  const auto t1 = std::chrono::steady_clock::now();
  const double cpu1 = process_cpu_seconds();
  std::vector<uint32_t> le(ids.begin(), ids.end());  // x86-64 and aarch64 are little-endian
  write_file_atomically(out, le.data(), le.size() * sizeof(uint32_t));
  return {text.size(), ids.size(), std::chrono::duration<double>(t1 - t0).count(), cpu1 - cpu0};
}

size_t decode_file(const tokenizer::Tokenizer& tokenizer, const std::filesystem::path& input,
                   const std::filesystem::path& out) {
  const RegularFile file(input, "token id file (uint32)");
  const std::string raw = file.read_all(kMaxTextBytes);
  if (raw.size() % sizeof(uint32_t) != 0) {
    throw InputError(input.string() + ": " + std::to_string(raw.size()) +
                     " bytes is not a whole number of uint32 token ids");
  }
  std::vector<int32_t> ids(raw.size() / sizeof(uint32_t));
  std::memcpy(ids.data(), raw.data(), raw.size());
  std::string text;
  try {
    tokenizer.decode(ids.data(), ids.size(), text);
  } catch (const InputError& e) {
    throw InputError(input.string() + ": " + e.what());
  }
  write_file_atomically(out, text.data(), text.size());
  return ids.size();
}

}  // namespace trainctl::data
