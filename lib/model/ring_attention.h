#pragma once
// Ring attention (context parallelism, model/context_chunks.h): causal self-attention over
// a sequence split across the CP ranks. Each rank keeps its queries; the K/V blocks travel
// around the CP ring (comm/ring_exchange.h) while each rank attends its queries to the
// block it holds and merges the partial result online (model/attention_blocks.h), the next
// block's transfer overlapped with the current block's compute. Backward sends the blocks
// around again, each with its accumulated dK/dV, which reach the block's owner after a
// full turn; the dK/dV go one key chunk at a time, so the first chunk's transfer overlaps
// the second chunk's compute (the last hop has no later compute to hide behind). Only the k/v heads
// travel (grouped-query attention sends n_kv_head heads).
//
// The same contract as ops::Backend::attention_forward/backward on the local rows
// ([B, T_local, qkv_width] with q | k | v per row), collective over the CP group: every CP
// rank calls forward (and backward) for the same micro-batch in the same order.
#include <cstdint>

#include "comm/ring_exchange.h"
#include "model/activation_arena.h"
#include "model/attention_blocks.h"
#include "model/context_chunks.h"
#include "ops/backend.h"

namespace trainctl::model {

class RingAttention {
 public:
  // `shape`: the local rows (T = chunks.local_len()). `ring`: null only while counting memory.
  RingAttention(const ops::AttentionShape& shape, const ContextChunks& chunks,
                comm::RingExchange* ring);
  // Takes the K/V block buffers and the scratch (shared by every layer) from `arena`.
  void allocate(ActivationArena& arena);

  void forward(ops::Backend& be, float* out, float* lse, const float* qkv);
  void backward(ops::Backend& be, float* dqkv, const float* dout, const float* qkv,
                const float* out, const float* lse);

 private:
  int64_t kv_floats() const;  // one K/V block: [B, T_local, 2 n_kv_head head_dim]
  void pack_kv(const float* qkv, float* kv) const;
  // Query chunk `qi` of head h of sequence b against key chunk `kj` of `src`'s block `kv`.
  HeadBlock block(const float* qkv, const float* kv, int src, int b, int h, int qi, int kj) const;
  // Attends this rank's queries to the K/V block of CP rank `src`.
  void attend(ops::Backend& be, const float* qkv, const float* kv, int src, float* out, float* lse);
  // Backward of the blocks whose keys are local chunk `kj` (0 or 1) of `src`'s K/V block:
  // dq accumulated, and the dK/dV rows of that chunk (complete for this rank afterwards).
  void attend_backward(ops::Backend& be, const float* qkv, const float* kv, int src, int kj,
                       const float* dout, const float* lse, float* dqkv, float* dkv);

  ops::AttentionShape shape_;
  ContextChunks chunks_;
  comm::RingExchange* ring_;
  float* kv_[2] = {nullptr, nullptr};   // the block held and the one arriving
  float* dkv_[2] = {nullptr, nullptr};  // backward: the block's dK/dV being sent, and built
  float* dkv_in_ = nullptr;             // backward: the arriving block's dK/dV so far
  float* delta_ = nullptr;              // backward: rowsum(dout * out) [B, n_head, T_local]
  float* scratch_ = nullptr;
};

}  // namespace trainctl::model
