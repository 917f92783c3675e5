#include "comm/gloo/ring_collectives.h"

#include <gloo/common/error.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

namespace trainctl::comm::ring {

namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

void wait_or_throw(bool completed, const char* what) {
  if (!completed) throw gloo::IoException(std::string(what) + " was aborted");
}

// Runs `step`, prefixing a Gloo error with `what` ("receiving from rank 1"): Gloo's own
// message names only the peer's socket address.
template <class Step>
void naming_peer(const std::string& what, Step&& step) {
  try {
    step();
  } catch (const gloo::Exception& e) {
    throw gloo::IoException(what + ": " + e.what());
  }
}

// One ring step: send `send_bytes` to `dst` while receiving `recv_bytes` from `src`.
// The receive is posted first: Gloo's TCP transport only moves a message once the
// receiver has asked for it, so two ranks that both send first would wait forever.
void exchange(gloo::Context& ctx, const void* send_ptr, size_t send_bytes, int dst, void* recv_ptr,
              size_t recv_bytes, int src, uint64_t slot, std::chrono::milliseconds timeout) {
  const std::string from = "receiving from rank " + std::to_string(src);
  const std::string to = "sending to rank " + std::to_string(dst);
  std::unique_ptr<gloo::transport::UnboundBuffer> rbuf;
  std::unique_ptr<gloo::transport::UnboundBuffer> sbuf;
  if (recv_bytes > 0) {
    rbuf = ctx.createUnboundBuffer(recv_ptr, recv_bytes);
    naming_peer(from, [&] { rbuf->recv(src, slot); });
  }
  if (send_bytes > 0) {
    // Gloo's buffer type is not const-aware; a send only reads the memory.
    sbuf = ctx.createUnboundBuffer(const_cast<void*>(send_ptr), send_bytes);
    naming_peer(to, [&] { sbuf->send(dst, slot); });
  }
  if (rbuf) naming_peer(from, [&] { wait_or_throw(rbuf->waitRecv(timeout), "receive"); });
  if (sbuf) naming_peer(to, [&] { wait_or_throw(sbuf->waitSend(timeout), "send"); });
}

// A ring step that also reduces: receives `recv_count` floats from `src` into
// `recv_ptr` while sending `send_count` floats to `dst`, and applies
// reduce(target, source) on each piece as soon as it lands. Messages go in segments of
// `segment` floats, all posted at once, so reducing one segment overlaps receiving the
// next. Both sides derive the same segmentation from the same count.
void exchange_and_reduce(gloo::Context& ctx, const float* send_ptr, size_t send_count, int dst,
                         float* recv_ptr, size_t recv_count, int src, float* target,
                         const float* source, ReduceFn reduce, size_t segment, uint64_t slot,
                         std::chrono::milliseconds timeout) {
  const std::string from = "receiving from rank " + std::to_string(src);
  const std::string to = "sending to rank " + std::to_string(dst);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> rbufs;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sbufs;
  for (size_t at = 0; at < recv_count; at += segment) {
    const size_t n = std::min(segment, recv_count - at);
    rbufs.push_back(ctx.createUnboundBuffer(recv_ptr + at, n * sizeof(float)));
    naming_peer(from, [&] { rbufs.back()->recv(src, slot); });
  }
  for (size_t at = 0; at < send_count; at += segment) {
    const size_t n = std::min(segment, send_count - at);
    // Gloo's buffer type is not const-aware; a send only reads the memory.
    sbufs.push_back(ctx.createUnboundBuffer(const_cast<float*>(send_ptr + at), n * sizeof(float)));
    naming_peer(to, [&] { sbufs.back()->send(dst, slot); });
  }
  for (size_t k = 0; k < rbufs.size(); ++k) {
    naming_peer(from, [&] { wait_or_throw(rbufs[k]->waitRecv(timeout), "receive"); });
    const size_t at = k * segment;
    reduce(target + at, source + at, std::min(segment, recv_count - at));
  }
  for (auto& sbuf : sbufs) {
    naming_peer(to, [&] { wait_or_throw(sbuf->waitSend(timeout), "send"); });
  }
}

// Like exchange_and_reduce, for an in-place target: each received segment lands in a
// small staging window (reused across calls, so no page faults, and still in cache when
// reduced) and at most `window` segments are in flight, as in Gloo's own ring.
void exchange_and_reduce_staged(gloo::Context& ctx, const float* send_ptr, size_t send_count,
                                int dst, float* target, size_t recv_count, int src, ReduceFn reduce,
                                size_t segment, size_t window, std::vector<float>& staging,
                                uint64_t slot, std::chrono::milliseconds timeout) {
  const std::string from = "receiving from rank " + std::to_string(src);
  const std::string to = "sending to rank " + std::to_string(dst);
  const size_t n_recv = (recv_count + segment - 1) / segment;
  const size_t slots = std::min(window, n_recv);
  if (staging.size() < slots * segment) staging.resize(slots * segment);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> rbufs(slots);
  auto post_recv = [&](size_t k) {
    const size_t n = std::min(segment, recv_count - k * segment);
    auto& buf = rbufs[k % slots];
    buf = ctx.createUnboundBuffer(staging.data() + (k % slots) * segment, n * sizeof(float));
    naming_peer(from, [&] { buf->recv(src, slot); });
  };
  for (size_t k = 0; k < slots; ++k) post_recv(k);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sbufs;
  for (size_t at = 0; at < send_count; at += segment) {
    const size_t n = std::min(segment, send_count - at);
    // Gloo's buffer type is not const-aware; a send only reads the memory.
    sbufs.push_back(ctx.createUnboundBuffer(const_cast<float*>(send_ptr + at), n * sizeof(float)));
    naming_peer(to, [&] { sbufs.back()->send(dst, slot); });
  }
  for (size_t k = 0; k < n_recv; ++k) {
    naming_peer(from, [&] { wait_or_throw(rbufs[k % slots]->waitRecv(timeout), "receive"); });
    const size_t at = k * segment;
    reduce(target + at, staging.data() + (k % slots) * segment, std::min(segment, recv_count - at));
    // Segments of one slot are matched in the order their receives are posted.
    if (k + slots < n_recv) post_recv(k + slots);
  }
  for (auto& sbuf : sbufs) {
    naming_peer(to, [&] { wait_or_throw(sbuf->waitSend(timeout), "send"); });
  }
}

}  // namespace

