#pragma once
// Helpers for the comm tests: run N ranks as threads of this process and connect them
// over an in-process HashStore. Catch2 assertions are not thread-safe, so rank bodies
// report failures by throwing; run_ranks rethrows the first one on the test thread.
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace trainctl::comm::testing {

inline void run_ranks(int n, const std::function<void(int rank)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// A connected world context for `rank` of `n` (its own TCP device on loopback).
// connectFullMesh can return on one rank before the other has finished, so a test must
// run a collective (e.g. barrier) before a rank drops its context.
inline std::shared_ptr<gloo::Context> connect_world(
    gloo::rendezvous::Store& store, int rank, int n,
    std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, n);
  context->setTimeout(timeout);
  if (n > 1) {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    context->connectFullMesh(store, device);
  }
  return context;
}

}  // namespace trainctl::comm::testing
