#include "plan/cost_model.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "parallel/pipeline_schedule.h"
#include "plan/collective_cost.h"
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
  in.micro_batch_size = spec.training.micro_batch_size;
  in.global_batch_size = spec.training.global_batch_size;
  in.schedule = spec.parallel.schedule;
  in.virtual_stages = spec.parallel.virtual_stages;
  in.recompute = spec.training.activation_checkpointing;
  return in;
}

double megatron_flops_with_recompute(double batch, double seq, double layers, double hidden,
                                     double vocab) {
  return 96 * batch * seq * layers * hidden * hidden *
         (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden));
}

CostBreakdown predict_step(const CostInputs& in, const ClusterSpec& cluster) {
  const int v = in.schedule == "interleaved" ? std::max(1, in.virtual_stages) : 1;
  if (in.n_layer % (in.pp * v) != 0) {
    throw InputError("cost model: model.n_layer " + std::to_string(in.n_layer) +
                     " is not divisible by pp * virtual_stages (" + std::to_string(in.pp * v) +
                     ")");
  }
  if (in.n_head % in.tp != 0) {
    throw InputError("cost model: model.n_head " + std::to_string(in.n_head) +
                     " is not divisible by parallel.tp " + std::to_string(in.tp));
  }
  const long long world = static_cast<long long>(in.tp) * in.pp * in.dp;
  const int nodes = static_cast<int>((world + cluster.gpus_per_node - 1) / cluster.gpus_per_node);
  if (cluster.nodes > 0 && nodes > cluster.nodes) {
    throw InputError("cost model: the layout needs " + std::to_string(world) + " GPUs (" +
                     std::to_string(nodes) + " nodes of " + std::to_string(cluster.gpus_per_node) +
                     ") but cluster " + cluster.name + " has " + std::to_string(cluster.nodes) +
                     " nodes");
  }
  const double b = in.micro_batch_size, s = in.seq_len, h = in.d_model, a = in.n_head,
               V = in.vocab_size, t = in.tp, l = in.n_layer;
  const double m = static_cast<double>(in.global_batch_size) / (b * in.dp);
  const double flop_rate = cluster.peak_tflops * 1e12 * cluster.matmul_efficiency;
  const double byte_rate = cluster.memory_bandwidth_gbs * 1e9 * cluster.memory_efficiency;
  const double act = cluster.activation_bytes;
  const double P = in.layer_matrix_params > 0 ? in.layer_matrix_params : 12 * h * h;

  // One layer, one micro-batch, one TP rank. Matmuls: QKV, projection and the MLP's
  // (2bsP; GPT's 24bsh^2) and the attention scores and their use (4bs^2h).
  const double layer_flops = (2 * b * s * P + 4 * b * s * s * h) / t;
  // Elementwise kernels write what they produce once and read it once: per layer that is
  // Korthikanti et al.'s activation count, sbh(10 + 24/t) + 5abs^2/t bytes at 2-byte
  // elements (scaled by act / 2), twice.
  const double layer_bytes = 2 * (act / 2) * (s * b * h * (10 + 24 / t) + 5 * a * b * s * s / t);
  const double fwd = layer_flops / flop_rate + layer_bytes / byte_rate;
  double rec = 0, rec_flops = 0;
  int tp_allreduces = 4;  // two in forward, two in backward
  if (in.recompute == "full") {
    rec = fwd;
    rec_flops = layer_flops;
    tp_allreduces = 6;
  } else if (in.recompute == "selective") {
    rec_flops = 4 * b * s * s * h / t;
    rec = rec_flops / flop_rate + act * 5 * a * b * s * s / t / byte_rate;
  }
  const LinkTier& tp_link = tier_for(1, in.tp, cluster);
  const double tp_per_layer =
      tp_allreduces * ring_allreduce_seconds(b * s * h * act, in.tp, tp_link);

  // The last stage is the critical one: it holds the logits (2bshV/t forward, 3x with
  // backward) besides its layers.
  const double layers_per_stage = l / in.pp;
  const double logit_flops = 2 * b * s * h * V / t;
  const double logit_time = 3 * logit_flops / flop_rate;
  const double stage_compute = layers_per_stage * 3 * fwd + logit_time;
  const double stage_rec = layers_per_stage * rec;
  const double stage_tp = layers_per_stage * tp_per_layer;
  const double per_micro = stage_compute + stage_rec + stage_tp;

  CostBreakdown c;
  c.nodes = nodes;
  c.tp_link = tp_link.name;
  c.compute = m * stage_compute;
  c.recompute = m * stage_rec;
  c.tp_comm = m * stage_tp;
  if (in.pp > 1) {
    const parallel::ScheduleKind kind = parallel::parse_schedule_kind(in.schedule);
    c.bubble_fraction = parallel::theoretical_bubble(kind, in.pp, static_cast<int>(m), v);
    c.bubble = m * per_micro * c.bubble_fraction / (1 - c.bubble_fraction);
    // Each chunk boundary sends activations forward and gradients back; with TP each rank
    // sends its 1/t share (Megatron's scatter/gather) and the TP group allgathers it.
    const LinkTier& pp_link = tier_for(in.tp * in.dp, in.pp, cluster);
    c.pp_link = pp_link.name;
    const double message = b * s * h * act;
    c.pp_comm =
        m * 2 * v *
        (p2p_seconds(message / t, pp_link) + ring_allgather_seconds(message, in.tp, tp_link));
  } else {
    c.pp_link = "-";
  }
  // Data parallelism: the stage's gradients, reduced once per step after the last
  // micro-batch; the last backward can hide up to dp_overlap of its own time.
  const double stage_params = layers_per_stage * (P + 13 * h) / t + V * h / t;
  const LinkTier& dp_link = tier_for(in.tp, in.dp, cluster);
  c.dp_link = in.dp > 1 ? dp_link.name : "-";
  c.dp_comm_total = ring_allreduce_seconds(stage_params * cluster.gradient_bytes, in.dp, dp_link);
  const double last_backward = layers_per_stage * 2 * fwd + 2 * logit_flops / flop_rate;
  c.dp_comm = std::max(0.0, c.dp_comm_total - cluster.dp_overlap * last_backward);
  // The optimizer step (AdamW): about 30 bytes read or written per local parameter
  // (fp32 weight, gradient, two moments; the half-precision copy), sharded over DP with ZeRO.
  c.compute += stage_params * 30 / byte_rate;

  c.step_seconds = c.compute + c.recompute + c.tp_comm + c.pp_comm + c.dp_comm + c.bubble;
  const double B = in.global_batch_size;
  const double per_seq_layer = 2 * s * P + 4 * s * s * h;
  c.model_flops = 3 * B * (l * per_seq_layer + 2 * s * h * V);
  c.hardware_flops = c.model_flops + B * l * rec_flops * t / b;
  c.tokens_per_second = B * s / c.step_seconds;
  c.tflops_per_gpu = c.hardware_flops / c.step_seconds / static_cast<double>(world) / 1e12;
  c.mfu =
      c.model_flops / c.step_seconds / static_cast<double>(world) / (cluster.peak_tflops * 1e12);
  return c;
}