Blocks split_evenly(size_t total, int ranks) {
  Blocks b;
  const auto n = static_cast<size_t>(ranks);
  b.offset.resize(n);
  b.count.resize(n);
  size_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    b.offset[i] = offset;
    b.count[i] = total / n + (i < total % n ? 1 : 0);
    offset += b.count[i];
  }
  return b;
}

void reduce_scatter(gloo::Context& ctx, const float* in, float* out, size_t block_count,
                    ReduceFn reduce, size_t segment, uint64_t slot,
                    std::chrono::milliseconds timeout) {
  const int p = ctx.size;
  const int r = ctx.rank;
  if (p == 1) {
    if (out != in) std::memmove(out, in, block_count * sizeof(float));
    return;
  }
  if (block_count == 0) return;
  const int right = mod(r + 1, p);
  const int left = mod(r - 1, p);
  // Partial sums travel around the ring; two accumulators so the one being sent is
  // never the one being received into.
  std::vector<float> acc[2];
  for (int s = 0; s < p - 1; ++s) {
    const int send_block = mod(r - s - 1, p);
    const int recv_block = mod(r - s - 2, p);
    const float* send_ptr = s == 0 ? in + send_block * block_count : acc[(s - 1) % 2].data();
    float* recv_ptr = out;
    if (s != p - 2) {
      acc[s % 2].resize(block_count);
      recv_ptr = acc[s % 2].data();
    }
    exchange_and_reduce(ctx, send_ptr, block_count, right, recv_ptr, block_count, left, recv_ptr,
                        in + recv_block * block_count, reduce, segment, slot + s, timeout);
  }
}

