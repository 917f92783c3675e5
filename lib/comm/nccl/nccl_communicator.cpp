#include "comm/nccl/nccl_communicator.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "comm/nccl/nccl_check.h"
#include "cuda_abi/cuda_check.h"

namespace trainctl::comm::nccl {

namespace {

using Clock = std::chrono::steady_clock;

// CUDA failures inside a communicator are communication failures for the caller.
void cuda_ok(cudaError_t e, const char* call, const std::string& context) {
  if (e != cudaSuccess) {
    throw CommError(context + ": " + call + " failed: " + cuda_abi::cuda_error_text(e));
  }
}
#define TRAINCTL_COMM_CUDA(call, context) cuda_ok((call), #call, (context))

bool is_device_accessible(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // older drivers report plain host pointers as an error
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

ncclRedOp_t to_nccl(ReduceOp op) { return op == ReduceOp::max ? ncclMax : ncclSum; }

}  // namespace

// A device view of a caller's buffer (see device_view).
struct NcclCommunicator::Buffer {
  void* ptr = nullptr;
  void* staging = nullptr;  // owned, freed stream-ordered by release()
  cudaStream_t stream = nullptr;
  void release() {
    if (staging != nullptr) cudaFreeAsync(staging, stream);
    staging = nullptr;
  }
};

class NcclCommunicator::Pending final : public PendingSend {
 public:
  Pending(NcclCommunicator& owner, cudaEvent_t done, std::string what)
      : owner_(owner), done_(done), what_(std::move(what)) {}
  ~Pending() override {
    if (!waited_) {
      try {
        wait();
      } catch (...) {  // PendingSend contract: destroying an unwaited send swallows errors
      }
    }
    cudaEventDestroy(done_);
  }
  void wait() override {
    if (waited_) return;
    waited_ = true;
    owner_.wait_for(done_, what_);
  }

 private:
  NcclCommunicator& owner_;
  cudaEvent_t done_;
  std::string what_;
  bool waited_ = false;
};

NcclCommunicator::NcclCommunicator(std::string name, int rank, int size, int device,
                                   NcclHandles handles, std::chrono::milliseconds timeout)
    : name_(std::move(name)),
      rank_(rank),
      size_(size),
      device_(device),
      h_(handles),
      timeout_(timeout) {
  bind();
  const std::string ctx = context("setting up");
  TRAINCTL_COMM_CUDA(cudaStreamCreateWithFlags(&coll_stream_, cudaStreamNonBlocking), ctx);
  TRAINCTL_COMM_CUDA(cudaStreamCreateWithFlags(&up_stream_, cudaStreamNonBlocking), ctx);
  TRAINCTL_COMM_CUDA(cudaStreamCreateWithFlags(&down_stream_, cudaStreamNonBlocking), ctx);
  TRAINCTL_COMM_CUDA(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming), ctx);
  TRAINCTL_COMM_CUDA(cudaEventCreateWithFlags(&op_done_, cudaEventDisableTiming), ctx);
  TRAINCTL_COMM_CUDA(cudaMalloc(&barrier_word_, sizeof(float)), ctx);
  TRAINCTL_COMM_CUDA(cudaMemset(barrier_word_, 0, sizeof(float)), ctx);
}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(device_);
  if (!aborted_) {
    for (cudaStream_t s : {coll_stream_, up_stream_, down_stream_}) {
      if (s != nullptr) cudaStreamSynchronize(s);
    }
    for (ncclComm_t c : {h_.up, h_.down, h_.collective}) {
      if (c != nullptr) ncclCommDestroy(c);
    }
  }
  cudaFree(barrier_word_);
  cudaEventDestroy(op_done_);
  cudaEventDestroy(compute_done_);
  for (cudaStream_t s : {coll_stream_, up_stream_, down_stream_}) {
    if (s != nullptr) cudaStreamDestroy(s);
  }
}

void NcclCommunicator::bind() const {
  const cudaError_t e = cudaSetDevice(device_);
  if (e != cudaSuccess) {
    throw CommError("group " + name_ + ": cudaSetDevice(" + std::to_string(device_) +
                    ") failed: " + cuda_abi::cuda_error_text(e));
  }
}

void NcclCommunicator::abort_all() noexcept {
  if (aborted_) return;
  aborted_ = true;
  for (ncclComm_t c : {h_.up, h_.down, h_.collective}) {
    if (c != nullptr) ncclCommAbort(c);
  }
}

void NcclCommunicator::after_compute(cudaStream_t stream) {
  if (aborted_) throw CommError("group " + name_ + " is unusable after an earlier failure");
  TRAINCTL_COMM_CUDA(cudaEventRecord(compute_done_, cudaStreamLegacy), context("ordering"));
  TRAINCTL_COMM_CUDA(cudaStreamWaitEvent(stream, compute_done_, 0), context("ordering"));
}

