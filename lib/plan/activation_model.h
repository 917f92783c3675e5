#pragma once
// Activation memory of one transformer layer for one micro-batch, counted tensor by tensor
// as Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
// Models", section 4) count it: every tensor a layer's backward reads, at its stored width.
// With Megatron's 2022 layer (LayerNorm, dropout, attention that stores its s x s scores:
// `megatron_2022`) it gives their formulas exactly: sbh(34 + 5as/h) bytes without
// parallelism, sbh(10 + 24/t + 5as/(ht)) with tensor parallelism, sbh(34/t + 5as/(ht))
// with sequence parallelism, sbh(34/t) with selective recomputation and sequence
// parallelism (tests/data/korthikanti_2022_activations.csv). With trainctl's layer
// (flash-style attention: no s x s tensor; no dropout) it is what the engine keeps per layer
// in 16 bits, which the memory plan counts from the engine's own allocations
// (plan/memory_plan.h; tests/unit/test_mixed_memory_plan.cpp checks the two agree): the
// bridge between the paper's table and the plan.
#include <string>

namespace trainctl::plan {

// What a layer keeps for its backward; see model/gpt.h for trainctl's modes.
enum class KeptSet {
  none,       // everything the backward reads
  selective,  // trainctl's: drops the pointwise outputs (norm outputs, GELU/SwiGLU output,
              // the post-attention residual); Megatron's: drops the attention core (the
              // s x s scores and their dropout); see LayerShape::megatron_selective
  full,       // only the layer's input
};

struct LayerShape {
  double seq = 0, micro_batch = 0, hidden = 0, heads = 0;
  double kv_hidden = 0;             // keys' and values' width (grouped-query attention); 0 = hidden
  double ffn = 0;                   // MLP width (4 hidden for GPT)
  bool gated_mlp = false;           // SwiGLU: gate and up projections, their product feeds down
  bool dropout = false;             // 1-byte masks after attention, after the MLP, on the scores
  bool stores_scores = false;       // attention keeps softmax(QK^T) (s x s per head); flash-style
                                    // kernels keep a log-sum-exp row per head instead
  bool megatron_selective = false;  // KeptSet::selective drops the attention core (Megatron)
                                    // instead of the pointwise outputs (trainctl)
  double activation_bytes = 2;      // stored width of activations (bf16: 2, fp32: 4)
  int tp = 1;
  // Sequence parallelism (parallel.sequence_parallel) shards the replicated part (norms,
  // residuals, dropout masks) over tp. Megatron keeps the norms' outputs sharded too and
  // all-gathers them again in backward; trainctl keeps them all-gathered, as tensor
  // parallelism does (`sp_keeps_gathered`), so its backward moves no extra bytes.
  // Context parallelism (parallel.cp) shards the sequence over cp ranks.
  bool sequence_parallel = false;
  bool sp_keeps_gathered = false;
  int cp = 1;
};

// Megatron's 2022 GPT layer: 4h MLP, LayerNorm, dropout, scores stored, 16-bit activations.
LayerShape megatron_2022_layer(double seq, double micro_batch, double hidden, double heads, int tp,
                               bool sequence_parallel);

// Bytes one layer keeps between its forward and its backward for one micro-batch.
double layer_activation_bytes(const LayerShape& shape, KeptSet kept);

// KeptSet from training.activation_checkpointing's spelling; throws InputError otherwise.
KeptSet parse_kept_set(const std::string& name);

}  // namespace trainctl::plan
