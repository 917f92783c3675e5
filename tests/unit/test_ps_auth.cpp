// The parameter servers' handshake primitives (ps/ps_auth.h, ps/ps_handshake.h): SHA-256
// and HMAC-SHA256 against the published test vectors, the proofs' bindings, and the hello
// reader that a server runs on bytes from strangers.
#include <catch2/catch.hpp>
#include <string>

#include "ps/ps_auth.h"
#include "ps/ps_handshake.h"
#include "ps/ps_wire.h"

using namespace trainctl::ps;

namespace {

std::string hex_sha(const std::string& s) { return auth::to_hex(auth::sha256(s)); }
std::string hex_hmac(const std::string& k, const std::string& m) {
  return auth::to_hex(auth::hmac_sha256(k, m));
}

std::string hello_bytes(int64_t worker, const std::string& text, wire::MsgType type) {
  const int64_t i[4] = {worker, 0, 0, 0};
  const std::vector<char> head = wire::encode_head(type, i, 0.0, {}, text, 0);
  return std::string(head.begin(), head.end());
}

}  // namespace

TEST_CASE("SHA-256 and HMAC-SHA256 give the published test vectors", "[ps][auth]") {
  // FIPS 180-4 examples: one block, two blocks (56 bytes leave no room for the length),
  // many blocks.
  CHECK(hex_sha("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex_sha("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex_sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(hex_sha(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // RFC 4231 test cases 1, 2 and 6 (a key longer than a block is hashed first).
  CHECK(hex_hmac(std::string(20, '\x0b'), "Hi There") ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex_hmac("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hex_hmac(std::string(131, '\xaa'),
                 "Test Using Larger Than Block-Size Key - Hash Key First") ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("handshake proofs bind the token, both nonces, the index and the role", "[ps][auth]") {
  const std::string a = auth::nonce(), b = auth::nonce();
  CHECK(a.size() == auth::kNonceHex);
  CHECK(a != b);
  const std::string p = auth::worker_proof("tok", a, b, 1);
  CHECK(p.size() == auth::kProofHex);
  CHECK(p == auth::worker_proof("tok", a, b, 1));
  CHECK(p != auth::worker_proof("tok2", a, b, 1));
  CHECK(p != auth::worker_proof("tok", b, a, 1));
  CHECK(p != auth::worker_proof("tok", a, b, 0));
  CHECK(p != auth::server_proof("tok", a, b, 1));
  CHECK(auth::constant_time_equal(p, auth::worker_proof("tok", a, b, 1)));
  CHECK_FALSE(auth::constant_time_equal(p, p.substr(1)));
  CHECK_FALSE(auth::constant_time_equal(p, auth::worker_proof("tok", a, b, 2)));

  auth::HelloText h;
  REQUIRE(auth::parse_hello(auth::join_hello({a, p}), &h));
  CHECK(h.client_nonce == a);
  CHECK(h.proof == p);
  CHECK_FALSE(auth::parse_hello("", &h));
  CHECK_FALSE(auth::parse_hello(a + p, &h));                         // no separator
  CHECK_FALSE(auth::parse_hello(a + "\n" + p.substr(1), &h));        // short proof
  CHECK_FALSE(auth::parse_hello(a + "\n" + p + "\n", &h));           // trailing bytes
  CHECK_FALSE(auth::parse_hello(a + "\n" + "Z" + p.substr(1), &h));  // not hex
}

TEST_CASE("the hello reader takes a hello byte by byte and refuses anything else early",
          "[ps][auth]") {
  const std::string text = auth::join_hello({auth::nonce(), std::string(64, 'a')});
  const std::string bytes = hello_bytes(3, text, wire::MsgType::hello);
  HelloReader reader("test peer");
  size_t fed = 0;
  while (!reader.complete()) {
    REQUIRE(reader.wanted() > 0);
    reader.feed(bytes.data() + fed, 1);
    ++fed;
  }
  CHECK(fed == bytes.size());
  CHECK(reader.worker() == 3);
  CHECK(reader.text() == text);

  // Another message type, a text longer than a hello's, a foreign protocol: refused as soon
  // as the header is in, before any of the rest is read.
  for (const std::string& bad :
       {hello_bytes(0, text, wire::MsgType::push),
        hello_bytes(0, text + text, wire::MsgType::hello),
        std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n") + std::string(72, ' ')}) {
    HelloReader r("test peer");
    CHECK_THROWS_AS(r.feed(bad.data(), sizeof(wire::Header)), wire::WireError);
  }
}
