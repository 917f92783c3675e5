#include "comm/gloo/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <regex>
#include <stdexcept>
#include <utility>

#include "comm/gloo/ring_collectives.h"

namespace trainctl::comm {

namespace {

// Slot prefixes above Gloo's own (0x01..0x08) keep our messages apart from its algorithms.
constexpr uint8_t kRingSlotPrefix = 0x40;
constexpr uint8_t kPointToPointSlotPrefix = 0x41;

void sum_into(float* acc, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += x[i];
}

void max_into(float* acc, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = acc[i] < x[i] ? x[i] : acc[i];
}

// Gloo prefixes messages with "[./gloo/transport/tcp/pair.cc:598] "; users need only
// the reason.
std::string strip_source_location(std::string msg) {
  static const std::regex location(R"(\[[^\]\[]*\.(cc|cpp|h):[0-9]+\] )");
  return std::regex_replace(msg, location, "");
}

void wait_or_throw(bool completed, const char* what) {
  if (!completed) throw std::runtime_error(std::string(what) + " was aborted");
}

}  // namespace

std::string_view to_string(AllreduceAlgo algo) {
  switch (algo) {
    case AllreduceAlgo::automatic:
      return "auto";
    case AllreduceAlgo::direct:
      return "direct";
    case AllreduceAlgo::ring:
      return "ring";
    case AllreduceAlgo::gloo_ring:
      return "gloo_ring";
    case AllreduceAlgo::ring_chunked:
      return "ring_chunked";
    case AllreduceAlgo::halving_doubling:
      return "halving_doubling";
    case AllreduceAlgo::shm:
      return "shm";
    case AllreduceAlgo::hierarchical:
      return "hierarchical";
  }
  return "unknown";
}

AllreduceAlgo parse_allreduce_algo(std::string_view name) {
  for (auto algo :
       {AllreduceAlgo::automatic, AllreduceAlgo::direct, AllreduceAlgo::ring,
        AllreduceAlgo::gloo_ring, AllreduceAlgo::ring_chunked, AllreduceAlgo::halving_doubling,
        AllreduceAlgo::shm, AllreduceAlgo::hierarchical}) {
    if (to_string(algo) == name) return algo;
  }
  throw std::invalid_argument("unknown allreduce algorithm '" + std::string(name) +
                              "' (expected auto, direct, ring, gloo_ring, ring_chunked, "
                              "halving_doubling, shm or hierarchical)");
}

GlooCommunicator::GlooCommunicator(std::shared_ptr<gloo::Context> context, std::string name,
                                   GlooOptions options, std::unique_ptr<shm::ShmGroup> shm,
                                   std::unique_ptr<HierarchicalAllreduce> hierarchical)
    : context_(std::move(context)),
      name_(std::move(name)),
      options_(options),
      shm_(std::move(shm)),
      hierarchical_(std::move(hierarchical)) {
  if (!context_) throw std::invalid_argument("GlooCommunicator '" + name_ + "': null context");
  if (options_.allreduce_algo == AllreduceAlgo::shm && !shm_ && context_->size > 1) {
    throw std::invalid_argument("GlooCommunicator '" + name_ +
                                "': allreduce_algo shm needs the group connected through "
                                "shared memory (all ranks on one host)");
  }
  context_->setTimeout(options_.timeout);
}

template <class Body>
void GlooCommunicator::guarded(const char* op, Body&& body, const std::string& detail) {
  try {
    body();
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(std::string(op) + detail + " on group " + name_ +
                    " failed: " + strip_source_location(e.what()));
  }
}

size_t GlooCommunicator::ring_segment_floats() const {
  return std::max<size_t>(1, options_.ring_segment_bytes / sizeof(float));
}

uint64_t GlooCommunicator::take_slots(uint32_t n) {
  const uint64_t slot = gloo::Slot::build(kRingSlotPrefix, next_collective_tag_);
  next_collective_tag_ += n;
  return slot;
}

void GlooCommunicator::check_peer(const char* op, int peer) const {
  if (peer < 0 || peer >= size() || peer == rank()) {
    throw std::invalid_argument(std::string(op) + " on group " + name_ + ": peer rank " +
                                std::to_string(peer) + " is not another rank of the " +
                                std::to_string(size()) + "-rank group");
  }
}

AllreduceAlgo GlooCommunicator::allreduce_algo_for(size_t count) const {
  AllreduceAlgo algo = options_.allreduce_algo;
  if (algo == AllreduceAlgo::hierarchical && !hierarchical_) algo = AllreduceAlgo::automatic;
  if (algo == AllreduceAlgo::automatic && hierarchical_) {
    algo = AllreduceAlgo::hierarchical;
  } else if (algo == AllreduceAlgo::automatic && shm_) {
    algo = AllreduceAlgo::shm;
  } else if (algo == AllreduceAlgo::automatic) {
    const size_t sent_per_rank = count * sizeof(float) * static_cast<size_t>(size() - 1);
    algo = sent_per_rank <= options_.small_allreduce_bytes ? AllreduceAlgo::direct
                                                           : AllreduceAlgo::ring;
  }
  // The legacy algorithms count elements in an int.
  if ((algo == AllreduceAlgo::ring_chunked || algo == AllreduceAlgo::halving_doubling) &&
      count > static_cast<size_t>(INT_MAX)) {
    algo = AllreduceAlgo::ring;
  }
  return algo;
}

std::string GlooCommunicator::algorithm_name(std::string_view op, size_t count) const {
  if (size() == 1) return "local";
  if (op == "allreduce") return std::string(to_string(allreduce_algo_for(count)));
  if (op == "reduce_scatter" || op == "allgather") return shm_ ? "shm" : "ring";
  if (op == "broadcast") return "one_to_all";
  return {};
}

void GlooCommunicator::allreduce(float* data, size_t count, ReduceOp op) {
  if (size() == 1 || count == 0) return;
  const AllreduceAlgo algo = allreduce_algo_for(count);
  guarded("allreduce", [&] {
    switch (algo) {
      case AllreduceAlgo::shm:
        shm_->allreduce(data, count, op);
        break;
      case AllreduceAlgo::hierarchical:
        hierarchical_->allreduce(data, count, op);
        break;
      case AllreduceAlgo::direct:
        ring::direct_allreduce(*context_, data, count, op == ReduceOp::sum ? sum_into : max_into,
                               take_slots(1), options_.timeout);
        break;
      case AllreduceAlgo::automatic:  // resolved by allreduce_algo_for
      case AllreduceAlgo::ring: {
        auto blocks = ring::split_evenly(count, size());
        ring::allreduce(*context_, data, blocks, op == ReduceOp::sum ? sum_into : max_into,
                        ring_segment_floats(), std::max<size_t>(1, options_.ring_window), staging_,
                        take_slots(2 * static_cast<uint32_t>(size())), options_.timeout);
        break;
      }
      case AllreduceAlgo::gloo_ring: {
        gloo::AllreduceOptions opts(context_);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        opts.setOutput(data, count);
        using Fn = void (*)(void*, const void*, const void*, size_t);
        opts.setReduceFunction(op == ReduceOp::sum ? static_cast<Fn>(&gloo::sum<float>)
                                                   : static_cast<Fn>(&gloo::max<float>));
        opts.setMaxSegmentSize(options_.gloo_ring_segment_bytes);
        opts.setTimeout(options_.timeout);
        gloo::allreduce(opts);
        break;
      }
      case AllreduceAlgo::ring_chunked: {
        auto fn = op == ReduceOp::sum ? gloo::ReductionFunction<float>::sum
                                      : gloo::ReductionFunction<float>::max;
        gloo::AllreduceRingChunked<float> algorithm(context_, {data}, static_cast<int>(count), fn);
        algorithm.run();
        break;
      }
      case AllreduceAlgo::halving_doubling: {
        auto fn = op == ReduceOp::sum ? gloo::ReductionFunction<float>::sum
                                      : gloo::ReductionFunction<float>::max;
        gloo::AllreduceHalvingDoubling<float> algorithm(context_, {data}, static_cast<int>(count),
                                                        fn);
        algorithm.run();
        break;
      }
    }
  });
}

void GlooCommunicator::reduce_scatter(const float* in, float* out, size_t count) {
  guarded("reduce_scatter", [&] {
    if (shm_) return shm_->reduce_scatter(in, out, count);
    ring::reduce_scatter(*context_, in, out, count, sum_into, ring_segment_floats(),
                         take_slots(static_cast<uint32_t>(size())), options_.timeout);
  });
}

void GlooCommunicator::allgather(const float* in, float* out, size_t count) {
  guarded("allgather", [&] {
    if (shm_) return shm_->allgather(in, out, count);
    ring::allgather(*context_, in, out, count * sizeof(float),
                    take_slots(static_cast<uint32_t>(size())), options_.timeout);
  });
}

void GlooCommunicator::broadcast(float* data, size_t count, int root) {
  if (root < 0 || root >= size()) {
    throw std::invalid_argument("broadcast on group " + name_ + ": root " + std::to_string(root) +
                                " is outside the " + std::to_string(size()) + "-rank group");
  }
  if (size() == 1 || count == 0) return;
  guarded("broadcast", [&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(data, count);
    opts.setRoot(root);
    opts.setTimeout(options_.timeout);
    gloo::broadcast(opts);
  });
}

void GlooCommunicator::send(const void* data, size_t bytes, int dst, uint32_t tag) {
  check_peer("send", dst);
  if (bytes == 0) return;
  guarded(
      "send",
      [&] {
        // Gloo's buffer type is not const-aware; a send only reads the memory.
        auto buf = context_->createUnboundBuffer(const_cast<void*>(data), bytes);
        buf->send(dst, gloo::Slot::build(kPointToPointSlotPrefix, tag));
        wait_or_throw(buf->waitSend(options_.timeout), "send");
      },
      " to rank " + std::to_string(dst));
}

namespace {

class GlooPendingSend final : public PendingSend {
 public:
  GlooPendingSend(std::unique_ptr<gloo::transport::UnboundBuffer> buf, std::string what,
                  std::chrono::milliseconds timeout)
      : buf_(std::move(buf)), what_(std::move(what)), timeout_(timeout) {}
  ~GlooPendingSend() override {
    try {
      wait();
    } catch (const std::exception&) {  // the owner is unwinding from an earlier error
    }
  }
  void wait() override {
    if (!buf_) return;
    auto buf = std::move(buf_);
    try {
      wait_or_throw(buf->waitSend(timeout_), "send");
    } catch (const std::exception& e) {
      throw CommError(what_ + " failed: " + strip_source_location(e.what()));
    }
  }

