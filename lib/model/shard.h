#pragma once
// Which part of the full GPT one rank holds, as pure functions of the layout: the layers of
// its pipeline stage(s) and its tensor-parallel slice of every parameter. The same
// descriptions drive parameter initialisation (a shard's values equal the matching slice of
// the unsharded model), the final export (shards reassembled into nanoGPT tensors) and
// checkpoints (each tensor stored with its global shape and the slices a rank holds).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "tensor/tensor.h"

namespace trainctl::model {

// How a rank's tensor maps into the global tensor. The split dimension `dim` is made of
// `blocks` equal blocks (c_attn's rows are q | k | v: 3 blocks); each block is cut into
// `count` equal pieces and this rank holds piece `index` of every block, in block order.
// dim == -1: the whole tensor (replicated over the `count` ranks of the TP group).
struct TensorShard {
  Shape global_shape;
  int dim = -1;
  int blocks = 1;
  int index = 0;
  int count = 1;

  bool split() const { return dim >= 0 && count > 1; }
  Shape local_shape() const;
  // The contiguous runs of the split dimension this shard holds, as (global start, length),
  // in local order. One run covering the whole dimension when not split.
  std::vector<std::pair<int64_t, int64_t>> runs() const;
  // Global flat (row-major) index of local flat element `local`.
  int64_t global_index(int64_t local) const;
};

enum class Init {
  zeros,
  ones,
  normal,  // N(0, std)
};

// One parameter of a rank's shard of the model.
struct ParamSpec {
  std::string name;  // nanoGPT name, e.g. "transformer.h.3.mlp.c_fc.weight"
  TensorShard shard;
  Init init = Init::zeros;
  float init_std = 0.0f;
  bool weight_decay = false;
  // The LM head's copy of the tied token embedding on the last pipeline stage (pp > 1): its
  // gradient is added to the first stage's and vice versa; it is not counted again in the
  // gradient norm nor exported.
  bool tied_copy = false;
  // A routed expert's tensor (model/moe/grouped_experts.h): with expert parallelism only the
  // DP ranks of one ep rank hold it, so its gradient is summed over the expert-data-parallel
  // group and one of those ranks writes it to checkpoints.
  bool expert = false;
};

// Blocks [begin, end) of the transformer, run as one unit of a pipeline.
struct LayerRange {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
  bool operator==(const LayerRange&) const = default;
};

// How the blocks are divided among the pipeline's (virtual) stages: parallel.stage_balance
// and parallel.layers_per_stage of the job spec.
struct StageSplit {
  // stage_balance: equal: n_layer / parts blocks each (n_layer must be divisible by parts).
  // false (stage_balance: auto): balanced by cost, as partition_layers below.
  bool equal = false;
  // layers_per_stage: the blocks of each part, in pipeline (virtual stage) order; when not
  // empty it overrides `equal`. Must have `parts` entries, each >= 1, summing to n_layer.
  std::vector<int> layers;
  bool operator==(const StageSplit&) const = default;
};

// Splits n_layer blocks into `parts` contiguous ranges (pipeline stages, in order). By
// default (`split` auto) so the most expensive part is as cheap as possible, counting the
// embedding with the first part and the final norm + LM head + loss with the last (its cost
// grows with vocab / d_model); each block counts its own cost (layer_costs). Every part
// gets at least one block. `split` can ask for equal parts or give the counts. Throws
// std::invalid_argument unless 1 <= parts <= n_layer and the split fits (counts: `parts`
// entries >= 1 summing to n_layer; equal: n_layer divisible by parts).
std::vector<LayerRange> partition_layers(const ModelConfig& config, int seq_len, int parts,
                                         const StageSplit& split = {});

// The cost-balanced split of blocks of costs `layer` into `parts` contiguous ranges, with
// `first_extra` added to the first part and `last_extra` to the last (minimising the
// largest part; ties keep the earliest cut): the mechanism of partition_layers, for any
// per-layer cost.
std::vector<LayerRange> balance_layers(const std::vector<double>& layer, double first_extra,
                                       double last_extra, int parts);

// Relative forward cost of one block and of the LM head per token (the unit of the
// partition above; also shown by `trainctl plan`): multiply-adds, the block's as it counts
// them (Block::macs_per_token); the head's vocab × d_model products (its fused kernel also
// computes the cross-entropy, whose few operations per logit this leaves out).
double block_cost(const ModelConfig& config, int seq_len);
double head_cost(const ModelConfig& config);
// Each layer's block cost (layers differ when only some are mixture-of-experts layers).
std::vector<double> layer_costs(const ModelConfig& config, int seq_len);

// How a rank's chunks map to virtual stages (pipeline positions 0 .. pp * V - 1).
enum class ChunkOrder {
  looped,   // chunk c of rank r is virtual stage c * pp + r (gpipe, 1f1b, interleaved, zb1p)
  v_shape,  // V == 2 (zbv): rank r holds virtual stages r and 2 * pp - 1 - r, so rank 0
            // holds both the embedding and the LM head and rank pp - 1 both middle stages
};

// What one rank holds.
struct GptShardSpec {
  // Model chunks this rank runs, in pipeline order (one for gpipe/1f1b; `virtual_stages` for
  // the interleaved schedule). Each is a contiguous range of blocks.
  std::vector<LayerRange> chunks;
  bool embedding = true;  // holds wte + wpe (the first pipeline stage)
  bool head = true;       // holds ln_f and the LM head (the last pipeline stage)
  int tp_rank = 0;
  int tp_size = 1;
  // Expert parallelism (parallel.ep): this rank holds routed experts
  // [ep_rank * E / ep_size, (ep_rank + 1) * E / ep_size) of every MoE layer.
  int ep_rank = 0;
  int ep_size = 1;

  // The whole model on one rank.
  static GptShardSpec whole(const ModelConfig& config);
  // Rank (pp_rank, tp_rank) of a pp × tp layout; chunk c of pipeline rank r is virtual
  // stage virtual_stage_of(order, c, r, pp) of partition_layers(config, seq_len,
  // pp * virtual_stages, split). v_shape needs virtual_stages == 2.
  static GptShardSpec of(const ModelConfig& config, int seq_len, int pp, int pp_rank,
                         int virtual_stages, int tp, int tp_rank, const StageSplit& split = {},
                         ChunkOrder order = ChunkOrder::looped);
  // The tied LM head needs its own copy of wte (a stage without the embedding).
  bool tied_copy() const { return head && !embedding; }
};

// The virtual stage of chunk `chunk` on pipeline rank `rank` of `pp`.
int virtual_stage_of(ChunkOrder order, int chunk, int rank, int pp);
// The pipeline rank holding virtual stage `virtual_stage`, and the chunk it is there.
struct ChunkPlace {
  int rank;
  int chunk;
};
ChunkPlace place_of_virtual_stage(ChunkOrder order, int virtual_stage, int pp);

// Throws InputError-style std::invalid_argument naming what to change when the model
// cannot be split this way (heads, k/v heads, the MLP width or vocab not divisible by tp).
void check_tp_divisible(const ModelConfig& config, int tp);

// The parameters of `shard`, in flat-buffer order: wte, wpe (embedding), then each
// chunk's blocks in order, then ln_f and (if tied_copy) wte's copy. Each part of the model
// declares its own (model/model_parts.h, which defines this). Llama: Hugging Face's
// names (model.embed_tokens, model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
// post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head when untied).
std::vector<ParamSpec> gpt_param_specs(const ModelConfig& config, const GptShardSpec& shard);

}  // namespace trainctl::model
