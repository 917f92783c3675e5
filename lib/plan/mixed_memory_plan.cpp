#include "plan/mixed_memory_plan.h"

#include <algorithm>
#include <stdexcept>

#include "model/gpt.h"
#include "parallel/shard_layout.h"
#include "plan/activation_model.h"
#include "plan/model_of_spec.h"
#include "util/error.h"

namespace trainctl::plan {

namespace {

constexpr double kFp32 = 4;

// Parameters this rank holds: the TP shard of its stage's chunks (and embedding / head).
double rank_parameters(const model::ModelConfig& config, const model::GptShardSpec& shard) {
  double n = 0;
  for (const model::ParamSpec& p : model::gpt_param_specs(config, shard)) {
    n += static_cast<double>(numel_of(p.shard.local_shape()));
  }
  return n;
}

LayerShape layer_shape_of(const config::JobSpec& spec, double activation_bytes) {
  const config::ModelSpec& m = spec.model;
  LayerShape s;
  s.seq = m.seq_len;
  s.micro_batch = spec.training.micro_batch_size;
  s.hidden = m.d_model;
  s.heads = m.n_head;
  s.kv_hidden = static_cast<double>(m.kv_heads()) * (m.d_model / m.n_head);
  s.ffn = m.mlp_hidden();
  s.gated_mlp = m.is_llama();
  s.activation_bytes = activation_bytes;
  s.tp = spec.parallel.tp;
  s.sequence_parallel = spec.parallel.sequence_parallel;
  s.sp_keeps_gathered = true;  // model/norm.h: the norms' outputs are kept all-gathered
  // Context parallelism: no job-spec key yet; when it exists, set s.cp here (the activation
  // model already divides by it).
  return s;
}

}  // namespace

bool uses_mixed_layout(const config::JobSpec& spec) {
  return spec.device == Device::cuda && spec.precision.compute != DType::fp32;
}

void check_memory_layout(const config::JobSpec& spec) {
  if (uses_mixed_layout(spec) && spec.optimizer.type != "adamw") {
    throw InputError(
        spec.where("optimizer.type") + ": optimizer.type: " + spec.optimizer.type +
        " with precision.compute: " + dtype_name(spec.precision.compute) +
        " on device: cuda has no memory layout: the mixed-precision layout keeps 16-bit "
        "weights with fp32 master weights next to AdamW's moments, and trainctl does not "
        "silently keep another optimizer in fp32. Use optimizer.type: adamw, or "
        "precision.compute: fp32.");
  }
}

MixedLayoutBytes mixed_layout_bytes(DType /*compute*/) {
  // bf16 and fp16 alike: the trainer keeps fp32 gradients for both (parallel/mixed_params.h).
  return {};
}

double peak_in_flight_bytes(const std::vector<parallel::Instruction>& program,
                            const std::vector<double>& chunk_bytes, int* peak_pairs) {
  if (program.empty()) {
    if (peak_pairs) *peak_pairs = 1;
    return chunk_bytes.at(0);
  }
  double held = 0, peak = 0;
  int pairs = 0, most = 0;
  for (const parallel::Instruction& op : program) {
    if (op.kind == parallel::OpKind::forward) {
      held += chunk_bytes.at(static_cast<size_t>(op.chunk));
      ++pairs;
      if (held > peak) {
        peak = held;
        most = pairs;
      }
    } else if (parallel::ends_micro_batch(op.kind)) {
      held -= chunk_bytes.at(static_cast<size_t>(op.chunk));
      --pairs;
    }
  }
  if (peak_pairs) *peak_pairs = most;
  return peak;
}

MemoryBreakdown plan_mixed_stage(const config::JobSpec& spec, int stage) {
  const config::ParallelSpec& par = spec.parallel;
  const model::ModelConfig config = model_config_of(spec.model);
  std::vector<parallel::Instruction> program;
  if (par.pp > 1) {
    program = parallel::make_schedule(parallel::parse_schedule_kind(par.schedule), stage, par.pp,
                                      spec.grad_accum(), par.virtual_stages);
  }
  model::GptShardSpec shard;
  double params = 0;
  try {
    model::check_tp_divisible(config, par.tp);
    shard = model::GptShardSpec::of(
        config, spec.model.seq_len, par.pp, stage, par.virtual_stages, par.tp, 0,
        stage_split_of(par), parallel::chunk_order(parallel::parse_schedule_kind(par.schedule)));
    params = rank_parameters(config, shard);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  const MixedLayoutBytes bytes = mixed_layout_bytes(spec.precision.compute);
  const double act = 2;  // bf16 / fp16 activations
  MemoryBreakdown b;
  b.stage = stage;

  // Weights, gradients and optimizer state; the distributed optimizer shards the fp32 part.
  const int zero = par.dp > 1 ? par.zero : 0;
  const parallel::ShardLayout layout =
      parallel::make_shard_layout(static_cast<int64_t>(params), par.dp);
  const double owned = zero >= 1 ? static_cast<double>(layout.shard_size) : params;
  b.parameters = params * bytes.param;
  b.gradients = params * bytes.grad;
  if (zero >= 2) b.gradients += owned * bytes.grad;  // ZeRO-2's reduce-scatter output
  b.master = owned * bytes.master;
  b.optimizer = owned * bytes.moments;
  if (zero >= 1) {
    b.communication += owned * bytes.param;  // all-gather input: the updated 16-bit shard
    if (layout.padded())
      b.communication += static_cast<double>(layout.padded_total()) * bytes.param;
  }

  // Activations: each chunk's layers, times what the schedule holds of each chunk.
  const LayerShape shape = layer_shape_of(spec, act);
  const KeptSet kept = parse_kept_set(spec.training.activation_checkpointing);
  const double per_layer = layer_activation_bytes(shape, kept);
  const double tokens = shape.seq * shape.micro_batch / shape.cp;
  const double hidden_row = act * tokens * shape.hidden;  // one [s·b, h] tensor
  // Sequence parallelism: the residual stream between layers and stages holds 1/tp of it.
  const double stream_row = hidden_row / (shape.sequence_parallel ? shape.tp : 1);
  std::vector<double> chunk_bytes;
  for (const model::LayerRange& r : shard.chunks) chunk_bytes.push_back(r.size() * per_layer);
  if (shard.head) chunk_bytes.back() += stream_row + hidden_row;  // final norm's in and out
  int pairs = 1;
  b.activations = peak_in_flight_bytes(program, chunk_bytes, &pairs);
  b.activation_slots = pairs;
  if (kept != KeptSet::none) {  // one layer's recomputed tensors during its backward
    b.activations += layer_activation_bytes(shape, KeptSet::none) - per_layer;
  }

  // Pipeline point-to-point buffers: an activation and a gradient received, an activation
  // and a gradient sent, in flight at once (Megatron waits for a send before the next).
  // The CPU executor instead keeps one staging buffer per gradient sent in a step
  // (parallel::grad_staging_buffers: 2 x 32 for Llama 3 405B's interleaved stage, 16 GB);
  // the GPU layout needs it bounded like this.
  if (par.pp > 1) b.communication += 4 * stream_row;

  // Workspace: the loss's logits, and the gradients of one layer's widest tensors.
  const double mlp_in = (shape.gated_mlp ? 2 : 1) * shape.ffn;
  b.workspace = act * tokens * (mlp_in + shape.hidden) / shape.tp;
  // Sequence parallelism: one all-gathered [s·b, h] (d(branch output)) and a row scratch.
  if (shape.sequence_parallel) b.workspace += hidden_row + stream_row;
  if (shard.head) {
    b.workspace += (act + kFp32) * tokens * spec.model.vocab_size / shape.tp;
  }
  return b;
}

}  // namespace trainctl::plan
