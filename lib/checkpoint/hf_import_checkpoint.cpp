#include "checkpoint/hf_import_checkpoint.h"

#include <vector>

#include "checkpoint/metadata.h"
#include "checkpoint/shard_writer.h"
#include "util/error.h"

namespace trainctl::checkpoint {

namespace fs = std::filesystem;

ImportSummary write_imported_checkpoint(const HfModelFolder& folder,
                                        const model::ModelConfig& config, const fs::path& out) {
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec))) {
    throw InputError("--out " + out.string() +
                     " exists and is not an empty directory: give a new folder");
  }
  folder.check();
  const fs::path tmp = out.string() + ".tmp-import";
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw InputError(tmp.string() + ": cannot create the directory: " + ec.message());

  ImportSummary summary;
  std::vector<std::vector<float>> values;
  std::vector<ShardTensor> tensors;
  const std::vector<model::ParamSpec> specs =
      model::gpt_param_specs(config, model::GptShardSpec::whole(config));
  values.reserve(specs.size());
  for (const model::ParamSpec& p : specs) {
    if (p.tied_copy) continue;
    values.emplace_back(static_cast<size_t>(numel_of(p.shard.global_shape)));
    folder.read_slice(p.name, p.shard, values.back().data());
    tensors.push_back({p.name, p.shard, values.back().data()});
    summary.tensors += 1;
    summary.parameters += numel_of(p.shard.global_shape);
  }
  CheckpointMetadata m;
  m.step = 0;
  m.model = config;
  m.files = {write_shard(tmp, 0, tensors)};
  m.rng = nlohmann::json::object();
  m.extra = {{"imported_from", folder.dir().string()}};
  m.producer = "trainctl " TRAINCTL_VERSION;
  write_metadata(tmp, m);
  summary.bytes = m.files.front().bytes;
  fs::remove(out, ec);  // an empty directory, checked above
  fs::rename(tmp, out, ec);
  if (ec)
    throw InputError(out.string() + ": cannot move the checkpoint into place: " + ec.message());
  return summary;
}

}  // namespace trainctl::checkpoint
