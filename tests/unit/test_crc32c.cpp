// CRC-32C: both paths (the SSE4.2 instruction with three interleaved streams, and the
// slicing-by-8 tables) give the same bits on every length, alignment and split, and the
// published check values.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "util/crc32c.h"

using namespace trainctl;
namespace detail = trainctl::crc32c_detail;

namespace {

std::vector<unsigned char> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

}  // namespace

TEST_CASE("crc32c: published check values on the path this process uses", "[unit][crc32c]") {
  const std::string digits = "123456789";
  CHECK(crc32c(digits.data(), digits.size()) == 0xe3069283u);
  const std::vector<unsigned char> zeros(32, 0), ones(32, 0xff);
  CHECK(crc32c(zeros.data(), zeros.size()) == 0x8a9136aau);  // RFC 3720 B.4
  CHECK(crc32c(ones.data(), ones.size()) == 0x62a8ab43u);
  CHECK(crc32c(nullptr, 0) == 0u);
  INFO("path: " << detail::active_path());
  CHECK((std::string(detail::active_path()) == "sse4.2") == detail::hardware_available());
}

TEST_CASE("crc32c: the instruction path equals the table path on every length and alignment",
          "[unit][crc32c]") {
  if (!detail::hardware_available()) {
    WARN("this CPU has no SSE4.2 crc32 instruction: only the table path runs here");
    return;
  }
  const std::vector<unsigned char> data = random_bytes(3 * 8192 * 3 + 4096, 7);
  // Lengths around every block boundary of the three-stream loops (3 x 256, 3 x 8192).
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 64; ++n) lengths.push_back(n);
  for (size_t base : {size_t{768}, size_t{3 * 8192}, size_t{2 * 3 * 8192}}) {
    for (size_t d = 0; d <= 17; ++d) {
      lengths.push_back(base + d);
      lengths.push_back(base - d);
    }
  }
  lengths.push_back(data.size() - 8);
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n : lengths) {
      if (offset + n > data.size()) continue;
      const unsigned char* p = data.data() + offset;
      for (uint32_t state : {0xffffffffu, 0u, 0x12345678u}) {
        INFO("offset " << offset << ", length " << n << ", state " << state);
        REQUIRE(detail::hardware_update(state, p, n) == detail::software_update(state, p, n));
      }
    }
  }
}

TEST_CASE("crc32c: update() over pieces equals one pass", "[unit][crc32c]") {
  const std::vector<unsigned char> data = random_bytes(100'000, 11);
  const uint32_t whole = crc32c(data.data(), data.size());
  CHECK(whole == ~detail::software_update(0xffffffffu, data.data(), data.size()));
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    Crc32c crc;
    size_t at = 0;
    while (at < data.size()) {
      const size_t n = std::min<size_t>(data.size() - at, rng() % 30'000);
      crc.update(data.data() + at, n);
      at += n;
    }
    CHECK(crc.value() == whole);
  }
}
