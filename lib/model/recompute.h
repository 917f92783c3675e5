#pragma once
// Activation recomputation (training.activation_checkpointing): what each block keeps from
// its forward for its backward. Recomputed values come from the same kernels on the same
// inputs, so the gradients are bitwise those of `none`.
//   none:      everything the backward reads.
//   selective: what is expensive to recompute (attention's q|k|v, output and log-sum-exp;
//              the feed-forward's pre-activation) and the block output; the pointwise
//              outputs (norms and their statistics, the feed-forward's activation, the
//              post-attention residual: one [N,C] product from the kept attention output,
//              plus its TP allreduce) are recomputed just before the block's backward.
//              The flash-style attention never holds [T,T] probabilities, so its core costs
//              O(T^2) to recompute but only [N,C] to keep: it is kept, and the cut (>= 40%
//              of activations) comes from the pointwise outputs instead.
//   full:      only each block's output (= the next block's input); the whole block
//              forward is recomputed from its input before its backward (with tensor
//              parallelism, including its TP allreduces).
// Dropped buffers live once per model (shared by every block of a kind, chunk and slot;
// model/activation_arena.h).
#include <string>

namespace trainctl::model {

enum class Recompute { none, selective, full };
const char* to_string(Recompute r);
// "none" | "selective" | "full"; throws std::invalid_argument otherwise.
Recompute parse_recompute(const std::string& name);

}  // namespace trainctl::model
