#pragma once
// Predicts one training step of a GPT on a cluster described by a ClusterSpec (`trainctl
// plan --cluster`): compute from per-op FLOPs and bytes, tensor/pipeline/data-parallel
// communication from alpha-beta ring costs on the link tier each group is placed on, the
// schedule's bubble, and recomputation. docs/cost-model.md states the formulas and checks
// them against Narayanan et al. 2021 (tests/data/megatron_2021_table1.csv).
//
// Placement: ranks are numbered tp fastest, then dp, then pp (Megatron's order) and filled
// node by node; a group stays on the intra-node tier when the ranks it spans fit one node.
#include <string>

#include "config/job_spec.h"
#include "plan/cluster_spec.h"

namespace trainctl::plan {

struct CostInputs {
  int n_layer = 0, d_model = 0, n_head = 0, seq_len = 0, vocab_size = 0;
  // Weights of one layer's matrices (its matmul FLOPs are 2 per weight per token); 0 = GPT's
  // 12 d_model^2. Llama: (n_head + 2 n_kv_head) head_dim d_model + d_model^2 + 3 ffn d_model.
  double layer_matrix_params = 0;
  int tp = 1, pp = 1, dp = 1;
  int micro_batch_size = 1;
  int global_batch_size = 1;
  std::string schedule = "1f1b";   // gpipe | 1f1b | interleaved
  int virtual_stages = 1;          // chunks per stage (interleaved)
  std::string recompute = "none";  // none | selective | full
  // Attention that never writes its s x s scores (trainctl's kernels, FlashAttention): no
  // 5as/(ht) term in the elementwise traffic, and selective recomputation redoes the
  // pointwise outputs instead of the attention core. false: Megatron 2021's fused softmax,
  // which writes the scores (Narayanan et al.'s runs).
  bool flash_attention = true;
  // parallel.sequence_parallel: each TP allreduce becomes a reduce-scatter + all-gather
  // (the same ring bytes), the norms' and residuals' elementwise traffic is split over tp,
  // and pipeline sends need no all-gather after them (the stream is already split).
  bool sequence_parallel = false;
};

// The model, layout, batch and schedule of a job spec.
CostInputs cost_inputs(const config::JobSpec& spec);

// Seconds per step, by where the time goes (they add up to step_seconds).
struct CostBreakdown {
  double step_seconds = 0;
  double compute = 0;        // forward + backward matmuls and elementwise kernels, optimizer
  double recompute = 0;      // recomputation's forward work (selective or full)
  double tp_comm = 0;        // tensor-parallel allreduces (never overlapped)
  double tp_bytes = 0;       // bytes each TP rank sends for them per step (ring algorithms)
  double pp_comm = 0;        // pipeline sends/receives on the critical path
  double dp_comm = 0;        // exposed part of the data-parallel gradient reduction
  double dp_comm_total = 0;  // all of it, before overlap with the last backward
  double bubble = 0;         // pipeline fill and drain
  double bubble_fraction = 0;
  // What the step does: FLOPs counted per op (recomputation included) over all GPUs.
  double hardware_flops = 0;
  double model_flops = 0;  // 72·B·s·l·h²·(1 + s/6h + V/12lh): no recomputation
  double tokens_per_second = 0;
  double tflops_per_gpu = 0;              // hardware_flops / step / GPUs (the paper's "achieved")
  double mfu = 0;                         // model_flops / step / GPUs / peak
  std::string tp_link, pp_link, dp_link;  // tier names ("-" for a group of one)
  int nodes = 0;
};

// Throws InputError for a layout the model cannot be split by (layers not divisible by
// pp * virtual_stages, heads by tp) or that needs more nodes than the cluster has.
CostBreakdown predict_step(const CostInputs& in, const ClusterSpec& cluster);

// The paper's count: 96·B·s·l·h²·(1 + s/6h + V/16lh) (full recomputation).
double megatron_flops_with_recompute(double batch, double seq, double layers, double hidden,
                                     double vocab);

// Human-readable lines: step time, tokens/s, TFLOP/s, MFU and the breakdown.
std::string format_cost(const CostInputs& in, const ClusterSpec& cluster, const CostBreakdown& c);
// One JSON object with the same numbers.
std::string cost_json(const CostBreakdown& c);

}  // namespace trainctl::plan
