#include "ckpt_commands.h"

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/commit.h"
#include "checkpoint/errors.h"
#include "checkpoint/export.h"
#include "checkpoint/reader.h"
#include "checkpoint/shard_writer.h"
#include "ckpt_text.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::app {

namespace {

namespace fs = std::filesystem;
namespace ck = checkpoint;

// "how it is split": "whole", "dim 0 in 2", "dim 0 in 2 (3 blocks)".
std::string split_text(const model::TensorShard& s) {
  if (!s.split()) return "whole";
  std::string t = "dim " + std::to_string(s.dim) + " in " + std::to_string(s.count);
  if (s.blocks > 1) t += " (" + std::to_string(s.blocks) + " blocks)";
  return t;
}

// The optimizer state names ("exp_avg", ...) among the tensor names.
std::set<std::string> optimizer_states(const std::vector<std::string>& names) {
  std::set<std::string> out;
  const std::string prefix = ck::kOptimizerPrefix;
  for (const std::string& n : names) {
    if (!ck::is_optimizer_tensor(n)) continue;
    const size_t dot = n.find('.', prefix.size());
    out.insert(n.substr(prefix.size(), dot == std::string::npos ? dot : dot - prefix.size()));
  }
  return out;
}

// Every shard of a tensor is split the same way: the first one's description.
model::TensorShard first_shard(const ck::CheckpointMetadata& m, const std::string& name) {
  for (const ck::FileRecord& f : m.files) {
    for (const ck::TensorRecord& t : f.tensors) {
      if (t.name == name) return t.shard;
    }
  }
  return {};
}

}  // namespace

int cmd_ckpt_info(const fs::path& ckpt, bool tensors, bool json) {
  const fs::path dir = ck::resolve_checkpoint(ckpt);
  ck::CheckpointReader reader(dir);
  const ck::CheckpointMetadata& m = reader.metadata();
  if (json) {
    std::printf("%s\n", ck::to_json(m).dump(2).c_str());
    return kExitOk;
  }
  int model_tensors = 0, optim_tensors = 0;
  int64_t params = 0;
  for (const std::string& name : reader.tensor_names()) {
    if (ck::is_optimizer_tensor(name)) {
      ++optim_tensors;
    } else {
      ++model_tensors;
      params += numel_of(reader.global_shape(name));
    }
  }
  uint64_t bytes = 0;
  for (const ck::FileRecord& f : m.files) bytes += f.bytes;
  std::printf("checkpoint %s\n", dir.string().c_str());
  std::printf("  step %lld: resumes at step %lld, %lld samples consumed, optimizer step %lld\n",
              static_cast<long long>(m.step), static_cast<long long>(m.data.next_step),
              static_cast<long long>(m.data.samples_consumed),
              static_cast<long long>(m.optimizer_step));
  std::printf("  written by %s with dp %d, tp %d, pp %d, virtual stages %d, ZeRO stage %d\n",
              m.producer.empty() ? "trainctl" : m.producer.c_str(), m.layout.dp, m.layout.tp,
              m.layout.pp, m.layout.virtual_stages, m.layout.zero);
  std::printf(
      "  model: %svocab_size %d, max_seq_len %d, n_layer %d, n_head %d, d_model %d "
      "(%lld parameters)\n",
      m.model.llama() ? "llama, " : "", m.model.vocab_size, m.model.max_seq_len, m.model.n_layer,
      m.model.n_head, m.model.d_model, static_cast<long long>(params));
  if (m.model.llama()) {
    std::printf("         n_kv_head %d, ffn_hidden %d, rope_theta %g, norm_eps %g, %s LM head\n",
                m.model.kv_heads(), m.model.mlp_hidden(), static_cast<double>(m.model.rope_theta),
                static_cast<double>(m.model.norm_eps), m.model.tie_embeddings ? "tied" : "untied");
  }
  std::string states;
  for (const std::string& s : optimizer_states(reader.tensor_names())) {
    states += (states.empty() ? "" : ", ") + s;
  }
  std::printf("  tensors: %d model, %d optimizer state%s\n", model_tensors, optim_tensors,
              states.empty() ? "" : (" (" + states + ")").c_str());
  std::printf("  files: %zu, %s (any dp/tp/pp layout can resume from them)\n", m.files.size(),
              size_text(bytes).c_str());
  for (const ck::FileRecord& f : m.files) {
    std::printf("    %-24s rank %-5d %10s  %s  %zu tensors\n", f.name.c_str(), f.rank,
                size_text(f.bytes).c_str(), f.checksum.c_str(), f.tensors.size());
  }
  if (!m.rng.is_null()) std::printf("  rng: %s\n", m.rng.dump().c_str());
  if (!m.extra.empty()) std::printf("  extra: %s\n", m.extra.dump().c_str());
  if (tensors) {
    std::printf("  %-52s %-14s %-22s %s\n", "tensor", "global shape", "split", "shards");
    for (const std::string& name : reader.tensor_names()) {
      std::printf("  %-52s %-14s %-22s %zu\n", name.c_str(),
                  shape_string(reader.global_shape(name)).c_str(),
                  split_text(first_shard(m, name)).c_str(), reader.shard_count(name));
    }
  } else {
    std::printf("  (--tensors lists every tensor, --json prints metadata.json)\n");
  }
  return kExitOk;
}

int cmd_ckpt_export(const fs::path& ckpt, const fs::path& out) {
  const fs::path dir = ck::resolve_checkpoint(ckpt);
  std::error_code ec;
  if (fs::is_directory(out, ec)) {
    throw InputError("--out " + out.string() + " is a directory: give a file name such as " +
                     (out / "model.safetensors").string());
  }
  if (out.has_parent_path() && !fs::is_directory(out.parent_path(), ec)) {
    throw InputError("--out " + out.string() + ": directory " + out.parent_path().string() +
                     " does not exist");
  }
  ck::check_export_target(dir, out);
  ck::CheckpointReader reader(dir);
  const ck::ExportSummary s = ck::export_full_model(reader, out);
  std::printf("wrote %s: %d tensors, %lld parameters, %s (step %lld of %s)\n", out.string().c_str(),
              s.tensors, static_cast<long long>(s.parameters), size_text(s.bytes).c_str(),
              static_cast<long long>(reader.metadata().step), dir.string().c_str());
  return kExitOk;
}

}  // namespace trainctl::app