NcclCommunicator::Buffer NcclCommunicator::device_view(const void* ptr, size_t bytes, bool copy_in,
                                                       cudaStream_t stream) {
  Buffer b;
  b.stream = stream;
  if (is_device_accessible(ptr)) {
    b.ptr = const_cast<void*>(ptr);
    return b;
  }
  TRAINCTL_COMM_CUDA(cudaMallocAsync(&b.staging, bytes, stream), context("staging host memory"));
  b.ptr = b.staging;
  if (copy_in) {
    TRAINCTL_COMM_CUDA(cudaMemcpyAsync(b.staging, ptr, bytes, cudaMemcpyHostToDevice, stream),
                       context("staging host memory"));
  }
  return b;
}

void NcclCommunicator::wait_for(cudaEvent_t done, const std::string& what) {
  const auto deadline = Clock::now() + timeout_;
  auto pause = std::chrono::microseconds(5);
  while (true) {
    const cudaError_t e = cudaEventQuery(done);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      abort_all();
      throw CommError(context(what) + " failed: " + cuda_abi::cuda_error_text(e));
    }
    for (ncclComm_t c : {h_.collective, h_.up, h_.down}) {
      if (c == nullptr) continue;
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(c, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress) {
        abort_all();
        throw CommError(context(what) + " failed: " + ncclGetErrorString(async) +
                        " (a peer may have died)");
      }
    }
    if (Clock::now() > deadline) {
      abort_all();
      throw CommError(context(what) + " timed out after " +
                      std::to_string(timeout_.count() / 1000.0) +
                      " s (a peer is hung or dead; runtime.comm_timeout_s sets the limit)");
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::microseconds(1000)) pause *= 2;
  }
}

void NcclCommunicator::finish(cudaStream_t stream, const std::string& what) {
  TRAINCTL_COMM_CUDA(cudaEventRecord(op_done_, stream), context(what));
  wait_for(op_done_, what);
}

void NcclCommunicator::check_peer(int peer, const char* op) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw CommError(context(op) + ": invalid peer " + std::to_string(peer) + " (group of " +
                    std::to_string(size_) + ", this rank " + std::to_string(rank_) + ")");
  }
}

std::string NcclCommunicator::algorithm_name(std::string_view op, size_t count) const {
  (void)op;
  (void)count;
  return "nccl";  // NCCL picks ring/tree/NVLS itself per call
}

// --- collectives ------------------------------------------------------------------------------

void NcclCommunicator::allreduce(float* data, size_t count, ReduceOp op) {
  if (size_ == 1 || count == 0) return;
  bind();
  after_compute(coll_stream_);
  const size_t bytes = count * sizeof(float);
  Buffer b = device_view(data, bytes, true, coll_stream_);
  TRAINCTL_NCCL_CHECK(
      ncclAllReduce(b.ptr, b.ptr, count, ncclFloat32, to_nccl(op), h_.collective, coll_stream_),
      context("allreduce"));
  if (b.staging != nullptr) {
    TRAINCTL_COMM_CUDA(
        cudaMemcpyAsync(data, b.staging, bytes, cudaMemcpyDeviceToHost, coll_stream_),
        context("allreduce"));
  }
  b.release();
  finish(coll_stream_, "allreduce");
}

void NcclCommunicator::reduce_scatter(const float* in, float* out, size_t count) {
  if (count == 0) return;
  bind();
  const size_t bytes = count * sizeof(float);
  if (size_ == 1) {
    TRAINCTL_COMM_CUDA(cudaMemcpy(out, in, bytes, cudaMemcpyDefault), context("reduce_scatter"));
    return;
  }
  after_compute(coll_stream_);
  Buffer src = device_view(in, bytes * size_, true, coll_stream_);
  Buffer dst = device_view(out, bytes, false, coll_stream_);
  TRAINCTL_NCCL_CHECK(
      ncclReduceScatter(src.ptr, dst.ptr, count, ncclFloat32, ncclSum, h_.collective, coll_stream_),
      context("reduce_scatter"));
  if (dst.staging != nullptr) {
    TRAINCTL_COMM_CUDA(
        cudaMemcpyAsync(out, dst.staging, bytes, cudaMemcpyDeviceToHost, coll_stream_),
        context("reduce_scatter"));
  }
  src.release();
  dst.release();
  finish(coll_stream_, "reduce_scatter");
}

