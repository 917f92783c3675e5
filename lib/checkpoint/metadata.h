#pragma once
// metadata.json: what a checkpoint holds. It is written last, into the temporary directory,
// so a step directory with a valid metadata.json is a complete checkpoint. It records the
// layout that wrote it, the model, the training position (step, data, optimizer, RNG), and
// for every rank's file its size, checksum and the shard of each global tensor it holds, so
// the checkpoint can be read into any other layout.
//
// metadata.json protects itself: "metadata_checksum" is the CRC-32C of the rest of the
// document (metadata_checksum.h), so a hand edit ("step": 20 -> 21) or a damaged byte is
// detected before anything is read. Every field is range-checked on reading (json_field.h):
// a checkpoint is loaded exactly as it says, or refused with a message naming the file and
// the field.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/shard.h"
#include "util/layout.h"

namespace trainctl::checkpoint {

// Format 2 added "metadata_checksum". Format 1 (trainctl before it) is still read, every
// field checked the same way, but its metadata.json has no checksum: readers warn that an
// edit to it cannot be detected (metadata_is_protected()).
inline constexpr int kFormatVersion = 2;
inline constexpr int kFirstChecksummedFormat = 2;
inline constexpr const char* kMetadataFile = "metadata.json";

// The largest step a checkpoint can hold: training.steps is an int (config/job_spec.h).
inline constexpr int64_t kMaxCheckpointStep = 2147483647;

// The parallel layout of the run that wrote the checkpoint (informational: reading does not
// depend on it, only on each tensor's shard description).
struct ParallelLayout : Layout {
  int virtual_stages = 1;
  int zero = 0;
  bool operator==(const ParallelLayout&) const = default;
};

// A blend source's place in the data stream (data.type blend): samples drawn from it so far
// and, informational, their tokens and the source's epoch.
struct SourcePosition {
  std::string name;
  int64_t samples_consumed = 0;
  int64_t tokens_consumed = 0;
  int64_t epoch = 0;
  bool operator==(const SourcePosition&) const = default;
};

// Where the data stream resumes.
struct DataPosition {
  int64_t samples_consumed = 0;  // training samples drawn so far (all DP ranks together)
  int64_t next_step = 0;         // the first step to run after resuming
  // A blend: each source's position (their samples sum to samples_consumed); else empty.
  std::vector<SourcePosition> sources;
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
  // Optimizer steps completed when the checkpoint was taken (>= 1; 0 only for a model
  // imported by `ckpt import`, which holds no optimizer state).
  int64_t step = 0;
  ParallelLayout layout;
  model::ModelConfig model;
  DataPosition data;
  // The optimizer's update count (AdamW bias correction), in [0, step]: fp16 steps skipped
  // for overflow do not count, and SGD records only 0 (no update yet) or 1.
  int64_t optimizer_step = 0;
  nlohmann::json rng;                               // opaque to this layer: the engine's RNG state
  nlohmann::json extra = nlohmann::json::object();  // opaque: anything else the engine keeps
  std::string producer;                             // "trainctl <version>"
  std::vector<FileRecord> files;
};

// Whether the metadata was written with its checksum (format >= 2).
inline bool metadata_is_protected(const CheckpointMetadata& m) {
  return m.format_version >= kFirstChecksummedFormat;
}

nlohmann::json to_json(const TensorRecord& t);
nlohmann::json to_json(const FileRecord& f);
// With format >= 2, includes "metadata_checksum" over everything else.
nlohmann::json to_json(const CheckpointMetadata& m);

// Parse and range-check; `where` names the source in error messages. Throw
// CheckpointCorrupt naming `where` and the field when a field is missing, ill-typed or out
// of range, when the checksum does not match the content ("metadata.json was modified after
// it was written"), or when the fields contradict each other (no files, a rank listed twice,
// a tensor named twice in one file, an impossible shard). A format newer than this trainctl
// reads is an InputError (upgrade trainctl).
FileRecord file_record_from_json(const nlohmann::json& j, const std::string& where);
CheckpointMetadata metadata_from_json(const nlohmann::json& j, const std::string& where);

// Writes dir/metadata.json atomically and durably, with its checksum.
void write_metadata(const std::filesystem::path& dir, const CheckpointMetadata& m);
// Reads dir/metadata.json: as metadata_from_json, plus a CheckpointCorrupt when it is
// missing, not a regular file, not JSON, or when `dir` is named step_<N> and the file says
// another step.
CheckpointMetadata read_metadata(const std::filesystem::path& dir);

}  // namespace trainctl::checkpoint
