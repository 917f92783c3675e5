#pragma once
// How a parameter server and a worker prove to each other that they belong to the same
// job (issue 36): both hold the job token (launch/job_token.h), and neither sends it.
//
//   server -> worker   challenge: a fresh random server nonce
//   worker -> server   hello: its worker index, a fresh client nonce and
//                      worker_proof = HMAC-SHA256(token, both nonces, the worker index)
//   server -> worker   hello: its shard and server_proof = HMAC-SHA256(token, both nonces,
//                      the server index)
// A process without the token cannot compute a proof; one that saw an earlier handshake
// cannot replay it (the nonces are new on every connection); a proof names the worker
// index, so it cannot be reused to claim another slot. An empty token is a key like any
// other (the in-process tests use one); the launcher always has a real token.
#include <cstdint>
#include <string>
#include <string_view>

namespace trainctl::ps::auth {

// SHA-256 of `data` (FIPS 180-4), 32 raw bytes.
std::string sha256(std::string_view data);
// HMAC-SHA256 (RFC 2104) of `message` under `key`, 32 raw bytes.
std::string hmac_sha256(std::string_view key, std::string_view message);
// Lower-case hex of raw bytes.
std::string to_hex(std::string_view bytes);

// A fresh nonce: 16 bytes from the kernel's random source as 32 hex digits. Throws
// std::runtime_error when the kernel cannot provide them.
std::string nonce();

// True when a and b are equal; the time taken depends on their lengths only, not on
// where they first differ, so a wrong proof's timing reveals nothing about the right one.
bool constant_time_equal(std::string_view a, std::string_view b);

// The proofs of the handshake above, as 64 hex digits.
std::string worker_proof(std::string_view token, std::string_view server_nonce,
                         std::string_view client_nonce, int64_t worker);
std::string server_proof(std::string_view token, std::string_view server_nonce,
                         std::string_view client_nonce, int64_t server);

// A worker's hello text: its nonce and its proof, '\n'-separated.
struct HelloText {
  std::string client_nonce;
  std::string proof;
};
std::string join_hello(const HelloText& h);
// Parses a hello's text. Returns false (and leaves `out` unspecified) when the text is not
// two '\n'-separated fields of the expected lengths in hex digits.
bool parse_hello(std::string_view text, HelloText* out);

inline constexpr size_t kNonceHex = 32;
inline constexpr size_t kProofHex = 64;
// The longest hello text a server reads before authentication.
inline constexpr size_t kMaxHelloText = kNonceHex + 1 + kProofHex;

}  // namespace trainctl::ps::auth
