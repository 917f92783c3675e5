#include "plan/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "comm/rank_coords.h"
#include "model/gpt.h"
#include "parallel/mixed_params.h"
#include "parallel/pipeline_executor.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/shard_layout.h"
#include "parallel/zero3_params.h"
#include "plan/model_of_spec.h"
#include "util/error.h"

namespace trainctl::plan {

namespace {

constexpr double kFloat = sizeof(float);
constexpr double kMiB = 1 << 20;

// The mixed-precision model state (parallel/mixed_params.h): 16-bit compute without ZeRO-3
// (validate refuses the two together at dp > 1).
bool uses_mixed_state(const config::JobSpec& spec) {
  const int dp_cp = spec.parallel.dp * spec.parallel.cp;
  return spec.precision.compute != DType::fp32 && !(dp_cp > 1 && spec.parallel.zero == 3);
}

// Parameters, gradients, master weights, optimizer state and ZeRO's communication buffers
// of a model shard of `param_floats` floats, as DataParallel allocates them.
void add_model_state(MemoryBreakdown& b, const config::JobSpec& spec,
                     const model::ModelConfig& config, const model::GptOptions& options,
                     int64_t param_floats) {
  const config::ParallelSpec& par = spec.parallel;
  const auto params = static_cast<double>(param_floats);
  b.parameters = params * kFloat;
  b.gradients = params * kFloat;
  // ZeRO shards over the ranks holding the same parameters: the gradient group dp x cp, or
  // its 1/ep (expert-DP: dp / ep x cp ranks) with experts split over ep ranks.
  const int dp_cp = par.dp * par.cp;
  const int zero = dp_cp > 1 ? par.zero : 0;  // as data_parallel_options
  const parallel::ShardLayout shard = parallel::make_shard_layout(param_floats, dp_cp / par.ep);
  const auto shard_floats = static_cast<double>(shard.shard_size);
  if (spec.optimizer.type == "adamw") {
    b.optimizer = 2 * (zero >= 1 ? shard_floats : params) * kFloat;
  } else {
    b.optimizer = params * kFloat;  // SGD's momentum buffer
  }
  if (zero >= 2) b.gradients += shard_floats * kFloat;
  if (zero >= 1) {
    b.communication += shard_floats * kFloat;  // allgather input
    if (shard.padded()) b.communication += static_cast<double>(shard.padded_total()) * kFloat;
  }
  if (uses_mixed_state(spec)) {
    // parallel/mixed_params.h: 16-bit weights (padded like the master's shards), fp32
    // gradients, the fp32 master (its shard under ZeRO), whose owner allgathers the 16-bit
    // shard instead of ZeRO's fp32 allgather buffers; the fp32 buffers units are widened into
    // around their use are workspace.
    const parallel::MixedParamsBytes m = parallel::mixed_params_bytes(
        model::gpt_param_specs(config, options.shard), dp_cp / par.ep, zero >= 1);
    b.parameters = static_cast<double>(m.weights);
    b.master = static_cast<double>(m.master);
    b.communication = static_cast<double>(m.staging);
  }
  if (zero == 3) {
    // parallel/zero3_params.h: shards of every unit (blocks, embedding and head alike), two
    // gather and two gradient buffers of the largest unit (with their reduced shards).
    const parallel::Zero3MemoryFloats z = parallel::zero3_memory_floats(
        parallel::zero3_units(model::gpt_param_specs(config, options.shard), dp_cp));
    b.parameters = static_cast<double>(z.shard) * kFloat;
    b.gradients = b.parameters;
    b.optimizer = 2 * static_cast<double>(z.shard) * kFloat;
    b.communication = static_cast<double>(z.transient) * kFloat;
  }
}

// What the engine builds for pipeline stage `stage`, as Engine and its parts allocate it
// (train/engine.cpp, train/spec_options.cpp).
// `staging`: the executor's staging pools (parallel/boundary_staging.h), the same on every
// stage.
MemoryBreakdown plan_stage(const config::JobSpec& spec, int stage, int staging) {
  const config::ParallelSpec& par = spec.parallel;
  const model::ModelConfig config = model_config_of(spec.model);
  std::vector<parallel::Instruction> program;
  if (par.pp > 1) {
    program = parallel::make_schedule(parallel::parse_schedule_kind(par.schedule), stage, par.pp,
                                      spec.grad_accum(), par.virtual_stages);
  }
  model::GptOptions options;
  options.shard = model::GptShardSpec::of(
      config, spec.model.seq_len, par.pp, stage, par.virtual_stages, par.tp, 0, stage_split_of(par),
      parallel::chunk_order(parallel::parse_schedule_kind(par.schedule)));
  options.shard.ep_size = par.ep;  // each rank's 1/ep of the routed experts and their rows
  options.slots = program.empty() ? 1 : parallel::activation_slots_needed(program);
  if (!program.empty()) {
    options.chunk_slots = parallel::activation_slots_per_chunk(program, par.virtual_stages);
  }
  options.recompute = model::parse_recompute(spec.training.activation_checkpointing);
  // Context parallelism: every rank runs seq_len / cp tokens of each sequence, plus the
  // ring's K/V blocks (model/ring_attention.h, counted as workspace).
  options.cp = model::ContextChunks::of(par.cp, 0, spec.model.seq_len);
  options.sequence_parallel = par.sequence_parallel;
  options.kept_activations = spec.precision.compute;
  model::GptMemoryFloats g;
  try {
    g = model::gpt_memory_floats(config, options, spec.training.micro_batch_size,
                                 spec.model.seq_len / par.cp);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }

  MemoryBreakdown b;
  b.stage = stage;
  b.activation_slots = options.slots;
  add_model_state(b, spec, config, options, g.params);
  // Gpt::boundary_floats: this rank's seq_len / cp tokens, 1/tp of them under sequence
  // parallelism.
  const double boundary = static_cast<double>(spec.training.micro_batch_size) *
                          (spec.model.seq_len / par.cp) * spec.model.d_model /
                          (par.sequence_parallel ? par.tp : 1);
  // The executor's two staging pools: outgoing gradients in fp32, outgoing activations in
  // the kept type (Gpt::boundary_bytes).
  b.communication += staging * boundary * (kFloat + dtype_size(spec.precision.compute));
  b.activations = static_cast<double>(g.activations + g.recompute) * kFloat;
  // Zero-bubble schedules: what each B keeps for its W (model/deferred_weight_grads.h).
  // Each rank runs seq_len / cp tokens of a sequence.
  const int64_t tokens = int64_t{spec.training.micro_batch_size} * (spec.model.seq_len / par.cp);
  const bool inputs_in_slot =
      model::deferred_inputs_in_slot(options.recompute, par.sequence_parallel && par.tp > 1,
                                     options.cp.active(), options.kept_activations);
  b.activations += parallel::weight_grads_held(program) *
                   static_cast<double>(model::deferred_weight_floats(config, options.shard, tokens,
                                                                     inputs_in_slot)) *
                   kFloat;
  b.workspace = static_cast<double>(g.workspace) * kFloat;
  if (uses_mixed_state(spec)) {
    b.workspace += static_cast<double>(
        parallel::mixed_params_bytes(model::gpt_param_specs(config, options.shard), 1, false)
            .widened);
  }
  if (config.moe.enabled()) {
    b.experts_per_layer = config.moe.num_experts / par.ep;
    for (const model::ParamSpec& p : model::gpt_param_specs(config, options.shard)) {
      if (p.expert)
        b.expert_parameters += static_cast<double>(numel_of(p.shard.local_shape())) * kFloat;
    }
  }
  return b;
}

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", bytes / kMiB);
  return text;
}

// "0-3" or "0, 4" for the world ranks of a stage.
std::string ranks_of_stage(const Layout& layout, int stage) {
  std::vector<int> ranks;
  for (int dp = 0; dp < layout.dp; ++dp) {
    for (int cp = 0; cp < layout.cp; ++cp) {
      for (int tp = 0; tp < layout.tp; ++tp) {
        ranks.push_back(comm::rank_of(layout, {dp, tp, stage, cp}));
      }
    }
  }
  std::sort(ranks.begin(), ranks.end());
  if (ranks.size() > 1 && ranks.back() - ranks.front() + 1 == static_cast<int>(ranks.size())) {
    return std::to_string(ranks.front()) + "-" + std::to_string(ranks.back());
  }
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

}  // namespace

std::vector<MemoryBreakdown> plan_memory(const config::JobSpec& spec) {
  std::vector<MemoryBreakdown> plan;
  const config::ParallelSpec& par = spec.parallel;
  int staging = 0;
  try {
    staging = parallel::boundary_staging_pool(parallel::parse_schedule_kind(par.schedule), par.pp,
                                              spec.grad_accum(), par.virtual_stages);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  for (int stage = 0; stage < par.pp; ++stage) plan.push_back(plan_stage(spec, stage, staging));
  return plan;
}

double peak_rank_bytes(const std::vector<MemoryBreakdown>& plan) {
  double peak = 0;
  for (const MemoryBreakdown& b : plan) peak = std::max(peak, b.total());
  return peak;
}

std::string format_memory_plan(const config::JobSpec& spec,
                               const std::vector<MemoryBreakdown>& plan) {
  // Every 16-bit job keeps fp32 master weights (parallel/mixed_params.h): show the column.
  const bool master_column = spec.precision.compute != DType::fp32;
  // The model's own count (model/model_config.h): with MoE, one token uses only its experts.
  const model::ModelConfig config = model_config_of(spec.model);
  std::string out = "parameters: " + std::to_string(config.num_params()) + " total, " +
                    std::to_string(config.active_params()) + " active per token\n";
  out += std::string("memory per rank (MiB; ") +
         (master_column ? std::string(dtype_name(spec.precision.compute)) +
                              " mixed precision: 16-bit weights and kept activations, fp32 "
                              "gradients, master weights and optimizer state; "
                        : std::string()) +
         "tensor memory, as mem_peak_mb in metrics.jsonl" +
         "; activation checkpointing: " + spec.training.activation_checkpointing + "):\n";
  // Columns: ranks, stage, then the parts; `master` only where the layout has one.
  auto row = [&](const std::vector<std::string>& cells) {
    char cell[64];
    std::string line = "  ";
    for (size_t i = 0; i < cells.size(); ++i) {
      if (!master_column && i == 4) continue;  // the master column
      const int width = i == 0 ? -8 : i == 1 ? -6 : i == 6 ? 15 : 10;
      std::snprintf(cell, sizeof cell, "%*s ", width, cells[i].c_str());
      line += cell;
    }
    line.pop_back();
    return line + "\n";
  };
  out += row({"ranks", "stage", "params", "grads", "master", "optimizer", "activations", "comm",
              "workspace", "total"});
  for (const MemoryBreakdown& b : plan) {
    out += row({ranks_of_stage(spec.parallel, b.stage), std::to_string(b.stage), mib(b.parameters),
                mib(b.gradients), mib(b.master), mib(b.optimizer),
                mib(b.activations) + " (" + std::to_string(b.activation_slots) + " mb)",
                mib(b.communication), mib(b.workspace), mib(b.total())});
  }
  if (config.moe.enabled()) {
    // Expert memory per rank: with parallel.ep each rank holds 1/ep of the routed experts.
    out += "experts per rank (ep " + std::to_string(spec.parallel.ep) + ", " +
           std::to_string(config.moe.num_experts) + " routed experts per MoE layer):\n";
    // ZeRO shards AdamW's state over the expert-DP group (dp x cp / ep ranks holding the
    // same experts): its share of the experts' moments, as for the dense part.
    const auto& par = spec.parallel;
    const int edp = par.dp * par.cp / par.ep;
    const bool sharded = spec.optimizer.type == "adamw" && par.zero >= 1 && par.dp * par.cp > 1;
    for (const MemoryBreakdown& b : plan) {
      const double state = spec.optimizer.type == "adamw" ? 2.0 / (sharded ? edp : 1) : 1;
      out += "  stage " + std::to_string(b.stage) + ": " + std::to_string(b.experts_per_layer) +
             " experts per MoE layer, " + mib(b.expert_parameters) + " MiB weights + " +
             mib(b.expert_parameters) + " grads + " + mib(state * b.expert_parameters) +
             " optimizer = " + mib((2 + state) * b.expert_parameters) + " MiB\n";
    }
  }
  return out;
}

std::string memory_plan_json(const config::JobSpec& spec,
                             const std::vector<MemoryBreakdown>& plan) {
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (int rank = 0; rank < spec.parallel.world_size(); ++rank) {
    const MemoryBreakdown& b = plan.at(static_cast<size_t>(comm::coord_of(spec.parallel, rank).pp));
    nlohmann::ordered_json j;
    j["rank"] = rank;
    j["stage"] = b.stage;
    j["activation_slots"] = b.activation_slots;
    j["parameters"] = b.parameters / kMiB;
    j["gradients"] = b.gradients / kMiB;
    j["master_weights"] = b.master / kMiB;
    j["optimizer"] = b.optimizer / kMiB;
    j["activations"] = b.activations / kMiB;
    j["communication"] = b.communication / kMiB;
    j["workspace"] = b.workspace / kMiB;
    j["expert_parameters"] = b.expert_parameters / kMiB;
    j["total"] = b.total() / kMiB;
    ranks.push_back(std::move(j));
  }
  return ranks.dump();
}

std::vector<FitOption> fit_options(const config::JobSpec& spec, double limit_bytes) {
  std::vector<FitOption> options;
  auto consider = [&](const std::string& change, const config::JobSpec& changed) {
    try {
      const double peak = peak_rank_bytes(plan_memory(changed));
      if (peak < peak_rank_bytes(plan_memory(spec))) options.push_back({change, peak});
    } catch (const std::exception&) {
      // A change the model cannot take (layers or heads do not split): not an option.
    }
  };
  for (const char* mode : {"selective", "full"}) {
    if (spec.training.activation_checkpointing == mode) continue;
    config::JobSpec s = spec;
    s.training.activation_checkpointing = mode;
    consider(std::string("training.activation_checkpointing: ") + mode, s);
  }
  if (spec.parallel.dp * spec.parallel.cp > 1 && spec.optimizer.type == "adamw") {
    const int most = spec.device == Device::cuda ? 2 : 3;  // ZeRO-3 runs on the CPU only
    for (int zero = spec.parallel.zero + 1; zero <= most; ++zero) {
      config::JobSpec s = spec;
      s.parallel.zero = zero;
      consider("parallel.zero: " + std::to_string(zero), s);
    }
  }
  {
    config::JobSpec s = spec;  // the model must split over twice the ranks (consider checks)
    s.parallel.tp *= 2;
    consider("parallel.tp: " + std::to_string(s.parallel.tp) + " (" +
                 std::to_string(s.world_size()) + " workers)",
             s);
  }
  if (spec.parallel.pp * 2 <= spec.model.n_layer) {
    config::JobSpec s = spec;
    s.parallel.pp *= 2;
    consider("parallel.pp: " + std::to_string(s.parallel.pp) + " (" +
                 std::to_string(s.world_size()) + " workers)",
             s);
  }
  // Context parallelism splits each sequence: activations fall by about 1 / cp. Offered
  // where validate would take it (config/validate_context_parallel.cpp).
  if (spec.device == Device::cpu && !spec.model.moe.enabled() &&
      spec.parallel.mode == "data_parallel" && spec.parallel.dp_sync == "allreduce" &&
      spec.parallel.grad_compression != "powersgd" &&
      spec.model.seq_len % (4 * spec.parallel.cp) == 0) {
    config::JobSpec s = spec;
    s.parallel.cp *= 2;
    consider("parallel.cp: " + std::to_string(s.parallel.cp) + " (" +
                 std::to_string(s.world_size()) + " workers)",
             s);
  }
  if (spec.training.micro_batch_size > 1) {
    config::JobSpec s = spec;
    s.training.micro_batch_size = spec.training.micro_batch_size / 2;
    if (s.training.global_batch_size % (s.training.micro_batch_size * s.parallel.dp) == 0) {
      consider("training.micro_batch_size: " + std::to_string(s.training.micro_batch_size) +
                   " (more accumulation, same global batch)",
               s);
    }
  }
  std::stable_sort(options.begin(), options.end(), [&](const FitOption& a, const FitOption& b) {
    const bool fa = a.peak_bytes <= limit_bytes, fb = b.peak_bytes <= limit_bytes;
    if (fa != fb) return fa;
    // Among those that fit, the gentlest change (least saving) first; else the biggest saving.
    return fa ? a.peak_bytes > b.peak_bytes : a.peak_bytes < b.peak_bytes;
  });
  return options;
}

}  // namespace trainctl::plan
