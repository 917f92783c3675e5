#include "model/ring_attention.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "model/attention_blocks.h"

namespace trainctl::model {

RingAttention::RingAttention(const ops::AttentionShape& shape, const ContextChunks& chunks,
                             comm::RingExchange* ring)
    : shape_(shape), chunks_(chunks), ring_(ring) {
  if (shape.T != chunks.local_len()) {
    throw std::invalid_argument("ring attention: local length " + std::to_string(shape.T) +
                                " is not two chunks of " + std::to_string(chunks.chunk));
  }
}

int64_t RingAttention::kv_floats() const {
  return int64_t{shape_.B} * shape_.T * 2 * shape_.n_kv_head * shape_.head_dim;
}

void RingAttention::allocate(ActivationArena& arena) {
  const int64_t kv = kv_floats();
  const int64_t rows = int64_t{shape_.B} * shape_.n_head * shape_.T;
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i);
    kv_[i] = arena.shared("attention.ring.kv" + n, kv, MemoryUse::workspace);
    dkv_[i] = arena.shared("attention.ring.dkv" + n, kv, MemoryUse::workspace);
  }
  dkv_in_ = arena.shared("attention.ring.dkv_in", kv, MemoryUse::workspace);
  delta_ = arena.shared("attention.ring.delta", rows, MemoryUse::workspace);
  scratch_ =
      arena.shared("attention.ring.scratch",
                   head_block_scratch_floats(chunks_.chunk, shape_.head_dim), MemoryUse::workspace);
}

void RingAttention::pack_kv(const float* qkv, float* kv) const {
  const int64_t W = shape_.qkv_width(), KW = 2 * int64_t{shape_.n_kv_head} * shape_.head_dim;
  const int64_t q = shape_.q_width();
  for (int64_t r = 0; r < int64_t{shape_.B} * shape_.T; ++r) {
    std::memcpy(kv + r * KW, qkv + r * W + q, sizeof(float) * static_cast<size_t>(KW));
  }
}

HeadBlock RingAttention::block(const float* qkv, const float* kv, int src, int b, int h, int qi,
                               int kj) const {
  const int T = shape_.T, c = chunks_.chunk, hd = shape_.head_dim;
  const int W = shape_.qkv_width(), KW = 2 * shape_.n_kv_head * hd;
  HeadBlock blk;
  blk.q = qkv + (int64_t{b} * T + qi * c) * W + h * hd;
  blk.ldq = W;
  blk.k = kv + (int64_t{b} * T + kj * c) * KW + (h / shape_.group()) * hd;
  blk.v = blk.k + shape_.n_kv_head * hd;
  blk.ldkv = KW;
  blk.nq = blk.nk = c;
  blk.head_dim = hd;
  blk.qpos0 = chunks_.first_position(qi, chunks_.rank);
  blk.kpos0 = chunks_.first_position(kj, src);
  return blk;
}

void RingAttention::attend(ops::Backend& be, const float* qkv, const float* kv, int src, float* out,
                           float* lse) {
  const int T = shape_.T, c = chunks_.chunk, hd = shape_.head_dim, NH = shape_.n_head;
  const int OW = shape_.q_width();
  for (int b = 0; b < shape_.B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int qi = 0; qi < 2; ++qi) {
        const int64_t qrow = int64_t{b} * T + qi * c;
        for (int kj = 0; kj < 2; ++kj) {
          head_block_forward(be, block(qkv, kv, src, b, h, qi, kj), out + qrow * OW + h * hd, OW,
                             lse + (int64_t{b} * NH + h) * T + qi * c, scratch_);
        }
      }
    }
  }
}

void RingAttention::forward(ops::Backend& be, float* out, float* lse, const float* qkv) {
  const int cp = chunks_.cp, r = chunks_.rank;
  std::fill(out, out + int64_t{shape_.B} * shape_.T * shape_.q_width(), 0.0f);
  std::fill(lse, lse + int64_t{shape_.B} * shape_.n_head * shape_.T,
            -std::numeric_limits<float>::infinity());
  pack_kv(qkv, kv_[0]);
  const size_t bytes = sizeof(float) * static_cast<size_t>(kv_floats());
  int cur = 0;
  for (int s = 0; s < cp; ++s) {
    // The block now held came from rank r - s; send it on while attending to it.
    const int64_t ticket = s + 1 < cp ? ring_->start(kv_[cur], kv_[1 - cur], bytes) : 0;
    attend(be, qkv, kv_[cur], (r - s + cp) % cp, out, lse);
    if (ticket != 0) ring_->wait(ticket);
    cur = 1 - cur;
  }
}

