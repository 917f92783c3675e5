#include "train/export_model.h"

#include <algorithm>
#include <map>
#include <vector>

#include "checkpoint/export.h"
#include "checkpoint/safetensors.h"
#include "comm/rank_coords.h"

namespace trainctl::train {

namespace {

constexpr uint32_t kExportTag = 0x7fff0002u;

// Where each parameter of one rank's shard sits in that rank's flat buffer: the same
// declarations as the rank's own ParameterSet (no memory is allocated).
std::vector<model::Param> shard_layout(const model::ModelConfig& cfg, const RunOptions& options,
                                       const comm::Layout& layout, int tp_rank, int pp_rank,
                                       ops::Backend& backend, int64_t* total) {
  const model::GptShardSpec shard = model::GptShardSpec::of(
      cfg, options.model.seq_len, layout.pp, pp_rank, options.parallel.virtual_stages, layout.tp,
      tp_rank, options.parallel.stages, parallel::chunk_order(options.parallel.schedule));
  model::ParameterSet set(backend);
  for (const model::ParamSpec& p : model::gpt_param_specs(cfg, shard)) set.declare(p);
  *total = set.total();
  return set.list();
}

void write_model(const std::vector<checkpoint::NamedTensor>& tensors, const model::ModelConfig& c,
                 const RunOptions& options, const std::filesystem::path& path) {
  checkpoint::write_safetensors(path, tensors, checkpoint::nanogpt_metadata(c, options.name));
}

}  // namespace

void export_model(const model::Gpt& gpt, const RunOptions& options, comm::ProcessGroups& groups,
                  const std::filesystem::path& path, const float* values) {
  const model::ParameterSet& params = gpt.params();
  // Borrowed views only read it.
  float* const flat = const_cast<float*>(values != nullptr ? values : params.data());
  const comm::Layout& layout = groups.layout;
  if (layout.tp == 1 && layout.pp == 1) {  // every rank holds the whole model
    if (groups.rank != 0) return;
    std::vector<checkpoint::NamedTensor> tensors;
    for (size_t i = 0; i < params.list().size(); ++i) {
      const model::Param& p = params.at(i);
      tensors.push_back({p.name, Tensor::borrow(flat + p.offset, p.shape)});
    }
    write_model(tensors, gpt.config(), options, path);
    return;
  }
  comm::Communicator& world = *groups.world;
  if (groups.rank != 0) {
    if (groups.coord.dp == 0 && groups.coord.cp == 0) {
      world.send(flat, static_cast<size_t>(params.total()) * sizeof(float), 0, kExportTag);
    }
    return;
  }
  // Rank 0: place every shard's values into full tensors, in nanoGPT's order.
  std::map<std::string, std::vector<float>> full;
  std::vector<std::pair<std::string, Shape>> order;
  std::vector<float> buffer;
  for (int pp_rank = 0; pp_rank < layout.pp; ++pp_rank) {
    for (int tp_rank = 0; tp_rank < layout.tp; ++tp_rank) {
      const int rank = comm::rank_of(layout, {0, tp_rank, pp_rank});
      int64_t total = 0;
      const std::vector<model::Param> list =
          shard_layout(gpt.config(), options, layout, tp_rank, pp_rank, gpt.backend(), &total);
      const float* shard_values = flat;
      if (rank != 0) {
        buffer.resize(static_cast<size_t>(total));
        world.recv(buffer.data(), buffer.size() * sizeof(float), rank, kExportTag);
        shard_values = buffer.data();
      }
      for (const model::Param& p : list) {
        if (p.tied_copy) continue;
        auto [it, fresh] = full.try_emplace(p.name);
        if (fresh) {
          it->second.resize(static_cast<size_t>(numel_of(p.shard.global_shape)));
          order.emplace_back(p.name, p.shard.global_shape);
        }
        for (int64_t k = 0; k < p.numel; ++k) {
          it->second[static_cast<size_t>(p.shard.global_index(k))] = shard_values[p.offset + k];
        }
      }
    }
  }
  // nanoGPT's order: embeddings, blocks by index, ln_f (interleaved chunks visit blocks
  // out of order).
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return checkpoint::nanogpt_position(a.first) < checkpoint::nanogpt_position(b.first);
  });
  std::vector<checkpoint::NamedTensor> tensors;
  for (auto& [name, shape] : order) {
    tensors.push_back({name, Tensor::borrow(full[name].data(), shape)});
  }
  write_model(tensors, gpt.config(), options, path);
}

}  // namespace trainctl::train
