#include "comm/solo_communicator.h"

#include <algorithm>

namespace trainctl::comm {

void SoloCommunicator::allreduce(float*, size_t, ReduceOp) {}

void SoloCommunicator::reduce_scatter(const float* in, float* out, size_t count) {
  if (in != out) std::copy(in, in + count, out);
}

void SoloCommunicator::allgather(const float* in, float* out, size_t count) {
  if (in != out) std::copy(in, in + count, out);
}

void SoloCommunicator::broadcast(float*, size_t, int) {}

void SoloCommunicator::send(const void*, size_t, int dst, uint32_t) {
  throw CommError("send on group " + name_ + " (one rank) to rank " + std::to_string(dst) +
                  ": there is no peer");
}

void SoloCommunicator::recv(void*, size_t, int src, uint32_t) {
  throw CommError("recv on group " + name_ + " (one rank) from rank " + std::to_string(src) +
                  ": there is no peer");
}

std::unique_ptr<PendingSend> SoloCommunicator::isend(const void*, size_t, int dst, uint32_t) {
  throw CommError("isend on group " + name_ + " (one rank) to rank " + std::to_string(dst) +
                  ": there is no peer");
}

}  // namespace trainctl::comm