std::string format_cost(const CostInputs& in, const ClusterSpec& cluster, const CostBreakdown& c) {
  const long long world = static_cast<long long>(in.tp) * in.pp * in.dp;
  std::string out = "cluster " + cluster.name + ": " + std::to_string(world) + " x " +
                    cluster.device + " on " + std::to_string(c.nodes) +
                    (c.nodes == 1 ? " node" : " nodes") + " (tp on " + c.tp_link + ", pp on " +
                    c.pp_link + ", dp on " + c.dp_link + ")\n";
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
  line("pp communication", c.pp_comm);
  line("dp communication", c.dp_comm);
  line("pipeline bubble ", c.bubble);
  out += "  (dp gradient reduction " + fmt("%.4g s", c.dp_comm_total) +
         ", the rest hidden behind the last backward)\n";
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
                      {"pp_comm", c.pp_comm},
                      {"dp_comm", c.dp_comm},
                      {"dp_comm_total", c.dp_comm_total},
                      {"bubble", c.bubble},
                      {"bubble_fraction", c.bubble_fraction},
                      {"nodes", c.nodes},
                      {"tp_link", c.tp_link},
                      {"pp_link", c.pp_link},
                      {"dp_link", c.dp_link}};
  return j.dump();
}

}  // namespace trainctl::plan
