#pragma once
// A communicator is one process group: `size()` ranks that can run collectives together.
// Implementations: comm/gloo (CPU, TCP) and later comm/nccl (GPU). Every call is
// blocking and collective over the group unless it says otherwise; all ranks of the
// group must make the same calls in the same order with the same sizes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace trainctl::comm {

enum class ReduceOp { sum, max };

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
  virtual void barrier() = 0;
};

}  // namespace trainctl::comm
