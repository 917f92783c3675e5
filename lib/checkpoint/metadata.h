#pragma once
// metadata.json: what a checkpoint holds. It is written last, into the temporary directory,
// so a step directory with a valid metadata.json is a complete checkpoint. It records the
// layout that wrote it, the model, the training position (step, data, optimizer, RNG), and
// for every rank's file its size, checksum and the shard of each global tensor it holds, so
// the checkpoint can be read into any other layout.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/gpt_config.h"
#include "model/shard.h"
#include "util/layout.h"

namespace trainctl::checkpoint {

inline constexpr int kFormatVersion = 1;
inline constexpr const char* kMetadataFile = "metadata.json";

// The parallel layout of the run that wrote the checkpoint (informational: reading does not
// depend on it, only on each tensor's shard description).
struct ParallelLayout : Layout {
  int virtual_stages = 1;
  int zero = 0;
  bool operator==(const ParallelLayout&) const = default;
};

// Where the data stream resumes.
struct DataPosition {
  int64_t samples_consumed = 0;  // training samples drawn so far (all DP ranks together)
  int64_t next_step = 0;         // the first step to run after resuming
  bool operator==(const DataPosition&) const = default;
};

// One tensor (or shard of one) in a rank's file.
struct TensorRecord {
  std::string name;
  model::TensorShard shard;  // global shape and the slice this file holds
};

// One rank's file.
struct FileRecord {
  std::string name;  // file name inside the checkpoint directory, e.g. "rank_00003.safetensors"
  int rank = 0;
  uint64_t bytes = 0;
  std::string checksum;  // "crc32c:xxxxxxxx" (checksum.h)
  std::vector<TensorRecord> tensors;
};

struct CheckpointMetadata {
  int format_version = kFormatVersion;
  int64_t step = 0;  // optimizer steps completed when the checkpoint was taken
  ParallelLayout layout;
  model::GptConfig model;
  DataPosition data;
  int64_t optimizer_step = 0;  // the optimizer's update count (AdamW bias correction)
  nlohmann::json rng;          // opaque to this layer: the engine's RNG state
  nlohmann::json extra = nlohmann::json::object();  // opaque: anything else the engine keeps
  std::string producer;                             // "trainctl <version>"
  std::vector<FileRecord> files;
};

nlohmann::json to_json(const TensorRecord& t);
nlohmann::json to_json(const FileRecord& f);
nlohmann::json to_json(const CheckpointMetadata& m);

// Parse; `where` names the source in error messages. Throws std::runtime_error on a missing
// or ill-typed field.
FileRecord file_record_from_json(const nlohmann::json& j, const std::string& where);
CheckpointMetadata metadata_from_json(const nlohmann::json& j, const std::string& where);

// Writes dir/metadata.json atomically and durably.
void write_metadata(const std::filesystem::path& dir, const CheckpointMetadata& m);
// Reads dir/metadata.json. Throws InputError when it is missing, unparsable or from a newer
// format version (the directory is not a usable checkpoint).
CheckpointMetadata read_metadata(const std::filesystem::path& dir);

}  // namespace trainctl::checkpoint
