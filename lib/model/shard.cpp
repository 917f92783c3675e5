#include "model/shard.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "model/block_factory.h"
#include "model/model_context.h"
#include "model/param_list.h"

namespace trainctl::model {

Shape TensorShard::local_shape() const {
  Shape s = global_shape;
  if (split()) s[static_cast<size_t>(dim)] /= count;
  return s;
}

std::vector<std::pair<int64_t, int64_t>> TensorShard::runs() const {
  if (!split()) {
    const int64_t extent = dim >= 0 ? global_shape[static_cast<size_t>(dim)] : 0;
    return {{0, extent}};
  }
  const int64_t extent = global_shape[static_cast<size_t>(dim)];
  const int64_t block = extent / blocks;
  const int64_t piece = block / count;
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int b = 0; b < blocks; ++b) out.emplace_back(b * block + index * piece, piece);
  return out;
}

int64_t TensorShard::global_index(int64_t local) const {
  if (!split()) return local;
  const Shape local_s = local_shape();
  // Row-major strides: split the flat index into (outer, along dim, inner).
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < local_s.size(); ++d) inner *= local_s[d];
  const int64_t local_extent = local_s[static_cast<size_t>(dim)];
  const int64_t global_extent = global_shape[static_cast<size_t>(dim)];
  const int64_t outer = local / (local_extent * inner);
  const int64_t along = (local / inner) % local_extent;
  const int64_t in = local % inner;
  const int64_t piece = local_extent / blocks;
  const int64_t block_len = global_extent / blocks;
  const int64_t g_along = (along / piece) * block_len + index * piece + along % piece;
  return (outer * global_extent + g_along) * inner + in;
}

double block_cost(const ModelConfig& c, int seq_len) {
  // Multiply-adds per token, as the block of layer 0 counts them (model/block.h).
  ModelContext ctx;
  ctx.config = c;
  ctx.shard = GptShardSpec::whole(c);
  ParamList params(ctx.shard);
  return make_block(ctx, params, 0)->macs_per_token(seq_len);
}

std::vector<double> layer_costs(const ModelConfig& c, int seq_len) {
  ModelContext ctx;
  ctx.config = c;
  ctx.shard = GptShardSpec::whole(c);
  ParamList params(ctx.shard);
  std::vector<double> out;
  for (int l = 0; l < c.n_layer; ++l)
    out.push_back(make_block(ctx, params, l)->macs_per_token(seq_len));
  return out;
}

double head_cost(const ModelConfig& c) { return static_cast<double>(c.vocab_size) * c.d_model; }

namespace {

void check_parts(int n_layer, int parts) {
  if (parts < 1 || parts > n_layer) {
    throw std::invalid_argument("cannot split " + std::to_string(n_layer) +
                                " transformer blocks into " + std::to_string(parts) +
                                " pipeline stages (at most one stage per block)");
  }
}

}  // namespace

std::vector<LayerRange> balance_layers(const std::vector<double>& layer, double first_extra,
                                       double last_extra, int parts) {
  const int L = static_cast<int>(layer.size());
  check_parts(L, parts);
  // Blocks of unequal cost (some layers MoE) by prefix sums; equal ones by multiplication,
  // so a dense model's partition does not depend on rounding.
  const double blk = layer.front();
  const bool uniform = std::all_of(layer.begin(), layer.end(), [&](double c) { return c == blk; });
  std::vector<double> prefix(static_cast<size_t>(L) + 1, 0.0);
  for (int l = 0; l < L; ++l) {
    prefix[static_cast<size_t>(l) + 1] =
        prefix[static_cast<size_t>(l)] + layer[static_cast<size_t>(l)];
  }
  auto cost = [&](int first, int end, bool is_first, bool is_last) {
    const double blocks =
        uniform ? (end - first) * blk
                : prefix[static_cast<size_t>(end)] - prefix[static_cast<size_t>(first)];
    return blocks + (is_first ? first_extra : 0.0) + (is_last ? last_extra : 0.0);
  };
  // best[p][l]: the cheapest maximum over the first p parts covering blocks [0, l).
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(static_cast<size_t>(parts) + 1,
                                        std::vector<double>(static_cast<size_t>(L) + 1, inf));
  std::vector<std::vector<int>> cut(static_cast<size_t>(parts) + 1,
                                    std::vector<int>(static_cast<size_t>(L) + 1, 0));
  best[0][0] = 0.0;
  for (int p = 1; p <= parts; ++p) {
    for (int l = p; l <= L; ++l) {
      for (int k = p - 1; k < l; ++k) {
        const double prev = best[static_cast<size_t>(p) - 1][static_cast<size_t>(k)];
        if (prev == inf) continue;
        const double m = std::max(prev, cost(k, l, p == 1, p == parts && l == L));
        // Strictly better only: equal costs keep the earliest cut, giving later parts
        // (which also hold the head) fewer blocks.
        if (m < best[static_cast<size_t>(p)][static_cast<size_t>(l)]) {
          best[static_cast<size_t>(p)][static_cast<size_t>(l)] = m;
          cut[static_cast<size_t>(p)][static_cast<size_t>(l)] = k;
        }
      }
    }
  }
  std::vector<LayerRange> out(static_cast<size_t>(parts));
  int end = L;
  for (int p = parts; p >= 1; --p) {
    const int begin = cut[static_cast<size_t>(p)][static_cast<size_t>(end)];
    out[static_cast<size_t>(p) - 1] = {begin, end};
    end = begin;
  }
  return out;
}

