#pragma once
// One rank's part of a checkpoint: a single safetensors file, rank_<RRRRR>.safetensors,
// holding the rank's LOCAL tensors (F32, local shape) under their global names, with each
// tensor's shard description (global shape, split dim, blocks, index, count) in the
// header's __metadata__ under "trainctl.shards" so the file describes itself. The file is
// fsync'ed; a small sidecar rank_<RRRRR>.json holds the FileRecord (size, checksum, shards)
// so rank 0 can assemble metadata.json from the directory without a collective.
//
// Names: parameters under their nanoGPT names ("transformer.h.0.attn.c_attn.weight"),
// optimizer state under optimizer_tensor_name() ("optim.exp_avg.transformer.h.0...."), each
// with the same shard as its parameter. This layer treats all of them alike.
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/metadata.h"
#include "model/shard.h"

namespace trainctl::checkpoint {

inline constexpr const char* kOptimizerPrefix = "optim.";

// "optim.<state>.<parameter>", e.g. optimizer_tensor_name("exp_avg", "transformer.wte.weight").
std::string optimizer_tensor_name(const std::string& state, const std::string& parameter);
// True for names made by optimizer_tensor_name (not part of the exported model).
bool is_optimizer_tensor(const std::string& name);

// "rank_00003.safetensors" and its sidecar "rank_00003.json".
std::string shard_file_name(int rank);
std::string shard_record_name(int rank);

// A rank's local tensor: `data` points at shard.local_shape() floats, row-major, owned by the
// caller (it must stay valid and unchanged until the write returns).
struct ShardTensor {
  std::string name;
  model::TensorShard shard;
  const float* data = nullptr;
};

// Writes dir/rank_<rank>.safetensors and its sidecar, both flushed to disk, and returns the
// record that goes into metadata.json. Names must be unique within the file. Throws
// std::invalid_argument on a duplicate name or a null pointer, std::runtime_error on I/O
// failure (naming the file).
FileRecord write_shard(const std::filesystem::path& dir, int rank,
                       const std::vector<ShardTensor>& tensors);

// The records of ranks 0..world_size-1 from their sidecars in `dir` (rank 0 calls this after
// every rank's write_shard returned, e.g. after a barrier). Throws std::runtime_error naming
// the missing ranks when a sidecar is absent.
std::vector<FileRecord> collect_shard_records(const std::filesystem::path& dir, int world_size);

}  // namespace trainctl::checkpoint
