#include "checkpoint_model.h"

#include "checkpoint/commit.h"
#include "checkpoint/metadata.h"
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

}  // namespace

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
