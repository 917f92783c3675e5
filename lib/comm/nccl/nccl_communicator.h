#pragma once
// comm::Communicator on NCCL, inside libtrainctl_cuda.so.
//
// Streams and ordering: collectives run on the communicator's own stream, and point-to-
// point traffic on two more (one per direction: messages to higher group ranks on an
// "up" communicator, to lower ranks on a "down" one, so two neighbours sending to each
// other at once never wait on each other's queue). Each call first makes its stream wait
// for everything already queued on the compute stream (the legacy default stream the CUDA
// backend uses), then runs, then blocks the calling thread until it finished or the
// timeout passed: calls are blocking, as comm/communicator.h requires, and may come from
// another thread than the compute (the DP gradient thread) while compute continues.
//
// Pointers may be device or managed memory (used in place) or host memory (staged
// through device memory). Point-to-point messages between two ranks are matched in the
// order they were posted per direction (NCCL has no tags): the pipeline schedules post
// sends and receives in the same order on both sides.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "cuda_abi/cuda_plugin_api.h"

namespace trainctl::comm::nccl {

struct NcclHandles {
  ncclComm_t collective = nullptr;
  ncclComm_t up = nullptr;    // group rank r sends to ranks > r here
  ncclComm_t down = nullptr;  // ... and to ranks < r here
};

class NcclCommunicator final : public Communicator {
 public:
  // Takes ownership of `handles` (null handles for a group of one rank).
  NcclCommunicator(std::string name, int rank, int size, int device, NcclHandles handles,
                   std::chrono::milliseconds timeout);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }

  void allreduce(float* data, size_t count, ReduceOp op = ReduceOp::sum) override;
  void reduce_scatter(const float* in, float* out, size_t count) override;
  void allgather(const float* in, float* out, size_t count) override;
  void broadcast(float* data, size_t count, int root) override;
  void send(const void* data, size_t bytes, int dst, uint32_t tag) override;
  void recv(void* data, size_t bytes, int src, uint32_t tag) override;
  std::unique_ptr<PendingSend> isend(const void* data, size_t bytes, int dst,
                                     uint32_t tag) override;
  void barrier() override;
  std::string algorithm_name(std::string_view op, size_t count) const override;

  // Blocks until `done` (recorded after an operation of `what`) completes; on timeout or
  // an NCCL error aborts the communicators and throws CommError naming the group.
  void wait_for(cudaEvent_t done, const std::string& what);

 private:
  class Pending;
  struct Buffer;

  void bind() const;
  // Makes `stream` wait for all work queued so far on the compute stream.
  void after_compute(cudaStream_t stream);
  // `ptr` usable by NCCL on `stream`: itself when device/managed memory, else a stream-
  // ordered device copy (when `copy_in`) that the Buffer frees.
  Buffer device_view(const void* ptr, size_t bytes, bool copy_in, cudaStream_t stream);
  void finish(cudaStream_t stream, const std::string& what);
  void check_peer(int peer, const char* op) const;
  void abort_all() noexcept;
  std::string context(const std::string& op) const { return op + " on group " + name_; }

  std::string name_;
  int rank_, size_, device_;
  NcclHandles h_;
  std::chrono::milliseconds timeout_;
  cudaStream_t coll_stream_ = nullptr, up_stream_ = nullptr, down_stream_ = nullptr;
  cudaEvent_t compute_done_ = nullptr, op_done_ = nullptr;
  float* barrier_word_ = nullptr;
  bool aborted_ = false;
};

// Creates the communicators of `groups` in order on `device` (see cuda_abi/cuda_plugin_api.h).
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(
    const std::vector<cuda_abi::NcclGroupRequest>& groups, cuda_abi::KeyValueStore& store,
    int device, int64_t timeout_ms);

}  // namespace trainctl::comm::nccl
