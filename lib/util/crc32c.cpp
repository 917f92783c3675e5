#include "util/crc32c.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <string_view>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace trainctl::crc32c_detail {

namespace {

constexpr uint32_t kPolynomial = 0x82f63b78u;  // Castagnoli, reflected

// Slicing-by-8 tables for the reflected polynomial, computed at compile time.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
  return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

uint32_t software_update(uint32_t c, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (bytes >= 8) {
    uint32_t lo = 0, hi = 0;
    std::memcpy(&lo, p, 4);  // little-endian hosts only (x86-64, aarch64)
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xff] ^ kTables[2][(hi >> 8) & 0xff] ^
        kTables[1][(hi >> 16) & 0xff] ^ kTables[0][hi >> 24];
    p += 8;
    bytes -= 8;
  }
  while (bytes-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xff];
  return c;
}

#if defined(__x86_64__)

namespace {

// The register is linear over GF(2): the register after A then B equals
// shift(register after A, |B|) ^ (register after B started from 0), where shift(r, n) is r
// followed by n zero bytes. That lets three streams over consecutive blocks run at once
// (the crc32 instruction has a latency of 3 cycles and a throughput of 1) and be joined.
// shift by a fixed n is a 32x32 bit matrix, applied a byte at a time through 4 tables.
using ShiftTable = std::array<std::array<uint32_t, 256>, 4>;

__attribute__((target("sse4.2"))) uint32_t zeros(uint32_t r, size_t n) {
  for (size_t i = 0; i < n / 8; ++i) r = static_cast<uint32_t>(_mm_crc32_u64(r, 0));
  return r;
}

__attribute__((target("sse4.2"))) ShiftTable make_shift(size_t n) {
  std::array<uint32_t, 32> basis{};
  for (int b = 0; b < 32; ++b) basis[b] = zeros(1u << b, n);
  ShiftTable t{};
  for (int k = 0; k < 4; ++k) {
    for (uint32_t v = 0; v < 256; ++v) {
      uint32_t r = 0;
      for (int b = 0; b < 8; ++b) {
        if (v & (1u << b)) r ^= basis[8 * k + b];
      }
      t[k][v] = r;
    }
  }
  return t;
}

uint32_t shift(const ShiftTable& t, uint32_t r) {
  return t[0][r & 0xff] ^ t[1][(r >> 8) & 0xff] ^ t[2][(r >> 16) & 0xff] ^ t[3][r >> 24];
}

constexpr size_t kLong = 8192, kShort = 256;  // bytes per stream in a block of three

struct Shifts {
  ShiftTable long_block = make_shift(kLong), short_block = make_shift(kShort);
};

const Shifts& shifts() {
  static const Shifts s;  // built once (~0.3 ms), immutable afterwards
  return s;
}

// Three streams of `n` bytes each (n a multiple of 8) from p, joined into `c`.
__attribute__((target("sse4.2"))) uint32_t three_streams(uint32_t c, const unsigned char* p,
                                                         size_t n, const ShiftTable& t) {
  uint64_t c0 = c, c1 = 0, c2 = 0;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w0 = 0, w1 = 0, w2 = 0;
    std::memcpy(&w0, p + i, 8);
    std::memcpy(&w1, p + n + i, 8);
    std::memcpy(&w2, p + 2 * n + i, 8);
    c0 = _mm_crc32_u64(c0, w0);
    c1 = _mm_crc32_u64(c1, w1);
    c2 = _mm_crc32_u64(c2, w2);
  }
  uint32_t r = shift(t, static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
  return shift(t, r) ^ static_cast<uint32_t>(c2);
}

}  // namespace

__attribute__((target("sse4.2"))) uint32_t hardware_update(uint32_t c, const void* data,
                                                           size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  const Shifts& s = shifts();
  for (; bytes >= 3 * kLong; p += 3 * kLong, bytes -= 3 * kLong) {
    c = three_streams(c, p, kLong, s.long_block);
  }
  for (; bytes >= 3 * kShort; p += 3 * kShort, bytes -= 3 * kShort) {
    c = three_streams(c, p, kShort, s.short_block);
  }
  uint64_t c64 = c;
  for (; bytes >= 8; p += 8, bytes -= 8) {
    uint64_t w = 0;
    std::memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
  }
  c = static_cast<uint32_t>(c64);
  for (; bytes > 0; ++p, --bytes) c = _mm_crc32_u8(c, *p);
  return c;
}

bool hardware_available() { return __builtin_cpu_supports("sse4.2"); }

#else

uint32_t hardware_update(uint32_t c, const void* data, size_t bytes) {
  return software_update(c, data, bytes);
}
bool hardware_available() { return false; }

#endif

namespace {

// Chosen once per process: the instruction where the CPU has it, unless
// TRAINCTL_CRC32C=software asks for the table path (to compare the two end to end).
bool use_hardware() {
  static const bool hardware = [] {
    const char* forced = std::getenv("TRAINCTL_CRC32C");
    if (forced != nullptr && std::string_view(forced) == "software") return false;
    return hardware_available();
  }();
  return hardware;
}

}  // namespace

const char* active_path() { return use_hardware() ? "sse4.2" : "software"; }

}  // namespace trainctl::crc32c_detail

namespace trainctl {

void Crc32c::update(const void* data, size_t bytes) {
  state_ = crc32c_detail::use_hardware() ? crc32c_detail::hardware_update(state_, data, bytes)
                                         : crc32c_detail::software_update(state_, data, bytes);
}

uint32_t crc32c(const void* data, size_t bytes) {
  Crc32c crc;
  crc.update(data, bytes);
  return crc.value();
}

}  // namespace trainctl