namespace {

// The ranges of `counts` blocks each, in order; checks them against n_layer and parts.
std::vector<LayerRange> ranges_of_counts(const std::vector<int>& counts, int n_layer, int parts) {
  if (static_cast<int>(counts.size()) != parts) {
    throw std::invalid_argument("parallel.layers_per_stage has " + std::to_string(counts.size()) +
                                " entries; the pipeline has " + std::to_string(parts) +
                                " (virtual) stages");
  }
  std::vector<LayerRange> out;
  int begin = 0;
  for (int n : counts) {
    if (n < 1) throw std::invalid_argument("parallel.layers_per_stage: a stage with no layers");
    out.push_back({begin, begin + n});
    begin += n;
  }
  if (begin != n_layer) {
    throw std::invalid_argument("parallel.layers_per_stage sums to " + std::to_string(begin) +
                                "; model.n_layer is " + std::to_string(n_layer));
  }
  return out;
}

}  // namespace

std::vector<LayerRange> partition_layers(const ModelConfig& config, int seq_len, int parts,
                                         const StageSplit& split) {
  const int L = config.n_layer;
  if (!split.layers.empty()) return ranges_of_counts(split.layers, L, parts);
  check_parts(L, parts);
  if (split.equal) {
    if (L % parts != 0) {
      throw std::invalid_argument("stage_balance: equal needs model.n_layer (" + std::to_string(L) +
                                  ") divisible by the " + std::to_string(parts) + " stages");
    }
    return ranges_of_counts(std::vector<int>(static_cast<size_t>(parts), L / parts), L, parts);
  }
  const double blk = block_cost(config, seq_len);
  // The embedding is a gather (no products) but its backward scatters into wte: count it
  // as a small fixed share of a block so ties go to the later stages.
  return balance_layers(layer_costs(config, seq_len), 0.05 * blk, head_cost(config), parts);
}

GptShardSpec GptShardSpec::whole(const ModelConfig& config) {
  GptShardSpec s;
  s.chunks = {{0, config.n_layer}};
  return s;
}

GptShardSpec GptShardSpec::of(const ModelConfig& config, int seq_len, int pp, int pp_rank,
                              int virtual_stages, int tp, int tp_rank, const StageSplit& split,
                              ChunkOrder order) {
  if (pp < 1 || pp_rank < 0 || pp_rank >= pp || virtual_stages < 1 || tp < 1 || tp_rank < 0 ||
      tp_rank >= tp || (order == ChunkOrder::v_shape && virtual_stages != 2)) {
    throw std::invalid_argument("GptShardSpec::of: invalid layout coordinates");
  }
  const std::vector<LayerRange> parts =
      partition_layers(config, seq_len, pp * virtual_stages, split);
  GptShardSpec s;
  for (int c = 0; c < virtual_stages; ++c)
    s.chunks.push_back(parts[static_cast<size_t>(virtual_stage_of(order, c, pp_rank, pp))]);
  const int last = pp * virtual_stages - 1;
  s.embedding = place_of_virtual_stage(order, 0, pp).rank == pp_rank;
  s.head = place_of_virtual_stage(order, last, pp).rank == pp_rank;
  s.tp_rank = tp_rank;
  s.tp_size = tp;
  return s;
}

int virtual_stage_of(ChunkOrder order, int chunk, int rank, int pp) {
  if (order == ChunkOrder::v_shape && chunk == 1) return 2 * pp - 1 - rank;
  return chunk * pp + rank;
}

ChunkPlace place_of_virtual_stage(ChunkOrder order, int virtual_stage, int pp) {
  if (order == ChunkOrder::v_shape && virtual_stage >= pp) return {2 * pp - 1 - virtual_stage, 1};
  return {virtual_stage % pp, virtual_stage / pp};
}

void check_tp_divisible(const ModelConfig& config, int tp) {
  auto need = [&](int value, const char* what) {
    if (value % tp != 0) {
      throw std::invalid_argument(std::string(what) + " (" + std::to_string(value) +
                                  ") must be divisible by parallel.tp (" + std::to_string(tp) +
                                  ")");
    }
  };
  need(config.n_head, "model.n_head");
  need(config.vocab_size, "model.vocab_size");
  if (config.llama()) {
    need(config.kv_heads(), "model.n_kv_head");
    need(config.mlp_hidden(), "model.ffn_hidden");
  }
}

}  // namespace trainctl::model
