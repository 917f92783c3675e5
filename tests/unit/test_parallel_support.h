#pragma once
// Helpers for the data-parallel tests: DP groups of threads over an in-process HashStore
// (test_comm_support.h), deterministic per-rank gradients, and a Communicator that only
// records what it is asked to do.
#include <gloo/rendezvous/hash_store.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "comm/gloo/gloo_communicator.h"
#include "test_comm_support.h"

namespace trainctl::parallel::testing {

// Runs body(comm) on n ranks (threads) of one Gloo group; failures are rethrown here.
inline void on_dp_group(int n, const std::function<void(comm::Communicator&)>& body) {
  gloo::rendezvous::HashStore store;
  comm::testing::run_ranks(n, [&](int rank) {
    comm::GlooCommunicator dp(comm::testing::connect_world(store, rank, n), "dp[0]");
    body(dp);
    // A body may communicate nothing (a memory count): without this, a rank could drop its
    // context while a peer is still connecting, which Gloo reports there as "Connection
    // closed by peer" (seen under load).
    dp.barrier();
  });
}

// The tokens and targets of B sequences of length T, the first being global sequence
// `first_seq`, at optimizer step `step`: a pattern over a vocabulary of 64 that depends on
// (sequence, position, step) only, so any split of the global batch over ranks and
// micro-batches sees the same data.
inline void fill_sequences(std::vector<int32_t>& tokens, std::vector<int32_t>& targets, int B,
                           int T, int first_seq, int step) {
  for (int i = 0; i < B * T; ++i) {
    const int seq = first_seq + i / T, t = i % T;
    tokens[static_cast<size_t>(i)] = (seq * 17 + t * 5 + step * 3 + t * t) % 64;
    targets[static_cast<size_t>(i)] = (seq * 7 + t * 11 + step) % 64;
  }
}

// A gradient value that depends on (rank, step, index) only, of varied sign and magnitude.
inline float fake_grad(int rank, int step, int64_t i) {
  const uint64_t h = (static_cast<uint64_t>(i) * 2654435761u) ^
                     (static_cast<uint64_t>(rank + 1) * 40503u) ^
                     (static_cast<uint64_t>(step + 7) * 9973u);
  const double unit = static_cast<double>(h % 20011) / 20011.0 - 0.5;  // [-0.5, 0.5)
  const double scale = 1.0 + static_cast<double>((h >> 7) % 5);        // 1..5
  return static_cast<float>(unit * scale * 1e-2);
}

// A communicator of `size` ranks that performs no communication: allreduce leaves data
// as it is and logs (offset from `base`, count). Optionally fails on call number
// `fail_on` (0-based) or sleeps in each call.
class RecordingComm : public comm::Communicator {
 public:
  RecordingComm(int size, const float* base) : size_(size), base_(base) {}

  int rank() const override { return 0; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  void allreduce(float* data, size_t count, comm::ReduceOp) override {
    int call = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      call = static_cast<int>(calls_.size());
      calls_.emplace_back(data - base_, static_cast<int64_t>(count));
    }
    if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    if (call == fail_on) throw comm::CommError("allreduce on group fake failed: peer gone");
  }
  void reduce_scatter(const float*, float*, size_t) override { unused(); }
  void allgather(const float*, float*, size_t) override { unused(); }
  void broadcast(float*, size_t, int) override { unused(); }
  void send(const void*, size_t, int, uint32_t) override { unused(); }
  void recv(void*, size_t, int, uint32_t) override { unused(); }
  std::unique_ptr<comm::PendingSend> isend(const void*, size_t, int, uint32_t) override {
    unused();
  }
  void barrier() override { unused(); }

  std::vector<std::pair<int64_t, int64_t>> calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }

  int fail_on = -1;
  int sleep_ms = 0;

 private:
  [[noreturn]] static void unused() { throw std::logic_error("RecordingComm: unexpected call"); }
  int size_;
  const float* base_;
  std::string name_ = "fake";
  std::mutex mutex_;
  std::vector<std::pair<int64_t, int64_t>> calls_;
};

}  // namespace trainctl::parallel::testing
