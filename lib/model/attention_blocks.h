#pragma once
// Causal attention one block at a time, for ring attention (model/ring_attention.h): the
// query rows of one head against one block of key/value rows, with the rows' positions in
// the whole sequence explicit (key j is visible to query i iff kpos0 + j <= qpos0 + i).
// Forward keeps no [T, T] probabilities: each block's partial output, normalised over the
// block's keys, is merged into the running output with the online-softmax rule (the
// log-sum-exp kept per row), so the result over all blocks, in any order and of any sizes,
// is full attention. Backward recomputes each block's probabilities from the final
// log-sum-exp (flash-attention style).
#include <cstdint>

#include "ops/backend.h"

namespace trainctl::model {

struct HeadBlock {
  const float* q = nullptr;  // [nq, head_dim], row stride ldq
  int ldq = 0;
  const float* k = nullptr;  // [nk, head_dim], row stride ldkv
  const float* v = nullptr;  // likewise
  int ldkv = 0;
  int nq = 0, nk = 0, head_dim = 0;
  int qpos0 = 0, kpos0 = 0;  // positions of the first query and key row
  // No key of the block is visible to any query row.
  bool masked_out() const { return kpos0 > qpos0 + nq - 1; }
};

// Scratch floats the two functions below need for a block of `nk` keys.
int64_t head_block_scratch_floats(int nk, int head_dim);

// Merges `rows` partial results (o_part normalised over its keys, lse_part their
// log-sum-exp; -inf: no visible key) into (o, lse): lse' = log(e^lse + e^lse_part),
// o' = o e^(lse - lse') + o_part e^(lse_part - lse'). Start from o = 0, lse = -inf.
void merge_attention_partial(float* o, int ldo, float* lse, const float* o_part, int ld_part,
                             const float* lse_part, int rows, int head_dim);

// out rows (stride ldo) and lse (one per query row) updated with this block's keys.
void head_block_forward(ops::Backend& be, const HeadBlock& b, float* out, int ldo, float* lse,
                        float* scratch);

// Given the final lse and delta = rowsum(dout * out), accumulates (+=) this block's share of
// dq (stride lddq) and of dk, dv (stride lddkv).
void head_block_backward(ops::Backend& be, const HeadBlock& b, const float* dout, int ldo,
                         const float* lse, const float* delta, float* dq, int lddq, float* dk,
                         float* dv, int lddkv, float* scratch);

}  // namespace trainctl::model
