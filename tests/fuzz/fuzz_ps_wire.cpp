// Fuzz target: the parameter-server wire format (ps/ps_wire.h) and the handshake a server
// runs on bytes from anyone who connects (ps/ps_handshake.h, ps/ps_auth.h). The input is
// what a peer sends. Checks beyond "no crash":
//   - a header decode_header() accepts has a known type and counts within the bounds, and
//     encode_head() writes the accepted bytes back exactly (header, ints, text);
//   - the stream reader (Connection::receive over a socketpair) reads messages whose ints
//     and text are those bytes, and fails only with WireError;
//   - the hello reader never asks for more than a hello may hold, and a text it completes
//     parses only into hex fields of the proof's lengths.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "ps/ps_auth.h"
#include "ps/ps_handshake.h"
#include "ps/ps_wire.h"

using namespace trainctl;
using namespace trainctl::ps;

namespace {

constexpr size_t kHeader = sizeof(wire::Header);

// decode_header() and its inverse on the input's first bytes.
void check_header(const uint8_t* data, size_t size) {
  if (size < kHeader) return;
  const auto* bytes = reinterpret_cast<const char*>(data);
  wire::Header h;
  try {
    h = wire::decode_header(std::span<const char, kHeader>(bytes, kHeader), "fuzz");
  } catch (const wire::WireError& e) {
    fuzz::require(e.kind() == wire::WireError::Kind::protocol, "decode_header: not protocol");
    return;
  }
  fuzz::require(h.type >= 1 && h.type <= 11, "decode_header accepted an unknown type");
  fuzz::require(h.ints >= 0 && h.ints <= (1 << 20), "decode_header accepted ints out of range");
  fuzz::require(h.text >= 0 && h.text <= (1 << 20), "decode_header accepted text out of range");
  fuzz::require(h.floats >= 0, "decode_header accepted negative floats");
  const size_t body = static_cast<size_t>(h.ints) * 8 + static_cast<size_t>(h.text);
  if (size < kHeader + body) return;
  std::vector<int64_t> ints(static_cast<size_t>(h.ints));
  if (!ints.empty()) std::memcpy(ints.data(), bytes + kHeader, ints.size() * 8);
  const std::string text(bytes + kHeader + ints.size() * 8, static_cast<size_t>(h.text));
  const std::vector<char> again =
      wire::encode_head(static_cast<wire::MsgType>(h.type), h.i, h.x, ints, text, h.floats);
  fuzz::require(
      again.size() == kHeader + body && std::memcmp(again.data(), bytes, again.size()) == 0,
      "encode_head does not write back what decode_header accepted");
}

// The stream reader, as a server or worker runs it on a connection: every message until
// the bytes run out (their floats read when few, as a server reads a push it expects).
void check_stream(const uint8_t* data, size_t size) {
  int fds[2];
  fuzz::require(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0, "socketpair");
  size_t done = 0;
  while (done < size) {  // the inputs are far below the socket's buffer
    const ssize_t n = ::write(fds[1], data + done, size - done);
    fuzz::require(n > 0, "write to the socketpair failed");
    done += static_cast<size_t>(n);
  }
  ::close(fds[1]);
  wire::Connection conn(fds[0], "fuzz");
  const wire::Deadline deadline = wire::deadline_in(std::chrono::seconds(5));
  size_t consumed = 0;
  try {
    for (;;) {
      const wire::Message m = conn.receive(deadline, deadline);
      consumed += kHeader + m.ints.size() * 8 + m.text.size();
      fuzz::require(consumed <= size, "receive returned more bytes than were sent");
      if (m.floats > 4096) break;
      std::vector<float> floats(static_cast<size_t>(m.floats));
      conn.read_floats(floats.data(), m.floats, deadline);
      consumed += floats.size() * 4;
      (void)wire::split_names(m.text);
    }
  } catch (const wire::WireError&) {
  }
}

// The server's hello reader, fed as a peer would send (in pieces), then the proof check.
void check_hello(const uint8_t* data, size_t size) {
  HelloReader reader("fuzz");
  const auto* bytes = reinterpret_cast<const char*>(data);
  size_t at = 0;
  try {
    while (!reader.complete() && at < size) {
      const size_t piece = std::min({reader.wanted(), size - at, size_t{1} + (at % 7)});
      fuzz::require(reader.wanted() <= kHeader + auth::kMaxHelloText,
                    "hello reader wants too much");
      reader.feed(bytes + at, piece);
      at += piece;
    }
  } catch (const wire::WireError& e) {
    fuzz::require(e.kind() == wire::WireError::Kind::protocol, "hello reader: not protocol");
    return;
  }
  if (!reader.complete()) return;
  fuzz::require(reader.text().size() <= auth::kMaxHelloText, "hello text longer than allowed");
  auth::HelloText h;
  if (auth::parse_hello(reader.text(), &h)) {
    fuzz::require(h.client_nonce.size() == auth::kNonceHex && h.proof.size() == auth::kProofHex,
                  "parse_hello accepted fields of the wrong length");
    const std::string expected = auth::worker_proof("token", std::string(auth::kNonceHex, '0'),
                                                    h.client_nonce, reader.worker());
    fuzz::require(auth::constant_time_equal(h.proof, expected) == (h.proof == expected),
                  "constant_time_equal disagrees with ==");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_header(data, size);
  check_stream(data, size);
  check_hello(data, size);
  return 0;
}
