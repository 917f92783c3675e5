#pragma once
// Predicts one training step of a GPT on a cluster described by a ClusterSpec (`trainctl
// plan --cluster`): compute from per-op FLOPs and bytes, tensor/pipeline/data-parallel
// communication from alpha-beta ring costs on the link tier each group is placed on, the
// schedule's bubble, and recomputation. docs/cost-model.md states the formulas and checks
// them against Narayanan et al. 2021 (tests/data/megatron_2021_table1.csv).
//
// Context parallelism (cp): each rank runs seq_len / cp tokens of every sequence and
// 1 / cp of the causal attention work; ring attention sends the K/V blocks (and in backward
// their gradients) around the CP ring, each hop hidden behind one block's attention compute
// where it is shorter (docs/cost-model.md).
//
// Placement: ranks are numbered tp fastest, then cp, then dp, then pp (Megatron's order) and filled
// node by node; a group stays on the intra-node tier when the ranks it spans fit one node.
#include <string>
#include <vector>

#include "config/job_spec.h"
#include "plan/cluster_spec.h"

namespace trainctl::plan {

struct CostInputs {
  int n_layer = 0, d_model = 0, n_head = 0, seq_len = 0, vocab_size = 0;
  // Weights of one layer's matrices (its matmul FLOPs are 2 per weight per token); 0 = GPT's
  // 12 d_model^2. Llama: (n_head + 2 n_kv_head) head_dim d_model + d_model^2 + 3 ffn d_model.
  double layer_matrix_params = 0;
  int tp = 1, pp = 1, dp = 1, cp = 1;
  double kv_fraction = 1.0;  // n_kv_head / n_head: the share of K/V in ring traffic
  int micro_batch_size = 1;
  int global_batch_size = 1;
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved | zb1p | zbv
  int virtual_stages = 1;         // chunks per stage (interleaved)
  // Blocks of each virtual stage (pp × chunks entries; virtual stage c*pp + s is chunk c of
  // pipeline stage s), as the job's partition gives them. Empty: Megatron's split, n_layer /
  // pp blocks per stage, or ⌈n_layer / pp⌉ on all but the last, which holds the rest.
  std::vector<int> stage_layers;
  std::string recompute = "none";  // none | selective | full
  // Attention that never writes its s x s scores (trainctl's kernels, FlashAttention): no
  // 5as/(ht) term in the elementwise traffic, and selective recomputation redoes the
  // pointwise outputs instead of the attention core. false: Megatron 2021's fused softmax,
  // which writes the scores (Narayanan et al.'s runs).
  bool flash_attention = true;
  // Mixture of experts with expert parallelism (parallel.ep): MoE layers, routed experts
  // per token, and the ep group size; the token all-to-all is costed, not the experts'
  // compute difference (layer_matrix_params stays the dense layer's).
  int moe_layers = 0, top_k = 0, ep = 1;
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
  double cp_comm = 0;        // ring attention's K/V traffic not hidden behind its compute
  double cp_comm_total = 0;  // all of it
  double bubble = 0;         // pipeline fill and drain
  // Expert parallelism's token all-to-alls (dispatch and combine, forward and backward, and
  // the recomputed forward's with full recomputation) on the critical stage, not overlapped.
  double ep_comm = 0;
  double bubble_fraction = 0;
  // What the step does: FLOPs counted per op (recomputation included) over all GPUs.
  double hardware_flops = 0;
  double model_flops = 0;  // 72·B·s·l·h²·(1 + s/6h + V/12lh): no recomputation
  double tokens_per_second = 0;
  double tflops_per_gpu = 0;  // hardware_flops / step / GPUs (the paper's "achieved")
  double mfu = 0;             // model_flops / step / GPUs / peak
  std::string tp_link, pp_link, dp_link, cp_link;  // tier names ("-" for a group of one)
  std::string ep_link = "-";
  // Per pipeline stage: its blocks and the seconds of one micro-batch's forward + backward
  // on it (recomputation and TP communication included, the LM head on the last); the
  // slowest paces the pipeline.
  std::vector<int> stage_layers;
  std::vector<double> stage_seconds;
  int nodes = 0;
};

// Throws InputError for a layout the model cannot be split by (fewer layers than pp *
// virtual_stages, stage_layers that do not cover them, heads not divisible by tp) or that
// needs more nodes than the cluster has.
CostBreakdown predict_step(const CostInputs& in, const ClusterSpec& cluster);

// The paper's count: 96·B·s·l·h²·(1 + s/6h + V/16lh) (full recomputation).
double megatron_flops_with_recompute(double batch, double seq, double layers, double hidden,
                                     double vocab);

// Human-readable lines: step time, tokens/s, TFLOP/s, MFU and the breakdown.
std::string format_cost(const CostInputs& in, const ClusterSpec& cluster, const CostBreakdown& c);
// One JSON object with the same numbers.
std::string cost_json(const CostBreakdown& c);

}  // namespace trainctl::plan
