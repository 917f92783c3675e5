#pragma once
// Deterministic, counter-based randomness. Everything random in a run (initial weights,
// data sampling, synthetic corpora) is a pure function of (seed, stream, index), so any
// step can be reproduced on any layout without carrying generator state around.
#include <cmath>
#include <cstdint>
#include <string_view>

namespace trainctl::rng {

// SplitMix64 finaliser: a good 64-bit mix, used as a hash of counters.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr uint64_t hash(uint64_t a, uint64_t b) { return mix64(a ^ mix64(b)); }
constexpr uint64_t hash(uint64_t a, uint64_t b, uint64_t c) { return hash(hash(a, b), c); }

// FNV-1a of a name, to derive a stream id from a parameter name.
constexpr uint64_t hash_name(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char ch : s) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ULL;
  return h;
}

// Uniform in (0, 1), never 0, from 53 random bits.
inline double uniform01(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal for element `index` of stream `stream` (Box-Muller over two hashes).
inline double normal(uint64_t stream, uint64_t index) {
  const double u1 = uniform01(hash(stream, 2 * index));
  const double u2 = uniform01(hash(stream, 2 * index + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace trainctl::rng
