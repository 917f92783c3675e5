#include "comm/shm/shm_group.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <new>
#include <stdexcept>
#include <utility>

#include "comm/shm/shared_counter.h"

namespace trainctl::comm::shm {

// The start of every rank's segment; the two data slots follow it.
struct ShmGroup::Header {
  SharedCounter posted;   // chunks whose input this rank has copied into its slot
  SharedCounter reduced;  // chunks whose share this rank has reduced into its slot
  SharedCounter closed;   // 1 once this rank has left the group
  alignas(64) int32_t pid = 0;
};

namespace {

constexpr size_t kHeaderBytes = 256;

// out[i] = op over q in rank order of operand(q)[i]: the same order whichever rank does
// it, so every rank ends with the same bits. The first two ranks fuse into one pass.
template <class Operand>
void reduce_in_rank_order(float* out, size_t n, int ranks, ReduceOp op, Operand operand) {
  const float* a = operand(0);
  const float* b = operand(1);
  if (op == ReduceOp::sum) {
    for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    for (int q = 2; q < ranks; ++q) {
      const float* x = operand(q);
      for (size_t i = 0; i < n; ++i) out[i] += x[i];
    }
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = a[i] < b[i] ? b[i] : a[i];
    for (int q = 2; q < ranks; ++q) {
      const float* x = operand(q);
      for (size_t i = 0; i < n; ++i) out[i] = out[i] < x[i] ? x[i] : out[i];
    }
  }
}

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string read_link(const char* path) {
  char buf[256] = {};
  const ssize_t n = ::readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::vector<char> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
// Waits for `key` first: not every store's get() blocks (Gloo's HashStore does not).
std::string fetch(gloo::rendezvous::Store& store, const std::string& key) {
  store.wait({key});
  const std::vector<char> v = store.get(key);
  return {v.begin(), v.end()};
}

// Rank r's share of a chunk of n floats: [begin, begin + count).
struct Share {
  size_t begin;
  size_t count;
};
Share share_of(size_t n, int r, int p) {
  const auto ru = static_cast<size_t>(r);
  const auto pu = static_cast<size_t>(p);
  const size_t base = n / pu;
  const size_t extra = n % pu;
  return {ru * base + std::min(ru, extra), base + (ru < extra ? 1 : 0)};
}

}  // namespace

std::string host_identity() {
  char host[HOST_NAME_MAX + 1] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(host) + "|" + read_first_line("/proc/sys/kernel/random/boot_id") + "|" +
         read_link("/proc/self/ns/ipc") + "|" + read_link("/proc/self/ns/mnt") + "|" +
         read_link("/proc/self/ns/pid");
}

std::unique_ptr<ShmGroup> ShmGroup::connect(gloo::rendezvous::Store& store, int rank, int size,
                                            const ShmOptions& options, std::string* why_not) {
  auto refuse = [&](const std::string& why) -> std::unique_ptr<ShmGroup> {
    if (why_not != nullptr) *why_not = why;
    return nullptr;
  };
  if (size < 2) return refuse("a group of one rank communicates with nobody");
  const std::string me = std::to_string(rank);
  store.set("host/" + me, bytes_of(host_identity()));
  const std::string host = fetch(store, "host/" + me);
  for (int q = 0; q < size; ++q) {
    if (fetch(store, "host/" + std::to_string(q)) != host) {
      return refuse("rank " + std::to_string(q) + " runs on another host than rank " + me);
    }
  }

  const size_t slot_floats = std::max<size_t>(1, options.slot_bytes / sizeof(float));
  static_assert(sizeof(Header) <= kHeaderBytes, "the slots start at kHeaderBytes");
  const size_t bytes = kHeaderBytes + 2 * slot_floats * sizeof(float);
  std::string failure;
  SharedSegment own;
  try {
    own = SharedSegment::create(bytes);
    auto* h = new (own.data()) Header();
    h->pid = static_cast<int32_t>(::getpid());
  } catch (const std::exception& e) {
    failure = e.what();
  }
  store.set("seg/" + me, bytes_of(failure.empty() ? own.name() : std::string()));
  std::vector<SharedSegment> peers(static_cast<size_t>(size));
  for (int q = 0; q < size && failure.empty(); ++q) {
    if (q == rank) continue;
    const std::string name = fetch(store, "seg/" + std::to_string(q));
    if (name.empty()) {
      failure = "rank " + std::to_string(q) + " could not create its segment";
      break;
    }
    try {
      peers[static_cast<size_t>(q)] = SharedSegment::open(name, bytes);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  // Everyone learns whether everyone succeeded, so all ranks make the same choice.
  store.set("ok/" + me, bytes_of(failure.empty() ? "1" : "0" + failure));
  std::string first_failure;
  for (int q = 0; q < size; ++q) {
    const std::string ok = fetch(store, "ok/" + std::to_string(q));
    if (ok != "1" && first_failure.empty())
      first_failure = "rank " + std::to_string(q) + ": " + ok.substr(1);
  }
  own.unlink_name();  // every peer has opened it (or given up): leave nothing in /dev/shm
  if (!first_failure.empty()) return refuse(first_failure);
  return std::unique_ptr<ShmGroup>(new ShmGroup(rank, options, std::move(own), std::move(peers)));
}

ShmGroup::ShmGroup(int rank, const ShmOptions& options, SharedSegment own,
                   std::vector<SharedSegment> peers)
    : rank_(rank),
      options_(options),
      slot_floats_(std::max<size_t>(1, options.slot_bytes / sizeof(float))),
      own_(std::move(own)),
      peers_(std::move(peers)) {}

ShmGroup::~ShmGroup() { publish(header(rank_).closed, 1); }

ShmGroup::Header& ShmGroup::header(int r) const {
  void* base = r == rank_ ? own_.data() : peers_[static_cast<size_t>(r)].data();
  return *static_cast<Header*>(base);
}

float* ShmGroup::slot(int r, uint32_t chunk) const {
  void* base = r == rank_ ? own_.data() : peers_[static_cast<size_t>(r)].data();
  return reinterpret_cast<float*>(static_cast<char*>(base) + kHeaderBytes) +
         (chunk % 2) * slot_floats_;
}

void ShmGroup::wait_for(int r, bool reduced, uint32_t target) const {
  const Header& h = header(r);
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  wait_until_reaches(reduced ? h.reduced : h.posted, target, options_.poll, [&] {
    const std::string who = "rank " + std::to_string(r) + " (pid " + std::to_string(h.pid) + ")";
    if (h.closed.value.load(std::memory_order_acquire) != 0) {
      throw std::runtime_error(who + " left the group during a shared-memory collective");
    }
    if (::kill(h.pid, 0) != 0 && errno == ESRCH) {
      throw std::runtime_error(who + " exited during a shared-memory collective");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("timed out after " + std::to_string(options_.timeout.count()) +
                               " ms waiting for " + who + " in a shared-memory collective");
    }
  });
}

uint32_t ShmGroup::post_and_wait(const std::vector<Piece>& pieces) {
  const uint32_t g = ++chunk_;
  float* dst = slot(rank_, g);
  for (const Piece& piece : pieces) {
    std::memcpy(dst + piece.at, piece.src, piece.count * sizeof(float));
  }
  publish(header(rank_).posted, g);
  for (int q = 0; q < size(); ++q) {
    if (q != rank_) wait_for(q, false, g);
  }
  return g;
}

void ShmGroup::allreduce(float* data, size_t count, ReduceOp op) {
  const int p = size();
  if (p < 2) return;
  for (size_t off = 0; off < count; off += slot_floats_) {
    const size_t n = std::min(slot_floats_, count - off);
    float* chunk = data + off;
    const Share mine = share_of(n, rank_, p);
    // Peers need only the other shares of this rank's chunk: its own share is read from
    // `chunk` directly (a fifth less memory traffic than copying the whole chunk).
    const size_t after = mine.begin + mine.count;
    const uint32_t g = post_and_wait({{chunk, 0, mine.begin}, {chunk + after, after, n - after}});
    // This rank's share, reduced over all ranks in rank order (the same order whichever
    // rank does it), lands in the slot for the peers and then in the caller's buffer.
    auto operand = [&](int q) -> const float* {
      return (q == rank_ ? chunk : slot(q, g)) + mine.begin;
    };
    float* out = slot(rank_, g) + mine.begin;  // not an operand: peers skip this stretch
    reduce_in_rank_order(out, mine.count, p, op, operand);
    publish(header(rank_).reduced, g);
    std::memcpy(chunk + mine.begin, out, mine.count * sizeof(float));
    for (int q = 0; q < p; ++q) {
      if (q == rank_) continue;
      wait_for(q, true, g);
      const Share theirs = share_of(n, q, p);
      std::memcpy(chunk + theirs.begin, slot(q, g) + theirs.begin, theirs.count * sizeof(float));
    }
  }
}

void ShmGroup::reduce_scatter(const float* in, float* out, size_t count) {
  const int p = size();
  const auto pu = static_cast<size_t>(p);
  // A chunk carries the same stretch of every rank-block: slot = p pieces of `step`.
  const size_t step = std::max<size_t>(1, slot_floats_ / pu);
  std::vector<Piece> pieces(pu);
  for (size_t off = 0; off < count; off += step) {
    const size_t n = std::min(step, count - off);
    for (size_t b = 0; b < pu; ++b) pieces[b] = {in + b * count + off, b * n, n};
    const uint32_t g = post_and_wait(pieces);
    // Block rank_ of the chunk sits at the same place in every slot.
    const size_t at = static_cast<size_t>(rank_) * n;
    reduce_in_rank_order(out + off, n, p, ReduceOp::sum,
                         [&](int q) -> const float* { return slot(q, g) + at; });
  }
}

void ShmGroup::allgather(const float* in, float* out, size_t count) {
  for (size_t off = 0; off < count; off += slot_floats_) {
    const size_t n = std::min(slot_floats_, count - off);
    const uint32_t g = post_and_wait({{in + off, 0, n}});
    for (int q = 0; q < size(); ++q) {
      const float* src = q == rank_ ? in + off : slot(q, g);
      float* dst = out + static_cast<size_t>(q) * count + off;
      if (dst != src) std::memmove(dst, src, n * sizeof(float));  // `in` may sit inside `out`
    }
  }
}

void ShmGroup::alltoallv(const float* in, const size_t* send_counts, float* out,
                         const size_t* recv_counts) {
  const int p = size();
  const auto pu = static_cast<size_t>(p), me = static_cast<size_t>(rank_);
  const size_t step = std::max<size_t>(1, slot_floats_ / pu);
  std::vector<size_t> in_at(pu + 1, 0), out_at(pu + 1, 0);
  size_t longest = 0;
  for (size_t r = 0; r < pu; ++r) {
    in_at[r + 1] = in_at[r] + send_counts[r];
    out_at[r + 1] = out_at[r] + recv_counts[r];
    if (r != me) longest = std::max({longest, send_counts[r], recv_counts[r]});
  }
  std::copy(in + in_at[me], in + in_at[me] + send_counts[me], out + out_at[me]);
  if (p < 2) return;
  // Whole rounds are counted in a float: exact far beyond any block that fits in memory.
  float rounds = static_cast<float>((longest + step - 1) / step);
  allreduce(&rounds, 1, ReduceOp::max);
  auto part = [&](size_t count, size_t off) {
    return count > off ? std::min(step, count - off) : 0;
  };
  std::vector<Piece> pieces(pu);
  for (size_t k = 0; k < static_cast<size_t>(rounds); ++k) {
    const size_t off = k * step;
    for (size_t d = 0; d < pu; ++d) {
      const size_t n = d == me ? 0 : part(send_counts[d], off);
      pieces[d] = {in + in_at[d] + off, d * step, n};
    }
    const uint32_t g = post_and_wait(pieces);
    for (size_t s = 0; s < pu; ++s) {
      const size_t n = s == me ? 0 : part(recv_counts[s], off);
      if (n > 0)
        std::memcpy(out + out_at[s] + off, slot(static_cast<int>(s), g) + me * step,
                    n * sizeof(float));
    }
  }
}

}  // namespace trainctl::comm::shm
