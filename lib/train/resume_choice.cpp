#include "train/resume_choice.h"

#include <cmath>
#include <vector>

#include "checkpoint/commit.h"
#include "checkpoint/errors.h"
#include "checkpoint/json_field.h"
#include "checkpoint/reader.h"
#include "util/error.h"

namespace trainctl::train {

namespace fs = std::filesystem;
namespace ck = checkpoint;

namespace {

bool same_model(const model::ModelConfig& a, const model::ModelConfig& b) { return a == b; }

std::string describe(const model::ModelConfig& c) {
  return std::string(model::to_string(c.family)) + ", vocab " + std::to_string(c.vocab_size) +
         ", seq_len " + std::to_string(c.max_seq_len) + ", " + std::to_string(c.n_layer) +
         " layers, " + std::to_string(c.n_head) + " heads, d_model " + std::to_string(c.d_model);
}

// Opens and fully verifies `dir` (every shard's checksum, every tensor whole). Throws
// CheckpointCorrupt when it is damaged, InputError when it holds another model.
void verify_for_resume(const fs::path& dir, const model::ModelConfig& model,
                       const std::function<void(const std::string&)>& say) {
  ck::CheckpointReader reader(dir);
  if (!same_model(reader.metadata().model, model)) {
    throw InputError("checkpoint " + dir.string() + " holds a different model (" +
                     describe(reader.metadata().model) + ") than this job (" + describe(model) +
                     "). Use --resume none to start over, or another run_dir.");
  }
  reader.verify();
  check_engine_extra(reader.metadata(), dir);
  if (!ck::metadata_is_protected(reader.metadata()) && say) {
    say("warning: checkpoint " + dir.string() + " was written by an older trainctl (format " +
        std::to_string(reader.metadata().format_version) +
        "): its metadata.json carries no checksum, so an edit to it cannot be detected");
  }
}

}  // namespace

void check_engine_extra(const ck::CheckpointMetadata& meta, const fs::path& dir) {
  const ck::JsonPlace top{(dir / ck::kMetadataFile).string(), "extra."};
  const nlohmann::json& extra = meta.extra;
  if (extra.contains("global_batch_size")) {
    ck::json_int(extra, "global_batch_size", 1, 2147483647, top);
  }
  if (extra.contains("loss_scale")) {
    const ck::JsonPlace at = top.in("loss_scale");
    const nlohmann::json& ls = ck::json_member(extra, "loss_scale", top);
    const nlohmann::json& scale = ck::json_member(ls, "scale", at);
    if (!scale.is_number() || !std::isfinite(scale.get<double>()) || scale.get<double>() <= 0) {
      ck::bad_field(at, at.field("scale"), "is " + scale.dump() + "; it must be a positive number");
    }
    ck::json_int(ls, "good_steps", 0, int64_t{1} << 62, at);
  }
}

std::optional<fs::path> choose_resume_checkpoint(
    const fs::path& checkpoints_dir, const std::string& resume, const model::ModelConfig& model,
    const std::function<void(const std::string&)>& say) {
  if (resume == "none") return std::nullopt;
  if (resume != "auto") {
    try {
      const fs::path dir = ck::resolve_checkpoint(resume);
      verify_for_resume(dir, model, say);
      return dir;
    } catch (const ck::CheckpointCorrupt& e) {
      // Named explicitly: the user chose it, so nothing else is tried.
      throw ck::CheckpointCorrupt(std::string(e.what()) + " (--resume " + resume + ")");
    }
  }
  const std::vector<ck::CheckpointStatus> order = ck::auto_resume_order(checkpoints_dir);
  if (order.empty()) return std::nullopt;
  for (size_t i = 0; i < order.size(); ++i) {
    const ck::CheckpointStatus& c = order[i];
    std::string problem = c.problem;
    if (problem.empty()) {
      try {
        verify_for_resume(c.path, model, say);
      } catch (const ck::CheckpointCorrupt& e) {
        problem = e.what();
      }
    }
    if (!problem.empty()) {
      if (say)
        say("warning: checkpoint " + c.path.string() + " is damaged and was skipped: " + problem);
      continue;
    }
    // Newer step directories not tried (`latest` named an older one) are skipped too: say so.
    for (size_t j = i + 1; j < order.size() && say; ++j) {
      if (order[j].step <= c.step) continue;
      say("warning: checkpoint " + order[j].path.string() + " is newer but was skipped: " +
          (order[j].problem.empty() ? "checkpoints/latest names " + c.path.filename().string() +
                                          ", the last checkpoint this run committed"
                                    : "it is damaged: " + order[j].problem));
    }
    return c.path;
  }
  throw InputError("no usable checkpoint in " + checkpoints_dir.string() + ": all " +
                   std::to_string(order.size()) +
                   " are damaged (the warnings above say why). Resume from one of them with "
                   "--resume PATH once repaired, or start over with --resume none --overwrite "
                   "(which moves them aside)");
}

}  // namespace trainctl::train
