#include "stage_layers_text.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "model/shard.h"
#include "parallel/pipeline_schedule.h"
#include "plan/model_of_spec.h"
#include "plan/pipeline_timeline.h"
#include "train/spec_options.h"
#include "util/error.h"

namespace trainctl::app {
namespace {

std::string fixed2(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

// "blocks 4-7 (4)", "block 3".
std::string block_range(const model::LayerRange& r) {
  if (r.size() == 1) return "block " + std::to_string(r.begin);
  return "blocks " + std::to_string(r.begin) + "-" + std::to_string(r.end - 1) + " (" +
         std::to_string(r.size()) + ")";
}

}  // namespace

// The transformer blocks of each pipeline stage (and of each of its chunks for the
// interleaved schedule), where the embedding and the LM head live, and each stage's forward
// cost in units of one block (what the partition balances).
std::string stage_layers_text(const config::JobSpec& spec) {
  const model::ModelConfig config = train::gpt_config(spec);
  const int pp = spec.parallel.pp;
  const int chunks = spec.parallel.virtual_stages;
  const double block = model::block_cost(config, spec.model.seq_len);
  const double head = model::head_cost(config) / block;
  const std::vector<double> layer = model::layer_costs(config, spec.model.seq_len);
  const config::ParallelSpec& par = spec.parallel;
  std::string out = "layers (" + std::to_string(config.n_layer) + " blocks, " + std::to_string(pp) +
                    (pp == 1 ? " stage" : " stages");
  const model::ChunkOrder order =
      parallel::chunk_order(parallel::parse_schedule_kind(par.schedule));
  if (order == model::ChunkOrder::v_shape) {
    out += " x 2 chunks in V order: chunk a of stage s is virtual stage s, chunk b virtual stage " +
           std::to_string(2 * pp - 1) + " - s";
  } else if (chunks > 1) {
    out += " x " + std::to_string(chunks) + " chunks: chunk c of stage s is virtual stage c*" +
           std::to_string(pp) + " + s";
  }
  out += "):\n";
  std::vector<double> costs;
  for (int s = 0; s < pp; ++s) {
    model::GptShardSpec shard;
    try {
      shard = model::GptShardSpec::of(config, spec.model.seq_len, pp, s, chunks, 1, 0,
                                      plan::stage_split_of(par), order);
    } catch (const std::invalid_argument& e) {
      throw InputError(std::string("parallel: ") + e.what());
    }
    double cost = shard.head ? head : 0.0;
    std::string parts = shard.embedding ? "embedding, " : "";
    for (size_t c = 0; c < shard.chunks.size(); ++c) {
      const model::LayerRange& r = shard.chunks[c];
      for (int l = r.begin; l < r.end; ++l) cost += layer[static_cast<size_t>(l)] / block;
      if (c > 0) parts += ", ";
      if (chunks > 1) {
        parts += "chunk " + parallel::chunk_suffix(static_cast<int>(c), chunks) + " (virtual " +
                 std::to_string(model::virtual_stage_of(order, static_cast<int>(c), s, pp)) + "): ";
      }
      parts += block_range(r);
    }
    if (shard.head) parts += ", LM head";
    out += " stage " + std::to_string(s) + ": " + parts + "; cost " + fixed2(cost) + "\n";
    costs.push_back(cost);
  }
  out += " (cost: estimated forward time per token, one block = 1, the LM head and loss = " +
         fixed2(head);
  if (pp > 1) {
    out += !par.layers_per_stage.empty() ? "; split by parallel.layers_per_stage"
                                         : "; split by stage_balance: " + par.stage_balance;
    double total = 0;
    for (double c : costs) total += c;
    const double slowest = *std::max_element(costs.begin(), costs.end());
    out += "; the slowest stage, whose pace the pipeline runs at, does " +
           fixed2(slowest * pp / total) + "x the mean";
  }
  return out + ")\n";
}

}  // namespace trainctl::app