void RingAttention::attend_backward(ops::Backend& be, const float* qkv, const float* kv, int src,
                                    int kj, const float* dout, const float* lse, float* dqkv,
                                    float* dkv) {
  const int T = shape_.T, c = chunks_.chunk, hd = shape_.head_dim, NH = shape_.n_head;
  const int W = shape_.qkv_width(), KW = 2 * shape_.n_kv_head * hd, OW = shape_.q_width();
  for (int b = 0; b < shape_.B; ++b) {
    const int64_t krow = int64_t{b} * T + kj * c;
    for (int h = 0; h < NH; ++h) {
      float* dk = dkv + krow * KW + (h / shape_.group()) * hd;
      for (int qi = 0; qi < 2; ++qi) {
        const int64_t qrow = int64_t{b} * T + qi * c;
        const int64_t lrow = (int64_t{b} * NH + h) * T + qi * c;
        head_block_backward(be, block(qkv, kv, src, b, h, qi, kj), dout + qrow * OW + h * hd, OW,
                            lse + lrow, delta_ + lrow, dqkv + qrow * W + h * hd, W, dk,
                            dk + shape_.n_kv_head * hd, KW, scratch_);
      }
    }
  }
}

void RingAttention::backward(ops::Backend& be, float* dqkv, const float* dout, const float* qkv,
                             const float* out, const float* lse) {
  const int cp = chunks_.cp, r = chunks_.rank, T = shape_.T, hd = shape_.head_dim;
  const int64_t N = int64_t{shape_.B} * T, W = shape_.qkv_width(), OW = shape_.q_width();
  const int64_t kvn = kv_floats();
  const size_t bytes = sizeof(float) * static_cast<size_t>(kvn);
  std::fill(dqkv, dqkv + N * W, 0.0f);
  for (int b = 0; b < shape_.B; ++b) {  // delta = rowsum(dout * out), per head
    for (int t = 0; t < T; ++t) {
      const int64_t row = (int64_t{b} * T + t) * OW;
      for (int h = 0; h < shape_.n_head; ++h) {
        float d = 0.0f;
        for (int i = 0; i < hd; ++i) d += dout[row + h * hd + i] * out[row + h * hd + i];
        delta_[(int64_t{b} * shape_.n_head + h) * T + t] = d;
      }
    }
  }
  pack_kv(qkv, kv_[0]);
  // dK/dV travel one (sequence, key chunk) piece at a time: rows [b T + kj c, + c) of the
  // block, contiguous, so piece (b, kj) can leave while the next key chunk is computed.
  const int64_t row_floats = 2 * int64_t{shape_.n_kv_head} * hd;
  const int64_t piece = int64_t{chunks_.chunk} * row_floats;
  const size_t piece_bytes = sizeof(float) * static_cast<size_t>(piece);
  std::vector<int64_t> sent(static_cast<size_t>(2 * shape_.B), 0);  // last step's tickets
  int cur = 0;
  for (int s = 0; s < cp; ++s) {
    // K/V of rank r - s is held: send it on (the next step's block arrives meanwhile),
    // attend to it one key chunk at a time, add the dK/dV the ranks before this one
    // computed for that chunk, send it on.
    const int64_t kv_ticket = s + 1 < cp ? ring_->start(kv_[cur], kv_[1 - cur], bytes) : 0;
    float* dkv = dkv_[s % 2];  // the exchanges two steps back that sent it have been waited
    std::fill(dkv, dkv + kvn, 0.0f);
    for (int kj = 0; kj < 2; ++kj) {
      attend_backward(be, qkv, kv_[cur], (r - s + cp) % cp, kj, dout, lse, dqkv, dkv);
      for (int b = 0; b < shape_.B; ++b) {
        const int64_t at = (int64_t{b} * T + int64_t{kj} * chunks_.chunk) * row_floats;
        int64_t& ticket = sent[static_cast<size_t>(2 * b + kj)];
        if (ticket != 0) {
          ring_->wait(ticket);
          for (int64_t i = at; i < at + piece; ++i) dkv[i] += dkv_in_[i];
        }
        // After the last step this brings this rank's own block home, complete.
        ticket = ring_->start(dkv + at, dkv_in_ + at, piece_bytes);
      }
    }
    if (kv_ticket != 0) ring_->wait(kv_ticket);
    cur = 1 - cur;
  }
  ring_->wait(sent.back());
  const int64_t q = OW, KW = 2 * int64_t{shape_.n_kv_head} * hd;
  for (int64_t row = 0; row < N; ++row) {
    float* d = dqkv + row * W + q;
    const float* g = dkv_in_ + row * KW;
    for (int64_t i = 0; i < KW; ++i) d[i] += g[i];
  }
}

}  // namespace trainctl::model
