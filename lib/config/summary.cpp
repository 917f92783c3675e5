// summary: what a job spec amounts to, for `trainctl validate`.
#include <cstdio>
#include <sstream>

#include "config/load.h"
#include "config/number_text.h"

namespace trainctl::config {

namespace {

// GPT-2 parameter count (nanoGPT layout, lm_head tied to the token embedding): embeddings
// V·C + T·C, per layer 12·C² + 13·C (qkv, proj, 4x MLP with biases, two LayerNorms), final LN.
// Llama (model/model_config.h): q, k, v, o, SwiGLU's three matrices and two RMSNorms per
// layer, the final RMSNorm, and an untied LM head unless tie_embeddings.
// One feed-forward of width h: llama's gate, up, down; gpt's c_fc and c_proj with biases.
double ffn_params(const ModelSpec& m, double h) {
  const double c = m.d_model;
  return m.is_llama() ? 3 * h * c : 2 * h * c + h + c;
}

int moe_layers(const ModelSpec& m) {
  int n = 0;
  for (int l = 0; l < m.n_layer; ++l) n += m.moe_layer(l) ? 1 : 0;
  return n;
}

// `active`: only the experts one token uses (top_k routed and the shared ones).
double parameter_count(const ModelSpec& m, bool active = false) {
  const double c = m.d_model;
  // Each MoE layer: its router and experts instead of the dense MLP.
  const int experts = active ? m.moe.top_k : m.moe.num_experts;
  const double moe =
      moe_layers(m) *
      (m.moe.num_experts * c + (experts + m.moe.shared_experts) * ffn_params(m, m.expert_hidden()) -
       ffn_params(m, m.mlp_hidden()));
  if (m.is_llama()) {
    const double hd = c / m.n_head, h = m.mlp_hidden();
    const double per_layer = (m.n_head + 2.0 * m.kv_heads()) * hd * c + c * c + 3 * h * c + 2 * c;
    return static_cast<double>(m.vocab_size) * c * (m.tie_embeddings ? 1 : 2) +
           m.n_layer * per_layer + c + moe;
  }
  return static_cast<double>(m.vocab_size) * c + static_cast<double>(m.seq_len) * c +
         m.n_layer * (12 * c * c + 13 * c) + 2 * c + moe;
}

std::string human(double n) {
  char text[32];
  if (n >= 1e9) {
    std::snprintf(text, sizeof text, "%.2fB", n / 1e9);
  } else if (n >= 1e6) {
    std::snprintf(text, sizeof text, "%.2fM", n / 1e6);
  } else if (n >= 1e3) {
    std::snprintf(text, sizeof text, "%.1fK", n / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%.0f", n);
  }
  return text;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g%%", fraction * 100);
  return text;
}

// Which transport the groups use, as the worker will pick it (comm/gloo/gloo_groups.h).
std::string describe_comm(const JobSpec& s) {
  const std::string& algo = s.runtime.allreduce_algo;
  std::string text;
  if (s.device == Device::cuda) {
    text = "NCCL";
  } else if (algo == "auto") {
    text =
        "Gloo over TCP; allreduce, reduce-scatter and allgather through shared memory "
        "between workers on one node";
  } else if (algo == "shm") {
    text =
        "Gloo over TCP; allreduce, reduce-scatter and allgather through shared memory "
        "(every group must be on one node)";
  } else {
    text = "Gloo over TCP only, allreduce " + algo;
  }
  const ParallelSpec& p = s.parallel;
  if (p.mode == "parameter_server") {
    text += ", " + std::to_string(p.ps_servers) + " parameter server(s) over TCP, " +
            (p.ps_max_staleness == 0
                 ? std::string("synchronous (max_staleness 0)")
                 : "asynchronous within " + std::to_string(p.ps_max_staleness) + " update(s)");
  } else if (p.dp > 1 && p.dp_sync != "allreduce") {
    text += ", " + p.dp_sync + ": replicas meet every " + std::to_string(p.sync_every) + " steps";
  } else if (p.dp > 1 && p.grad_compression == "powersgd") {
    text += ", gradients as PowerSGD rank-" + std::to_string(p.powersgd_rank) + " factors";
    if (p.powersgd_warmup_steps > 0) {
      text += " after " + std::to_string(p.powersgd_warmup_steps) + " uncompressed steps";
    }
  } else if (p.dp > 1) {
    text += ", gradients in " + p.grad_comm;
  }
  return text;
}

}  // namespace

std::string summary(const JobSpec& s) {
  const ModelSpec& m = s.model;
  const ParallelSpec& p = s.parallel;
  const TrainingSpec& t = s.training;
  const double params = parameter_count(m);
  const double active = parameter_count(m, true);
  const long long tokens_per_step = 1LL * t.global_batch_size * m.seq_len;
  // PaLM appendix B: 6N per token for the weights one token uses plus 12·L·C·T for attention.
  const double flops_per_token = 6 * active + 12.0 * m.n_layer * m.d_model * m.seq_len;

  std::ostringstream out;
  out << "job:        " << s.name << (s.spec_path.empty() ? "" : "  (" + s.spec_path.string() + ")")
      << "\n";
  out << "run_dir:    " << s.run_dir.string() << "\n";
  out << "workers:    " << s.world_size() << " on " << to_string(s.device) << " = dp " << p.dp
      << (p.cp > 1 ? " x cp " + std::to_string(p.cp) : std::string()) << " x tp " << p.tp
      << " x pp " << p.pp << " (zero " << p.zero << ", " << t.threads << " compute thread"
      << (t.threads == 1 ? "" : "s") << " each)\n";
  if (s.world_size() > 1) out << "comm:       " << describe_comm(s) << "\n";
  out << "model:      " << m.type << (m.preset.empty() ? "" : " " + m.preset) << ": " << m.n_layer
      << " layers, " << m.n_head << " heads x " << m.d_model / m.n_head << ", d_model " << m.d_model
      << ", seq_len " << m.seq_len << ", vocab " << m.vocab_size << "\n";
  if (m.is_llama()) {
    out << "            " << m.kv_heads() << " k/v heads, SwiGLU " << m.mlp_hidden()
        << ", rope_theta " << m.rope_theta << ", norm_eps " << m.norm_eps
        << (m.tie_embeddings ? ", tied" : ", untied") << " LM head\n";
  }
  if (m.moe.enabled()) {
    const MoeSpec& e = m.moe;
    out << "moe:        " << e.num_experts << " experts x " << m.expert_hidden() << ", top "
        << e.top_k << " (" << e.score << ")";
    if (e.shared_experts > 0) out << " + " << e.shared_experts << " shared";
    out << ", layers " << e.layers << " (" << moe_layers(m) << " of " << m.n_layer << "), balance "
        << e.balance << ", ";
    if (e.capacity_factor > 0) {
      out << "capacity factor " << e.capacity_factor << "\n";
    } else {
      out << "dropless\n";
    }
  }
  out << "parameters: " << human(params) << " total, " << human(active) << " active per token ("
      << human(params / (p.tp * p.pp)) << " per worker), " << human(flops_per_token)
      << " FLOP per token (fwd+bwd)\n";
  out << "batch:      " << t.global_batch_size << " sequences = micro " << t.micro_batch_size
      << " x grad_accum " << s.grad_accum() << " x dp " << p.dp << "; " << tokens_per_step
      << " tokens/step, " << human(static_cast<double>(tokens_per_step) * t.steps) << " tokens in "
      << t.steps << " steps\n";
  if (p.pp > 1) {
    // Fill-and-drain bubble of GPipe and 1F1B: (pp - 1) / (micro-batches + pp - 1).
    const int micro_batches = s.grad_accum();
    const double bubble = static_cast<double>(p.pp - 1) / (micro_batches + p.pp - 1);
    out << "pipeline:   " << p.schedule << ", " << micro_batches << " micro-batches over " << p.pp
        << " stages, bubble " << percent(bubble) << "\n";
  }
  out << "data:       " << s.data.type << (s.data.path.empty() ? "" : " " + s.data.path.string())
      << ", " << percent(s.data.val_fraction) << " held out"
      << (t.eval_every > 0 ? ", eval every " + std::to_string(t.eval_every) + " steps on " +
                                 std::to_string(t.eval_batches) + " batches"
                           : ", no eval")
      << "\n";
  for (const DataSourceSpec& src : s.data.sources) {
    out << "            source " << src.name << ": weight " << detail::format_real(src.weight)
        << ", " << src.type << " " << src.path.string() << "\n";
  }
  const OptimizerSpec& o = s.optimizer;
  out << "optimizer:  " << o.type << " lr " << detail::format_real(o.lr) << " -> "
      << detail::format_real(o.min_lr) << " (" << o.decay << ", warmup " << o.warmup_steps
      << "), weight_decay " << detail::format_real(o.weight_decay) << ", grad_clip "
      << detail::format_real(t.grad_clip) << "\n";
  out << "precision:  ";
  switch (s.precision.compute) {
    case DType::fp32:
      out << "fp32\n";
      break;
    case DType::bf16:
      out << "bf16 matrix products (fp32 accumulation, weights and optimizer in fp32)\n";
      break;
    case DType::fp16:
      out << "fp16 matrix products (fp32 accumulation), dynamic loss scale from "
          << detail::format_real(s.precision.loss_scale) << " (doubles every "
          << s.precision.loss_scale_growth_steps << " finite steps, halves on overflow)\n";
      break;
  }
  // The memory estimate per rank (activations included) is plan/'s: `validate` prints it
  // after this summary.
  out << "recompute:  activation_checkpointing " << t.activation_checkpointing << "\n";
  out << "checkpoint: "
      << (s.checkpoint.every_steps > 0
              ? "every " + std::to_string(s.checkpoint.every_steps) + " steps, keep " +
                    std::to_string(s.checkpoint.keep_last) + (s.checkpoint.async ? ", async" : "")
              : std::string("off (the final model is exported to run_dir/model.safetensors)"))
      << "\n";
  return out.str();
}

}  // namespace trainctl::config
