#pragma once
// A communicator is one process group: `size()` ranks that can run collectives together.
// Implementations: comm/gloo (CPU, TCP, with comm/shm for ranks on one host) and
// comm/nccl (GPU, inside the CUDA plugin). Every call is blocking and collective over the
// group unless it says otherwise; all ranks of the group must make the same calls in the
// same order with the same sizes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace trainctl::comm {

enum class ReduceOp { sum, max };

// A collective or point-to-point call failed: a peer died or closed its connection, an
// operation timed out, or the backend reported an error. The message names the group
// and the operation, e.g. "allreduce on group dp[1] failed: ...". The group is unusable
// afterwards; the worker should log the message and exit so the launcher can restart.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A send started by Communicator::isend. The data must stay untouched until wait()
// returns. Destroying an unwaited request waits for it (errors are then swallowed).
class PendingSend {
 public:
  virtual ~PendingSend() = default;
  // Blocks until the receiver has taken the data; throws CommError on failure or timeout.
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;  // "world", "dp[0]", "tp[3]", ...

  // In place: data[i] = op over ranks of data[i].
  virtual void allreduce(float* data, size_t count, ReduceOp op = ReduceOp::sum) = 0;
  // in holds size() blocks of `count` floats; out receives block rank() reduced (sum).
  virtual void reduce_scatter(const float* in, float* out, size_t count) = 0;
  // in holds `count` floats; out receives size() blocks, block r from rank r.
  virtual void allgather(const float* in, float* out, size_t count) = 0;
  // In place: every rank gets root's data.
  virtual void broadcast(float* data, size_t count, int root) = 0;
  // Point-to-point within the group (ranks are group ranks). Blocking.
  virtual void send(const void* data, size_t bytes, int dst, uint32_t tag) = 0;
  virtual void recv(void* data, size_t bytes, int src, uint32_t tag) = 0;
  // Starts a send and returns at once: pipeline stages send activations and gradients
  // while they compute, and two neighbours may send to each other at the same time.
  // Sends and receives are matched by (peer, tag), not by order.
  virtual std::unique_ptr<PendingSend> isend(const void* data, size_t bytes, int dst,
                                             uint32_t tag) = 0;
  virtual void barrier() = 0;
  // All-to-all with a size per pair (MPI_Alltoallv): `in` holds size() blocks packed in
  // rank order, block r (send_counts[r] floats) going to rank r; `out` receives size()
  // blocks packed in rank order, block r (recv_counts[r] floats) from rank r. recv_counts[r]
  // must equal what rank r sends here (exchange the counts first when they vary). Floats
  // are moved as bits, never added: integers may travel bit-cast. The default exchanges
  // blocks pairwise with isend/recv; backends override it with their own.
  virtual void alltoallv(const float* in, const size_t* send_counts, float* out,
                         const size_t* recv_counts);

  // The algorithm a call of `op` ("allreduce", "allgather", "reduce_scatter", ...) on
  // `count` floats would use, for benchmark tables and logs. Empty when the backend has
  // a single algorithm per op.
  virtual std::string algorithm_name(std::string_view op, size_t count) const {
    (void)op;
    (void)count;
    return {};
  }
};

// The default alltoallv: every block goes out as an isend at once, then the blocks are
// received in rank order, so no pair of ranks waits on each other (sends are matched by
// (peer, tag), not by order). Inline: the CUDA plugin's communicators link no comm library.
namespace detail {
// Tag of the default exchange's messages (point-to-point tags are per group; pipelines use
// small tags of their own).
constexpr uint32_t kAlltoallvTag = 0x7a2a0000u;
}  // namespace detail

inline void Communicator::alltoallv(const float* in, const size_t* send_counts, float* out,
                                    const size_t* recv_counts) {
  const int p = size(), me = rank();
  std::vector<size_t> in_at(static_cast<size_t>(p) + 1, 0), out_at(static_cast<size_t>(p) + 1, 0);
  for (int r = 0; r < p; ++r) {
    in_at[static_cast<size_t>(r) + 1] = in_at[static_cast<size_t>(r)] + send_counts[r];
    out_at[static_cast<size_t>(r) + 1] = out_at[static_cast<size_t>(r)] + recv_counts[r];
  }
  std::vector<std::unique_ptr<PendingSend>> sends;
  for (int i = 1; i < p; ++i) {
    const int dst = (me + i) % p;
    const auto d = static_cast<size_t>(dst);
    if (send_counts[dst] == 0) continue;
    sends.push_back(
        isend(in + in_at[d], send_counts[dst] * sizeof(float), dst, detail::kAlltoallvTag));
  }
  const auto m = static_cast<size_t>(me);
  std::copy(in + in_at[m], in + in_at[m] + send_counts[me], out + out_at[m]);
  for (int i = 1; i < p; ++i) {
    const int src = (me + p - i) % p;
    if (recv_counts[src] == 0) continue;
    recv(out + out_at[static_cast<size_t>(src)], recv_counts[src] * sizeof(float), src,
         detail::kAlltoallvTag);
  }
  for (auto& s : sends) s->wait();
}

}  // namespace trainctl::comm