void allreduce(gloo::Context& ctx, float* data, const Blocks& blocks, ReduceFn reduce,
               size_t segment, size_t window, std::vector<float>& staging, uint64_t slot,
               std::chrono::milliseconds timeout) {
  const int p = ctx.size;
  const int r = ctx.rank;
  if (p == 1) return;
  const int right = mod(r + 1, p);
  const int left = mod(r - 1, p);
  // Reduce-scatter: after p-1 steps rank r holds the full reduction of block r.
  for (int s = 0; s < p - 1; ++s) {
    const auto sb = static_cast<size_t>(mod(r - s - 1, p));
    const auto rb = static_cast<size_t>(mod(r - s - 2, p));
    exchange_and_reduce_staged(ctx, data + blocks.offset[sb], blocks.count[sb], right,
                               data + blocks.offset[rb], blocks.count[rb], left, reduce, segment,
                               window, staging, slot + s, timeout);
  }
  // Allgather: each reduced block travels once around the ring, received in place.
  for (int s = 0; s < p - 1; ++s) {
    const auto sb = static_cast<size_t>(mod(r - s, p));
    const auto rb = static_cast<size_t>(mod(r - s - 1, p));
    exchange(ctx, data + blocks.offset[sb], blocks.count[sb] * sizeof(float), right,
             data + blocks.offset[rb], blocks.count[rb] * sizeof(float), left, slot + p + s,
             timeout);
  }
}

void direct_allreduce(gloo::Context& ctx, float* data, size_t count, ReduceFn reduce, uint64_t slot,
                      std::chrono::milliseconds timeout) {
  const int p = ctx.size;
  const int r = ctx.rank;
  if (p == 1 || count == 0) return;
  const size_t bytes = count * sizeof(float);
  // Contributions of every rank, in rank order (this rank's is a copy of `data`).
  std::vector<float> all(count * static_cast<size_t>(p));
  std::memcpy(all.data() + static_cast<size_t>(r) * count, data, bytes);
  auto recv_buf = ctx.createUnboundBuffer(all.data(), all.size() * sizeof(float));
  auto send_buf = ctx.createUnboundBuffer(data, bytes);
  // Gloo does not say which peer failed; with two ranks there is only one.
  naming_peer(
      p == 2 ? "exchanging with rank " + std::to_string(1 - r) : "exchanging with the other ranks",
      [&] {
        for (int peer = 0; peer < p; ++peer) {
          if (peer != r) recv_buf->recv(peer, slot, static_cast<size_t>(peer) * bytes, bytes);
        }
        for (int peer = 0; peer < p; ++peer) {
          if (peer != r) send_buf->send(peer, slot);
        }
        for (int i = 0; i < p - 1; ++i) wait_or_throw(recv_buf->waitRecv(timeout), "receive");
        for (int i = 0; i < p - 1; ++i) wait_or_throw(send_buf->waitSend(timeout), "send");
      });
  std::memcpy(data, all.data(), bytes);
  for (int peer = 1; peer < p; ++peer) {
    reduce(data, all.data() + static_cast<size_t>(peer) * count, count);
  }
}

void allgather(gloo::Context& ctx, const void* in, void* out, size_t bytes_per_rank, uint64_t slot,
               std::chrono::milliseconds timeout) {
  const int p = ctx.size;
  const int r = ctx.rank;
  auto* out_bytes = static_cast<char*>(out);
  auto block = [&](int b) { return out_bytes + static_cast<size_t>(b) * bytes_per_rank; };
  if (block(r) != in) std::memmove(block(r), in, bytes_per_rank);
  if (p == 1 || bytes_per_rank == 0) return;
  const int right = mod(r + 1, p);
  const int left = mod(r - 1, p);
  for (int s = 0; s < p - 1; ++s) {
    exchange(ctx, block(mod(r - s, p)), bytes_per_rank, right, block(mod(r - s - 1, p)),
             bytes_per_rank, left, slot + s, timeout);
  }
}

}  // namespace trainctl::comm::ring
