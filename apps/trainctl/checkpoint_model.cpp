#include "checkpoint_model.h"

#include <set>
#include <vector>

#include "checkpoint/commit.h"
#include "checkpoint/metadata.h"
#include "checkpoint/shard_writer.h"
#include "train/spec_options.h"
#include "util/error.h"

namespace trainctl::app {

namespace {

namespace fs = std::filesystem;

std::string model_dims(const model::ModelConfig& c) {
  return std::string(model::to_string(c.family)) + ", vocab_size " + std::to_string(c.vocab_size) +
         ", seq_len " + std::to_string(c.max_seq_len) + ", n_layer " + std::to_string(c.n_layer) +
         ", n_head " + std::to_string(c.n_head) + ", d_model " + std::to_string(c.d_model);
}

// The state buffers each optimizer.type reads back on resume (lib/optim/optimizer.cpp,
// state_names(); the workers refuse a checkpoint without them).
std::vector<std::string> optimizer_states(const std::string& type) {
  if (type == "adamw") return {"exp_avg", "exp_avg_sq"};
  if (type == "sgd") return {"momentum_buffer"};
  return {};
}

// The optimizer states metadata.json lists tensors of ("exp_avg", ...).
std::set<std::string> saved_states(const checkpoint::CheckpointMetadata& meta) {
  std::set<std::string> out;
  const std::string prefix = checkpoint::kOptimizerPrefix;
  for (const checkpoint::FileRecord& file : meta.files) {
    for (const checkpoint::TensorRecord& t : file.tensors) {
      if (!checkpoint::is_optimizer_tensor(t.name)) continue;
      const std::string rest = t.name.substr(prefix.size());
      out.insert(rest.substr(0, rest.find('.')));
    }
  }
  return out;
}

}  // namespace

void check_checkpoint_optimizer(const fs::path& dir, const config::JobSpec& spec) {
  const checkpoint::CheckpointMetadata meta = checkpoint::read_metadata(dir);
  const std::set<std::string> saved = saved_states(meta);
  if (meta.step == 0 && saved.empty()) return;  // imported (ckpt import): a fresh optimizer
  for (const std::string& state : optimizer_states(spec.optimizer.type)) {
    if (saved.count(state)) continue;
    throw InputError((dir / checkpoint::kMetadataFile).string() + ": the checkpoint has no " +
                     spec.optimizer.type + " state (" + state +
                     "): it was written with another optimizer.type. Resume with the optimizer "
                     "that wrote it, or start over with --resume none.");
  }
}

void check_checkpoint_model(const fs::path& dir, const config::JobSpec& spec,
                            const std::string& job, const std::string& fix) {
  const model::ModelConfig saved = checkpoint::read_metadata(dir).model;
  const model::ModelConfig wanted = train::gpt_config(spec);
  if (saved == wanted) return;
  throw InputError((dir / checkpoint::kMetadataFile).string() +
                   ": the checkpoint holds another model (" + model_dims(saved) + ") than " + job +
                   " (" + model_dims(wanted) + "). " + fix);
}

std::optional<fs::path> resume_candidate(const config::JobSpec& spec, const std::string& resume) {
  if (resume == "none") return std::nullopt;
  if (resume != "auto") return checkpoint::resolve_checkpoint(resume);
  for (const checkpoint::CheckpointStatus& c :
       checkpoint::auto_resume_order(spec.run_dir / "checkpoints")) {
    if (c.problem.empty()) return c.path;
  }
  return std::nullopt;
}

}  // namespace trainctl::app
