#pragma once
// A group of one rank: every collective is the identity (allreduce, broadcast, barrier do
// nothing; reduce_scatter and allgather copy). Parameter-server workers give it to the
// data-parallel machinery, which then steps without any communication: their gradients
// travel to the servers instead (lib/ps/).
#include <string>

#include "comm/communicator.h"

namespace trainctl::comm {

class SoloCommunicator final : public Communicator {
 public:
  explicit SoloCommunicator(std::string name) : name_(std::move(name)) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }

  void allreduce(float* data, size_t count, ReduceOp op) override;
  void reduce_scatter(const float* in, float* out, size_t count) override;
  void allgather(const float* in, float* out, size_t count) override;
  void broadcast(float* data, size_t count, int root) override;
  // There is no peer: these throw CommError.
  void send(const void* data, size_t bytes, int dst, uint32_t tag) override;
  void recv(void* data, size_t bytes, int src, uint32_t tag) override;
  std::unique_ptr<PendingSend> isend(const void* data, size_t bytes, int dst,
                                     uint32_t tag) override;
  void barrier() override {}

 private:
  std::string name_;
};

}  // namespace trainctl::comm
