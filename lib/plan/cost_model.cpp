#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "parallel/pipeline_schedule.h"
#include "plan/collective_cost.h"
#include "plan/model_of_spec.h"
#include "util/error.h"

namespace trainctl::plan {
namespace {

const LinkTier kNoLink{"-", 1, 0};

// The tier a group of `size` ranks spaced `stride` apart runs on.
const LinkTier& tier_for(int stride, int size, const ClusterSpec& cluster) {
  if (size <= 1) return kNoLink;
  if (static_cast<long long>(stride) * size <= cluster.gpus_per_node) return cluster.intra_node;
  return cluster.across_nodes();
}

std::string fmt(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

}  // namespace

CostInputs cost_inputs(const config::JobSpec& spec) {
  CostInputs in;
  in.n_layer = spec.model.n_layer;
  in.d_model = spec.model.d_model;
  in.n_head = spec.model.n_head;
  if (spec.model.is_llama()) {
    const double h = spec.model.d_model, hd = h / spec.model.n_head;
    in.layer_matrix_params = (spec.model.n_head + 2.0 * spec.model.kv_heads()) * hd * h + h * h +
                             3.0 * spec.model.mlp_hidden() * h;
  }
  in.seq_len = spec.model.seq_len;
  in.vocab_size = spec.model.vocab_size;
  in.tp = spec.parallel.tp;
  in.pp = spec.parallel.pp;
  in.dp = spec.parallel.dp;
  in.cp = spec.parallel.cp;
  in.kv_fraction = static_cast<double>(spec.model.kv_heads()) / spec.model.n_head;
  in.micro_batch_size = spec.training.micro_batch_size;
  in.global_batch_size = spec.training.global_batch_size;
  in.schedule = spec.parallel.schedule;
  in.virtual_stages = spec.parallel.virtual_stages;
  in.recompute = spec.training.activation_checkpointing;
  // The blocks of each stage as the job runs them (stage_balance / layers_per_stage).
  const bool chunked = in.schedule == "interleaved" || in.schedule == "zbv";
  const int parts = spec.parallel.pp * (chunked ? in.virtual_stages : 1);
  try {
    for (const model::LayerRange& r :
         model::partition_layers(model_config_of(spec.model), spec.model.seq_len, parts,
                                 stage_split_of(spec.parallel))) {
      in.stage_layers.push_back(r.size());
    }
  } catch (const std::invalid_argument&) {
    in.stage_layers.clear();  // predict_step reports the layout the model cannot take
  }
  if (spec.model.moe.enabled()) {
    for (int l = 0; l < spec.model.n_layer; ++l) in.moe_layers += spec.model.moe_layer(l) ? 1 : 0;
    in.top_k = spec.model.moe.top_k;
    in.ep = spec.parallel.ep;
  }
  in.sequence_parallel = spec.parallel.sequence_parallel;
  return in;
}

double megatron_flops_with_recompute(double batch, double seq, double layers, double hidden,
                                     double vocab) {
  return 96 * batch * seq * layers * hidden * hidden *
         (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden));
}

namespace {

// The number of nodes the layout fills; InputError for a layout the model cannot be split
// by, or one larger than the cluster. `v`: chunks per stage.
int check_layout(const CostInputs& in, const ClusterSpec& cluster, int v) {
  if (in.n_layer < in.pp * v) {
    throw InputError("cost model: model.n_layer " + std::to_string(in.n_layer) +
                     " is fewer than pp * virtual_stages (" + std::to_string(in.pp * v) +
                     "): every chunk needs a layer");
  }
  if (!in.stage_layers.empty()) {
    long long sum = 0;
    for (int n : in.stage_layers) sum += n;
    const bool ones =
        std::all_of(in.stage_layers.begin(), in.stage_layers.end(), [](int n) { return n >= 1; });
    if (static_cast<int>(in.stage_layers.size()) != in.pp * v || sum != in.n_layer || !ones) {
      throw InputError("cost model: stage_layers must give each of the " +
                       std::to_string(in.pp * v) + " (virtual) stages at least one layer, " +
                       std::to_string(in.n_layer) + " in all");
    }
  }
  if (in.n_head % in.tp != 0) {
    throw InputError("cost model: model.n_head " + std::to_string(in.n_head) +
                     " is not divisible by parallel.tp " + std::to_string(in.tp));
  }
  const long long world = static_cast<long long>(in.tp) * in.pp * in.dp * in.cp;
  const int nodes = static_cast<int>((world + cluster.gpus_per_node - 1) / cluster.gpus_per_node);
  if (cluster.nodes > 0 && nodes > cluster.nodes) {
    throw InputError("cost model: the layout needs " + std::to_string(world) + " GPUs (" +
                     std::to_string(nodes) + " nodes of " + std::to_string(cluster.gpus_per_node) +
                     ") but cluster " + cluster.name + " has " + std::to_string(cluster.nodes) +
                     " nodes");
  }
  return nodes;
}

// The job's sizes in the letters of the formulas (docs/cost-model.md), and the rates the
// cluster reaches.
struct Sizes {
  double b, s, h, a, V, t, l;
  double sl;  // tokens of each sequence on one rank: s / cp
  double m;   // micro-batches per DP rank and step
  double P;   // one layer's matrix weights
  double flop_rate, byte_rate, act;
};

Sizes sizes_of(const CostInputs& in, const ClusterSpec& cluster) {
  Sizes z;
  z.b = in.micro_batch_size;
  z.s = in.seq_len;
  z.sl = static_cast<double>(in.seq_len) / in.cp;
  z.h = in.d_model;
  z.a = in.n_head;
  z.V = in.vocab_size;
  z.t = in.tp;
  z.l = in.n_layer;
  z.m = static_cast<double>(in.global_batch_size) / (z.b * in.dp);
  z.flop_rate = cluster.peak_tflops * 1e12 * cluster.matmul_efficiency;
  z.byte_rate = cluster.memory_bandwidth_gbs * 1e9 * cluster.memory_efficiency;
  z.act = cluster.activation_bytes;
  z.P = in.layer_matrix_params > 0 ? in.layer_matrix_params : 12 * z.h * z.h;
  return z;
}

// One layer, one micro-batch, one TP rank: seconds of its forward, of recomputation and of
// its TP allreduces (forward and backward), and the FLOPs recomputation adds.
struct LayerCost {
  double fwd = 0, rec = 0, rec_flops = 0, tp = 0;
  double tp_bytes = 0;  // sent by each TP rank for those collectives
};

LayerCost layer_cost(const CostInputs& in, const Sizes& z, const LinkTier& tp_link) {
  const double b = z.b, s = z.sl, h = z.h, a = z.a, t = z.t, act = z.act;
  // Matmuls: QKV, projection and the MLP's (2bsP; GPT's 24bsh^2) and the attention scores
  // and their use (4bs^2h); under cp each rank has s / cp tokens and 1 / cp of the
  // attention (the load-balanced chunks: 4 b S^2 h / cp for the whole sequence's S).
  const double layer_flops = (2 * b * s * z.P + 4 * b * z.s * z.s * h / in.cp) / t;
  // Elementwise kernels write what they produce once and read it once: per layer that is
  // Korthikanti et al.'s activation count, sbh(10 + 24/t) + 5abs^2/t bytes at 2-byte
  // elements (scaled by act / 2), twice.
  const double scores = in.flash_attention ? 0 : 5 * a * b * s * s / t;
  // Sequence parallelism splits the replicated 10 (norms, residuals, dropout) over t too.
  const double replicated = in.sequence_parallel ? 10 / t : 10;
  const double layer_bytes = 2 * (act / 2) * (s * b * h * (replicated + 24 / t) + scores);
  LayerCost c;
  c.fwd = layer_flops / z.flop_rate + layer_bytes / z.byte_rate;
  int tp_allreduces = 4;  // two in forward, two in backward
  if (in.recompute == "full") {
    c.rec = c.fwd;
    c.rec_flops = layer_flops;
    tp_allreduces = 6;
  } else if (in.recompute == "selective" && in.flash_attention) {
    // trainctl's selective (model/gpt.h): the norms' and the activation's outputs written
    // again, and the attention projection that rebuilds the residual.
    c.rec_flops = 2 * b * s * h * h / t;
    c.rec = c.rec_flops / z.flop_rate + layer_bytes / 2 / z.byte_rate;
  } else if (in.recompute == "selective") {
    c.rec_flops = 4 * b * s * s * h / t;
    c.rec = c.rec_flops / z.flop_rate + act * 5 * a * b * s * s / t / z.byte_rate;
  }
  // Each allreduce sends 2 (t-1)/t of the message from every rank; sequence parallelism's
  // reduce-scatter + all-gather send the same. Its selective recomputation gathers the two
  // recomputed norm outputs again (model/norm.h).
  const double message = b * s * h * act, share = (t - 1) / t * message;
  if (in.sequence_parallel) {
    const double gathers = in.recompute == "selective" && in.flash_attention ? 2 : 0;
    c.tp = tp_allreduces * (ring_reduce_scatter_seconds(message, in.tp, tp_link) +
                            ring_allgather_seconds(message, in.tp, tp_link)) +
           gathers * ring_allgather_seconds(message, in.tp, tp_link);
    c.tp_bytes = (2 * tp_allreduces + gathers) * share;
  } else {
    c.tp = tp_allreduces * ring_allreduce_seconds(message, in.tp, tp_link);
    c.tp_bytes = 2 * tp_allreduces * share;
  }
  return c;
}

// The blocks of each pipeline stage (its chunks together); Megatron's split when the
// inputs give none.
std::vector<int> layers_of_stages(const CostInputs& in, int v) {
  std::vector<int> out(static_cast<size_t>(in.pp), 0);
  if (in.stage_layers.empty()) {
    const int full = (in.n_layer + in.pp - 1) / in.pp;
    const bool fits = in.n_layer - full * (in.pp - 1) >= 1;
    for (int s = 0; s < in.pp; ++s) {
      // Where ceil(l / pp) on all but the last would leave it nothing (9 on 8), near-equal.
      out[static_cast<size_t>(s)] =
          fits ? full : in.n_layer / in.pp + (s < in.n_layer % in.pp ? 1 : 0);
    }
    if (fits) out.back() = in.n_layer - full * (in.pp - 1);
    return out;
  }
  // Virtual stage i runs on rank i % pp, or in zbv's V on rank 2pp-1-i past the turn.
  const bool v_order = in.schedule == "zbv";
  for (int i = 0; i < in.pp * v; ++i) {
    const int rank = v_order && i >= in.pp ? 2 * in.pp - 1 - i : i % in.pp;
    out[static_cast<size_t>(rank)] += in.stage_layers[static_cast<size_t>(i)];
  }
  return out;
}

// The schedule's bubble and the sends between stages, for `per_micro` seconds of the
// critical stage per micro-batch; `v` chunks per stage.
void add_pipeline(CostBreakdown& c, const CostInputs& in, const ClusterSpec& cluster,
                  const Sizes& z, double per_micro, int v, const LinkTier& tp_link) {
  if (in.pp <= 1) {
    c.pp_link = "-";
    return;
  }
  const double m = z.m;
  const parallel::ScheduleKind kind = parallel::parse_schedule_kind(in.schedule);
  c.bubble_fraction = parallel::theoretical_bubble(kind, in.pp, static_cast<int>(m), v);
  c.bubble = m * per_micro * c.bubble_fraction / (1 - c.bubble_fraction);
  // Each chunk boundary sends activations forward and gradients back; with TP each rank
  // sends its 1/t share (Megatron's scatter/gather) and the TP group allgathers it (not
  // with sequence parallelism: the stream is already split that way).
  const LinkTier& pp_link = tier_for(in.tp * in.cp * in.dp, in.pp, cluster);
  c.pp_link = pp_link.name;
  const double message = z.b * z.sl * z.h * z.act;
  c.pp_comm = m * 2 * v *
              (p2p_seconds(message / z.t, pp_link) +
               (in.sequence_parallel ? 0 : ring_allgather_seconds(message, in.tp, tp_link)));
}

// Ring attention (model/ring_attention.h), per layer and micro-batch: forward passes the
// K/V block cp - 1 hops, backward cp - 1 hops of K/V and cp of their gradients (full
// recomputation runs the forward again). Each hop overlaps one block's attention compute
// (a 1 / cp share of the rank's attention; backward about twice the forward's).
void add_context_ring(CostBreakdown& c, const CostInputs& in, const ClusterSpec& cluster,
                      const Sizes& z, double layers) {
  if (in.cp <= 1) {
    c.cp_link = "-";
    return;
  }
  const LinkTier& link = tier_for(in.tp, in.cp, cluster);
  c.cp_link = link.name;
  const double block = 2 * z.b * z.sl * z.h * in.kv_fraction / z.t * z.act;
  const double hop = p2p_seconds(block, link);
  const double attention = 4 * z.b * z.s * z.s * z.h / in.cp / z.t / z.flop_rate;
  const double step_fwd = attention / in.cp, step_bwd = 2 * step_fwd;
  const double fwd_hops = (in.cp - 1) * (in.recompute == "full" ? 2 : 1);
  const double bwd_hops = 2.0 * in.cp - 1;
  const double per_layer = (fwd_hops + bwd_hops) * hop;
  const double exposed =
      fwd_hops * std::max(0.0, hop - step_fwd) + bwd_hops * std::max(0.0, hop - step_bwd);
  c.cp_comm_total = z.m * layers * per_layer;
  c.cp_comm = z.m * layers * exposed;
}

// Step time, throughput and utilisation from the parts; `rec_flops` per layer as in
// LayerCost.
void add_totals(CostBreakdown& c, const CostInputs& in, const ClusterSpec& cluster, const Sizes& z,
                double rec_flops) {
  const long long world = static_cast<long long>(in.tp) * in.pp * in.dp * in.cp;
  const double s = z.s, h = z.h, l = z.l;
  c.step_seconds =
      c.compute + c.recompute + c.tp_comm + c.pp_comm + c.dp_comm + c.ep_comm + c.bubble;
  const double B = in.global_batch_size;
  const double per_seq_layer = 2 * s * z.P + 4 * s * s * h;
  c.model_flops = 3 * B * (l * per_seq_layer + 2 * s * h * z.V);
  c.hardware_flops = c.model_flops + B * l * rec_flops * z.t * in.cp / z.b;
  c.step_seconds += c.cp_comm;
  c.tokens_per_second = B * s / c.step_seconds;
  c.tflops_per_gpu = c.hardware_flops / c.step_seconds / static_cast<double>(world) / 1e12;
  c.mfu =
      c.model_flops / c.step_seconds / static_cast<double>(world) / (cluster.peak_tflops * 1e12);
}

}  // namespace

CostBreakdown predict_step(const CostInputs& in, const ClusterSpec& cluster) {
  // zbv's two chunks per stage send twice the messages, as interleaved with V = 2 (its turn
  // of the V, local on the last stage, is counted as a send: an upper bound).
  const int v =
      in.schedule == "interleaved" || in.schedule == "zbv" ? std::max(1, in.virtual_stages) : 1;
  CostBreakdown c;
  c.nodes = check_layout(in, cluster, v);
  const Sizes z = sizes_of(in, cluster);
  const double b = z.b, s = z.sl, h = z.h, V = z.V, t = z.t, m = z.m;
  const LinkTier& tp_link = tier_for(1, in.tp, cluster);
  const LayerCost layer = layer_cost(in, z, tp_link);

  // The critical stage paces the pipeline: the slowest of the stages' blocks, the last
  // one's with the logits (2bshV/t forward, 3x with backward). With Megatron's split of l
  // a multiple of pp that is the last; otherwise (Llama 3 405B: 126 layers on 16 stages,
  // or uneven stage_layers) whichever the sums make it.
  const double logit_flops = 2 * b * s * h * V / t;
  const double per_layer = 3 * layer.fwd + layer.rec + layer.tp;
  c.stage_layers = layers_of_stages(in, v);
  // The LM head's stage: the last, or in zbv's V the first (its chunk 2pp-1 is there).
  const size_t head_stage = in.schedule == "zbv" ? 0 : c.stage_layers.size() - 1;
  size_t critical = 0;
  for (size_t st = 0; st < c.stage_layers.size(); ++st) {
    c.stage_seconds.push_back(c.stage_layers[st] * per_layer +
                              (st == head_stage ? 3 * logit_flops / z.flop_rate : 0));
    // Ties go to the later stage (the head's, as Megatron's count has it).
    if (c.stage_seconds[st] >= c.stage_seconds[critical]) critical = st;
  }
  const double layers_per_stage = c.stage_layers[critical];
  const double logit_time = critical == head_stage ? 3 * logit_flops / z.flop_rate : 0;
  const double stage_compute = layers_per_stage * 3 * layer.fwd + logit_time;
  const double stage_rec = layers_per_stage * layer.rec;
  const double stage_tp = layers_per_stage * layer.tp;
  c.tp_link = tp_link.name;
  c.compute = m * stage_compute;
  c.recompute = m * stage_rec;
  c.tp_comm = m * stage_tp;
  c.tp_bytes = m * layers_per_stage * layer.tp_bytes;
  add_pipeline(c, in, cluster, z, stage_compute + stage_rec + stage_tp, v, tp_link);

  // Expert parallelism: per MoE layer and micro-batch, each rank sends its b s top_k rows of
  // h activations (spread evenly over the ep group) out and back, forward and backward, and
  // once more each way when full recomputation reruns the forward. The ep group is ep
  // consecutive DP ranks (stride tp).
  if (in.ep > 1 && in.moe_layers > 0) {
    const LinkTier& ep_link = tier_for(in.tp, in.ep, cluster);
    c.ep_link = ep_link.name;
    const double rows_bytes = z.b * z.s * in.top_k * z.h * z.act;
    const double exchanges = in.recompute == "full" ? 6 : 4;
    const double stage_moe = std::ceil(static_cast<double>(in.moe_layers) / in.pp);
    c.ep_comm = m * stage_moe * exchanges * alltoall_seconds(rows_bytes, in.ep, ep_link);
  }

  // Data parallelism: the stage's gradients, reduced once per step after the last
  // micro-batch; the last backward can hide up to dp_overlap of its own time.
  const double stage_params = layers_per_stage * (z.P + 13 * h) / t + V * h / t;
  // Gradients are reduced over dp x cp (the CP ranks hold the same parameters).
  const LinkTier& dp_link = tier_for(in.tp, in.dp * in.cp, cluster);
  c.dp_link = in.dp * in.cp > 1 ? dp_link.name : "-";
  c.dp_comm_total =
      ring_allreduce_seconds(stage_params * cluster.gradient_bytes, in.dp * in.cp, dp_link);
  add_context_ring(c, in, cluster, z, layers_per_stage);
  const double last_backward = layers_per_stage * 2 * layer.fwd + 2 * logit_time / 3;
  c.dp_comm = std::max(0.0, c.dp_comm_total - cluster.dp_overlap * last_backward);
  // The optimizer step (AdamW): about 30 bytes read or written per local parameter
  // (fp32 weight, gradient, two moments; the half-precision copy), sharded over DP with ZeRO.
  c.compute += stage_params * 30 / z.byte_rate;
  add_totals(c, in, cluster, z, layer.rec_flops);
  return c;
}

std::string format_cost(const CostInputs& in, const ClusterSpec& cluster, const CostBreakdown& c) {
  const long long world = static_cast<long long>(in.tp) * in.pp * in.dp * in.cp;
  std::string out = "cluster " + cluster.name + ": " + std::to_string(world) + " x " +
                    cluster.device + " on " + std::to_string(c.nodes) +
                    (c.nodes == 1 ? " node" : " nodes") + " (tp on " + c.tp_link + ", pp on " +
                    c.pp_link + ", dp on " + c.dp_link +
                    (in.cp > 1 ? ", cp " + std::to_string(in.cp) + " on " + c.cp_link : "") + ")\n";
  out += "predicted step " + fmt("%.4g", c.step_seconds) + " s, " +
         fmt("%.4g", c.tokens_per_second) + " tokens/s, " + fmt("%.4g", c.tflops_per_gpu) +
         " TFLOP/s per GPU (recomputation counted), MFU " + fmt("%.1f%%", 100 * c.mfu) + "\n";
  auto line = [&](const char* name, double seconds) {
    out += std::string("  ") + name + fmt("%10.4g s", seconds) +
           fmt("  %5.1f%%\n", 100 * seconds / c.step_seconds);
  };
  line("compute         ", c.compute);
  line("recomputation   ", c.recompute);
  line("tp communication", c.tp_comm);
  if (c.tp_bytes > 0) {
    out += "    (" + fmt("%.4g", c.tp_bytes / 1e9) + " GB sent per TP rank and step" +
           (in.sequence_parallel ? ": sequence parallel reduce-scatter + all-gather)\n"
                                 : ": allreduce)\n");
  }
  line("pp communication", c.pp_comm);
  line("dp communication", c.dp_comm);
  if (in.cp > 1) line("cp communication", c.cp_comm);
  if (c.ep_comm > 0) line("ep all-to-all    ", c.ep_comm);
  line("pipeline bubble ", c.bubble);
  out += "  (dp gradient reduction " + fmt("%.4g s", c.dp_comm_total) +
         ", the rest hidden behind the last backward)\n";
  if (c.stage_layers.size() > 1) {
    out += "stages (one micro-batch's forward + backward; the slowest paces the pipeline):\n";
    const double slowest = *std::max_element(c.stage_seconds.begin(), c.stage_seconds.end());
    for (size_t st = 0; st < c.stage_layers.size(); ++st) {
      out += "  stage " + std::to_string(st) + ": " + std::to_string(c.stage_layers[st]) +
             (st == (in.schedule == "zbv" ? 0 : c.stage_layers.size() - 1) ? " layers + LM head"
                                                                           : " layers") +
             fmt(", %.4g ms", 1e3 * c.stage_seconds[st]) +
             (c.stage_seconds[st] == slowest ? " (slowest)\n" : "\n");
    }
  }
  if (in.cp > 1) {
    out += "  (cp ring traffic " + fmt("%.4g s", c.cp_comm_total) + ", " +
           fmt("%.0f%%", 100 * (1 - c.cp_comm / std::max(c.cp_comm_total, 1e-300))) +
           " hidden behind ring attention's compute)\n";
  }
  return out;
}

std::string cost_json(const CostBreakdown& c) {
  nlohmann::json j = {{"step_seconds", c.step_seconds},
                      {"tokens_per_second", c.tokens_per_second},
                      {"tflops_per_gpu", c.tflops_per_gpu},
                      {"mfu", c.mfu},
                      {"compute", c.compute},
                      {"recompute", c.recompute},
                      {"tp_comm", c.tp_comm},
                      {"tp_bytes", c.tp_bytes},
                      {"pp_comm", c.pp_comm},
                      {"dp_comm", c.dp_comm},
                      {"dp_comm_total", c.dp_comm_total},
                      {"ep_comm", c.ep_comm},
                      {"bubble", c.bubble},
                      {"bubble_fraction", c.bubble_fraction},
                      {"nodes", c.nodes},
                      {"tp_link", c.tp_link},
                      {"pp_link", c.pp_link},
                      {"dp_link", c.dp_link},
                      {"stage_layers", c.stage_layers},
                      {"stage_seconds", c.stage_seconds},
                      {"cp_comm", c.cp_comm},
                      {"cp_comm_total", c.cp_comm_total},
                      {"cp_link", c.cp_link}};
  return j.dump();
}

}  // namespace trainctl::plan
