#pragma once
// Communicator over one connected Gloo context (CPU, TCP), with allreduce, reduce_scatter
// and allgather through shared memory when the group was also connected that way. See
// comm/communicator.h for the contract of each call. Not thread-safe: one thread drives a
// communicator at a time (different communicators may run concurrently, even on a shared device).
#include <gloo/context.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/gloo/gloo_options.h"
#include "comm/gloo/hierarchical.h"
#include "comm/shm/shm_group.h"

namespace trainctl::comm {

class GlooCommunicator final : public Communicator {
 public:
  // `context` is connected (gloo::rendezvous::Context after connectFullMesh); a context
  // of size 1 needs no connection. `name` appears in errors ("dp[1]"). The context's
  // timeout is set to options.timeout. `shm`, when given, is the same group connected
  // through shared memory (all ranks on one host); allreduce_algo `shm` requires it.
  // `hierarchical`, when given, is the group's allreduce through shared memory within
  // hosts and TCP across them; `automatic` (and `hierarchical`) then allreduce that way.
  GlooCommunicator(std::shared_ptr<gloo::Context> context, std::string name,
                   GlooOptions options = {}, std::unique_ptr<shm::ShmGroup> shm = nullptr,
                   std::unique_ptr<HierarchicalAllreduce> hierarchical = nullptr);

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  const std::string& name() const override { return name_; }

  void allreduce(float* data, size_t count, ReduceOp op = ReduceOp::sum) override;
  void reduce_scatter(const float* in, float* out, size_t count) override;
  void allgather(const float* in, float* out, size_t count) override;
  void broadcast(float* data, size_t count, int root) override;
  // Blocking send: returns once the receiver has taken the data (Gloo's TCP transport
  // moves a message only after the matching recv is posted), so two ranks that send to
  // each other first deadlock. Order pairs (one sends first, the other receives first).
  void send(const void* data, size_t bytes, int dst, uint32_t tag) override;
  void recv(void* data, size_t bytes, int src, uint32_t tag) override;
  std::unique_ptr<PendingSend> isend(const void* data, size_t bytes, int dst,
                                     uint32_t tag) override;
  void barrier() override;
  // Shared memory when the group has it, else Gloo's alltoallv (pairwise TCP).
  void alltoallv(const float* in, const size_t* send_counts, float* out,
                 const size_t* recv_counts) override;

  std::string algorithm_name(std::string_view op, size_t count) const override;

  // The allreduce algorithm used for `count` floats: options.allreduce_algo, or the
  // per-size choice when that is `automatic`.
  AllreduceAlgo allreduce_algo_for(size_t count) const;

  const GlooOptions& options() const { return options_; }

 private:
  // Runs `body`, turning any Gloo or transport exception into CommError naming `op`
  // (plus `detail`, e.g. " to rank 2") and the group.
  template <class Body>
  void guarded(const char* op, Body&& body, const std::string& detail = {});
  // First slot of a fresh range of `n` slots for one ring collective. All ranks call
  // collectives in the same order, so they agree on the slots.
  uint64_t take_slots(uint32_t n);
  void check_peer(const char* op, int peer) const;
  size_t ring_segment_floats() const;

  std::shared_ptr<gloo::Context> context_;
  std::string name_;
  GlooOptions options_;
  uint32_t next_collective_tag_ = 0;
  std::vector<float> staging_;          // the ring allreduce's receive window, kept across calls
  std::unique_ptr<shm::ShmGroup> shm_;  // null unless every rank is on this host
  std::unique_ptr<HierarchicalAllreduce> hierarchical_;  // null unless hosts x ranks pays
};

}  // namespace trainctl::comm