 private:
  std::unique_ptr<gloo::transport::UnboundBuffer> buf_;
  std::string what_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<PendingSend> GlooCommunicator::isend(const void* data, size_t bytes, int dst,
                                                     uint32_t tag) {
  check_peer("isend", dst);
  std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  const std::string what = "send to rank " + std::to_string(dst) + " on group " + name_;
  if (bytes == 0) return std::make_unique<GlooPendingSend>(nullptr, what, options_.timeout);
  guarded(
      "send",
      [&] {
        buf = context_->createUnboundBuffer(const_cast<void*>(data), bytes);
        buf->send(dst, gloo::Slot::build(kPointToPointSlotPrefix, tag));
      },
      " to rank " + std::to_string(dst));
  return std::make_unique<GlooPendingSend>(std::move(buf), what, options_.timeout);
}

void GlooCommunicator::recv(void* data, size_t bytes, int src, uint32_t tag) {
  check_peer("recv", src);
  if (bytes == 0) return;
  guarded(
      "recv",
      [&] {
        auto buf = context_->createUnboundBuffer(data, bytes);
        buf->recv(src, gloo::Slot::build(kPointToPointSlotPrefix, tag));
        wait_or_throw(buf->waitRecv(options_.timeout), "recv");
      },
      " from rank " + std::to_string(src));
}

void GlooCommunicator::barrier() {
  if (size() == 1) return;
  guarded("barrier", [&] {
    gloo::BarrierOptions opts(context_);
    opts.setTimeout(options_.timeout);
    gloo::barrier(opts);
  });
}

void GlooCommunicator::alltoallv(const float* in, const size_t* send_counts, float* out,
                                 const size_t* recv_counts) {
  const auto p = static_cast<size_t>(size());
  if (p == 1) {  // a group of one has no transport (its context is never connected)
    std::copy(in, in + send_counts[0], out);
    return;
  }
  guarded("alltoallv", [&] {
    if (shm_) return shm_->alltoallv(in, send_counts, out, recv_counts);
    std::vector<int64_t> sends(send_counts, send_counts + p), recvs(recv_counts, recv_counts + p);
    gloo::AlltoallvOptions opts(context_);
    opts.setInput(const_cast<float*>(in), sends);  // Gloo's buffers are not const-aware
    opts.setOutput(out, recvs);
    opts.setTimeout(options_.timeout);
    gloo::alltoallv(opts);
  });
}

}  // namespace trainctl::comm