void NcclCommunicator::allgather(const float* in, float* out, size_t count) {
  if (count == 0) return;
  bind();
  const size_t bytes = count * sizeof(float);
  if (size_ == 1) {
    TRAINCTL_COMM_CUDA(cudaMemcpy(out, in, bytes, cudaMemcpyDefault), context("allgather"));
    return;
  }
  after_compute(coll_stream_);
  Buffer src = device_view(in, bytes, true, coll_stream_);
  Buffer dst = device_view(out, bytes * size_, false, coll_stream_);
  TRAINCTL_NCCL_CHECK(
      ncclAllGather(src.ptr, dst.ptr, count, ncclFloat32, h_.collective, coll_stream_),
      context("allgather"));
  if (dst.staging != nullptr) {
    TRAINCTL_COMM_CUDA(
        cudaMemcpyAsync(out, dst.staging, bytes * size_, cudaMemcpyDeviceToHost, coll_stream_),
        context("allgather"));
  }
  src.release();
  dst.release();
  finish(coll_stream_, "allgather");
}

void NcclCommunicator::broadcast(float* data, size_t count, int root) {
  if (root < 0 || root >= size_) {
    throw CommError(context("broadcast") + ": invalid root " + std::to_string(root));
  }
  if (size_ == 1 || count == 0) return;
  bind();
  after_compute(coll_stream_);
  const size_t bytes = count * sizeof(float);
  Buffer b = device_view(data, bytes, rank_ == root, coll_stream_);
  TRAINCTL_NCCL_CHECK(
      ncclBroadcast(b.ptr, b.ptr, count, ncclFloat32, root, h_.collective, coll_stream_),
      context("broadcast"));
  if (b.staging != nullptr && rank_ != root) {
    TRAINCTL_COMM_CUDA(
        cudaMemcpyAsync(data, b.staging, bytes, cudaMemcpyDeviceToHost, coll_stream_),
        context("broadcast"));
  }
  b.release();
  finish(coll_stream_, "broadcast");
}

void NcclCommunicator::barrier() {
  if (size_ == 1) return;
  bind();
  after_compute(coll_stream_);
  TRAINCTL_NCCL_CHECK(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum,
                                    h_.collective, coll_stream_),
                      context("barrier"));
  finish(coll_stream_, "barrier");
}

// --- point-to-point -----------------------------------------------------------------------------

std::unique_ptr<PendingSend> NcclCommunicator::isend(const void* data, size_t bytes, int dst,
                                                     uint32_t tag) {
  check_peer(dst, "send");
  bind();
  const bool upward = dst > rank_;
  cudaStream_t stream = upward ? up_stream_ : down_stream_;
  const std::string what = "send of " + std::to_string(bytes) + " bytes to rank " +
                           std::to_string(dst) + " (tag " + std::to_string(tag) + ")";
  after_compute(stream);
  Buffer b = device_view(data, bytes, true, stream);
  if (bytes > 0) {
    TRAINCTL_NCCL_CHECK(ncclSend(b.ptr, bytes, ncclUint8, dst, upward ? h_.up : h_.down, stream),
                        context(what));
  }
  b.release();
  cudaEvent_t done = nullptr;
  TRAINCTL_COMM_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), context(what));
  const cudaError_t e = cudaEventRecord(done, stream);
  if (e != cudaSuccess) {
    cudaEventDestroy(done);
    cuda_ok(e, "cudaEventRecord(done, stream)", context(what));
  }
  return std::make_unique<Pending>(*this, done, what);
}

void NcclCommunicator::send(const void* data, size_t bytes, int dst, uint32_t tag) {
  isend(data, bytes, dst, tag)->wait();
}

void NcclCommunicator::recv(void* data, size_t bytes, int src, uint32_t tag) {
  check_peer(src, "recv");
  bind();
  // A message from a lower rank travels on the "up" communicator, from a higher on "down".
  const bool from_below = src < rank_;
  cudaStream_t stream = from_below ? up_stream_ : down_stream_;
  const std::string what = "recv of " + std::to_string(bytes) + " bytes from rank " +
                           std::to_string(src) + " (tag " + std::to_string(tag) + ")";
  after_compute(stream);  // the buffer may still be read by queued compute
  Buffer b = device_view(data, bytes, false, stream);
  if (bytes > 0) {
    TRAINCTL_NCCL_CHECK(
        ncclRecv(b.ptr, bytes, ncclUint8, src, from_below ? h_.up : h_.down, stream),
        context(what));
  }
  if (b.staging != nullptr) {
    TRAINCTL_COMM_CUDA(cudaMemcpyAsync(data, b.staging, bytes, cudaMemcpyDeviceToHost, stream),
                       context(what));
  }
  b.release();
  finish(stream, what);
}

}  // namespace trainctl::comm::nccl
