#include "launch/tcp_store_client.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "launch/tcp_store_wire.h"

namespace trainctl::launch {
namespace {

using wire::Clock;

// A get/wait reply is due at its timeout; allow this much more for the network.
constexpr auto kReplyGrace = std::chrono::seconds(10);

std::string seconds_text(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 4; ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > 4) out += ", ... (" + std::to_string(keys.size()) + " keys)";
  return out;
}

}  // namespace

TcpStoreClient::TcpStoreClient(std::string host, int port, std::string token,
                               StoreClientOptions options)
    : address_(host + ":" + std::to_string(port)), options_(options) {
  const auto deadline = Clock::now() + options_.connect_timeout;
  auto backoff = std::chrono::milliseconds(50);
  std::string last_error;
  for (;;) {
    try {
      fd_ = wire::connect_once(host, port, deadline);
      break;
    } catch (const wire::SocketError& e) {
      last_error = e.what();
    }
    if (Clock::now() + backoff >= deadline) {
      throw RendezvousError("cannot reach the rendezvous store at " + address_ + " within " +
                            seconds_text(options_.connect_timeout) + " (last error: " + last_error +
                            "); check that node 0's launcher is running and that "
                            "--master-addr/--master-port match on every node");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }

  wire::Writer hello;
  hello.str(token);
  uint8_t status = 0;
  try {
    wire::send_all(fd_, hello.bytes(), Clock::now() + options_.timeout);
    wire::recv_exact(fd_, &status, 1, Clock::now() + options_.timeout);
  } catch (const wire::SocketError& e) {
    status = static_cast<uint8_t>(wire::Status::rejected);
  }
  if (status != static_cast<uint8_t>(wire::Status::ok)) {
    ::close(fd_);
    fd_ = -1;
    throw TokenRejectedError(
        "store at " + address_ +
        " rejected the job token: every node must use the same token (--token or "
        "TRAINCTL_TOKEN, or the run_dir/.rendezvous_token file that node 0 writes); a token "
        "left by an earlier run, or another job using the same --master-port, also causes this");
  }
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpStoreClient::fail(const std::string& what) const {
  throw RendezvousError("rendezvous store at " + address_ + ": " + what);
}

void TcpStoreClient::read(void* out, size_t n, std::chrono::milliseconds within) {
  try {
    wire::recv_exact(fd_, out, n, Clock::now() + within);
  } catch (const wire::SocketError& e) {
    // The reply stream is out of step now: later calls must not read half a reply.
    ::close(fd_);
    fd_ = -1;
    fail(std::string("lost the connection (") + e.what() +
         "); node 0's launcher has probably stopped");
  }
}

uint8_t TcpStoreClient::roundtrip(const std::string& request,
                                  std::chrono::milliseconds reply_within) {
  if (fd_ < 0) fail("the connection was closed after an earlier error");
  try {
    wire::send_all(fd_, request, Clock::now() + options_.timeout);
  } catch (const wire::SocketError& e) {
    ::close(fd_);
    fd_ = -1;
    fail(std::string("lost the connection (") + e.what() +
         "); node 0's launcher has probably stopped");
  }
  uint8_t status = 0;
  read(&status, 1, reply_within);
  return status;
}

void TcpStoreClient::set(const std::string& key, const std::vector<char>& data) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(wire::Op::set));
  w.str(key);
  w.str(std::string_view(data.data(), data.size()));
  std::lock_guard lock(mu_);
  if (roundtrip(w.bytes(), options_.timeout) != static_cast<uint8_t>(wire::Status::ok)) {
    fail("unexpected reply to set('" + key + "')");
  }
}

std::vector<char> TcpStoreClient::get(const std::string& key) { return get(key, options_.timeout); }

std::vector<char> TcpStoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(wire::Op::get));
  w.str(key);
  w.u64(static_cast<uint64_t>(std::max<int64_t>(timeout.count(), 0)));
  std::lock_guard lock(mu_);
  uint8_t status = roundtrip(w.bytes(), timeout + kReplyGrace);
  if (status == static_cast<uint8_t>(wire::Status::timeout)) {
    fail("timed out after " + seconds_text(timeout) + " waiting for key '" + key +
         "' (a worker or node did not arrive; see the other ranks' logs)");
  }
  if (status != static_cast<uint8_t>(wire::Status::ok)) fail("unexpected reply to get");
  uint32_t len = 0;
  read(&len, sizeof len, options_.timeout);
  std::vector<char> value(len);
  if (len > 0) read(value.data(), len, options_.timeout);
  return value;
}

void TcpStoreClient::wait(const std::vector<std::string>& keys) { wait(keys, options_.timeout); }

void TcpStoreClient::wait(const std::vector<std::string>& keys,
                          const std::chrono::milliseconds& timeout) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(wire::Op::wait));
  w.u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) w.str(k);
  w.u64(static_cast<uint64_t>(std::max<int64_t>(timeout.count(), 0)));
  std::lock_guard lock(mu_);
  uint8_t status = roundtrip(w.bytes(), timeout + kReplyGrace);
  if (status == static_cast<uint8_t>(wire::Status::timeout)) {
    fail("timed out after " + seconds_text(timeout) + " waiting for " + join_keys(keys) +
         " (a worker or node did not arrive; see the other ranks' logs)");
  }
  if (status != static_cast<uint8_t>(wire::Status::ok)) fail("unexpected reply to wait");
}

int64_t TcpStoreClient::add(const std::string& key, int64_t delta) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(wire::Op::add));
  w.str(key);
  w.i64(delta);
  std::lock_guard lock(mu_);
  if (roundtrip(w.bytes(), options_.timeout) != static_cast<uint8_t>(wire::Status::ok)) {
    fail("unexpected reply to add('" + key + "')");
  }
  int64_t value = 0;
  read(&value, sizeof value, options_.timeout);
  return value;
}

bool TcpStoreClient::check(const std::vector<std::string>& keys) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(wire::Op::check));
  w.u32(static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) w.str(k);
  std::lock_guard lock(mu_);
  if (roundtrip(w.bytes(), options_.timeout) != static_cast<uint8_t>(wire::Status::ok)) {
    fail("unexpected reply to check");
  }
  uint8_t present = 0;
  read(&present, 1, options_.timeout);
  return present != 0;
}

void TcpStoreClient::set_string(const std::string& key, const std::string& value) {
  set(key, std::vector<char>(value.begin(), value.end()));
}

std::string TcpStoreClient::get_string(const std::string& key, std::chrono::milliseconds timeout) {
  std::vector<char> v = get(key, timeout);
  return std::string(v.begin(), v.end());
}

bool store_reachable(const std::string& host, int port, std::chrono::milliseconds within) {
  try {
    ::close(wire::connect_once(host, port, Clock::now() + within));
    return true;
  } catch (const wire::SocketError&) {
    return false;
  }
}

}  // namespace trainctl::launch
