#include "plan/activation_model.h"

#include "util/error.h"

namespace trainctl::plan {

namespace {

// Which recomputation drops a tensor.
enum class Role {
  input,      // the layer's input: kept by every mode
  kept,       // dropped by full only
  pointwise,  // dropped by full and by trainctl's selective
  core,       // dropped by full and by Megatron's selective (the attention core)
};

bool is_kept(const LayerShape& s, KeptSet kept, Role role) {
  switch (kept) {
    case KeptSet::none:
      return true;
    case KeptSet::full:
      return role == Role::input;
    case KeptSet::selective:
      return s.megatron_selective ? role != Role::core : role != Role::pointwise;
  }
  return true;
}

}  // namespace

LayerShape megatron_2022_layer(double seq, double micro_batch, double hidden, double heads, int tp,
                               bool sequence_parallel) {
  LayerShape s;
  s.seq = seq;
  s.micro_batch = micro_batch;
  s.hidden = hidden;
  s.heads = heads;
  s.ffn = 4 * hidden;
  s.dropout = true;
  s.stores_scores = true;
  s.megatron_selective = true;
  s.activation_bytes = 2;
  s.tp = tp;
  s.sequence_parallel = sequence_parallel;
  return s;
}

double layer_activation_bytes(const LayerShape& s, KeptSet kept) {
  const double b = s.activation_bytes;
  const double tokens = s.seq * s.micro_batch / s.cp;  // this rank's (s·b)
  const double h = s.hidden;
  const double kv = s.kv_hidden > 0 ? s.kv_hidden : h;
  double replicated = 0, gathered = 0, split = 0;
  auto add = [&](double& part, Role role, double bytes) {
    if (is_kept(s, kept, role)) part += bytes;
  };
  // Outside attention and MLP: the same on every TP rank unless sequence parallelism
  // shards it.
  add(replicated, Role::input, b * tokens * h);      // first norm's input
  add(gathered, Role::pointwise, b * tokens * h);    // its output: q/k/v projections' input
  add(replicated, Role::pointwise, b * tokens * h);  // post-attention residual: 2nd norm's in
  add(gathered, Role::pointwise, b * tokens * h);    // its output: the MLP's input
  if (s.dropout) {
    add(replicated, Role::kept, 2 * tokens * h);  // 1-byte masks after attention and MLP
  }
  // Attention, split over TP by heads.
  add(split, Role::kept, b * tokens * (h + 2 * kv));  // q, k, v
  if (s.stores_scores) {
    const double scores = s.heads * s.seq * tokens;           // heads x this rank's queries x keys
    add(split, Role::core, b * scores);                       // softmax output
    if (s.dropout) add(split, Role::core, (1 + b) * scores);  // its dropout mask and output
  } else {
    add(split, Role::kept, 4.0 * s.heads * tokens);  // fp32 log-sum-exp per query and head
  }
  add(split, Role::kept, b * tokens * h);  // attention output: the output projection's input
  // MLP, split over TP by its width.
  add(split, Role::kept, (s.gated_mlp ? 2 : 1) * b * tokens * s.ffn);  // pre-activation(s)
  add(split, Role::pointwise, b * tokens * s.ffn);  // GELU output / SwiGLU product: down's in
  const double sp = s.sequence_parallel ? s.tp : 1;
  return replicated / sp + gathered / (s.sp_keeps_gathered ? 1 : sp) + split / s.tp;
}

KeptSet parse_kept_set(const std::string& name) {
  if (name == "none") return KeptSet::none;
  if (name == "selective") return KeptSet::selective;
  if (name == "full") return KeptSet::full;
  throw InputError("training.activation_checkpointing: expected none, selective or full; got '" +
                   name + "'");
}

}  // namespace trainctl::plan
