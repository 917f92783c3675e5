#pragma once
// Checkpoints for tests, made with the library as the training engine would: every rank of a
// (tp, pp, virtual_stages) layout writes its shard of a small GPT's parameters and AdamW
// state, each element set to a value computed from its GLOBAL index, so any read of any
// slice can be checked element by element. Header-only: unit and integration tests use it.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/commit.h"
#include "checkpoint/metadata.h"
#include "checkpoint/shard_writer.h"
#include "model/shard.h"

namespace trainctl::checkpoint::testing {

namespace fs = std::filesystem;

// Small enough to be fast, divisible by tp 2 (heads, vocab, the q|k|v blocks), 4 blocks so
// pp 2 with 2 virtual stages or pp 4 split it.
inline const model::ModelConfig kCfg{
    .vocab_size = 16, .max_seq_len = 8, .n_layer = 4, .n_head = 4, .d_model = 8};
inline constexpr int kSeqLen = 8;
inline const std::vector<std::string> kStates = {"exp_avg", "exp_avg_sq"};

// The value every copy of element `global` of tensor `name` holds: exact in fp32.
inline float expected_value(const std::string& name, int64_t global) {
  return static_cast<float>(std::hash<std::string>{}(name) % 1000) * 4096.0f +
         static_cast<float>(global);
}

struct ShardLayout {
  int tp = 1, pp = 1, virtual_stages = 1;
  int world() const { return tp * pp; }
};

// Rank (pp_rank, tp_rank)'s parameters (Megatron order with dp = 1: TP fastest).
inline std::vector<model::ParamSpec> rank_params(const ShardLayout& l, int rank,
                                                 const model::ModelConfig& cfg = kCfg) {
  const int tp_rank = rank % l.tp, pp_rank = rank / l.tp;
  return model::gpt_param_specs(
      cfg, model::GptShardSpec::of(cfg, kSeqLen, l.pp, pp_rank, l.virtual_stages, l.tp, tp_rank));
}

// A rank's local tensors (parameters, then optimizer state with the same shards).
struct RankTensors {
  std::vector<std::string> names;
  std::vector<model::TensorShard> shards;
  std::vector<std::vector<float>> data;

  std::vector<ShardTensor> views() const {
    std::vector<ShardTensor> out;
    for (size_t i = 0; i < names.size(); ++i) out.push_back({names[i], shards[i], data[i].data()});
    return out;
  }
};

inline RankTensors rank_tensors(const ShardLayout& l, int rank, bool with_optimizer = true) {
  RankTensors r;
  auto add = [&](const std::string& name, const model::TensorShard& shard) {
    std::vector<float> values(static_cast<size_t>(numel_of(shard.local_shape())));
    for (size_t k = 0; k < values.size(); ++k) {
      values[k] = expected_value(name, shard.global_index(static_cast<int64_t>(k)));
    }
    r.names.push_back(name);
    r.shards.push_back(shard);
    r.data.push_back(std::move(values));
  };
  const std::vector<model::ParamSpec> params = rank_params(l, rank);
  for (const model::ParamSpec& p : params) add(p.name, p.shard);
  if (with_optimizer) {
    for (const std::string& s : kStates) {
      for (const model::ParamSpec& p : params) add(optimizer_tensor_name(s, p.name), p.shard);
    }
  }
  return r;
}

inline CheckpointMetadata metadata_for(const ShardLayout& l, int64_t step, const fs::path& dir) {
  CheckpointMetadata m;
  m.step = step;
  m.layout = {{1, l.tp, l.pp}, l.virtual_stages, 0};
  m.model = kCfg;
  m.data = {step * 64, step, {}};
  m.optimizer_step = step;
  m.rng = {{"seed", 1234}, {"offset", step}};
  m.extra = {{"job", "ckpt-test"}};
  m.producer = "trainctl test";
  m.files = collect_shard_records(dir, l.world());
  return m;
}

// Every rank's shard and metadata.json into `dir` (no commit).
inline void write_all_ranks(const fs::path& dir, const ShardLayout& l, int64_t step,
                            bool with_optimizer = true) {
  for (int r = 0; r < l.world(); ++r)
    write_shard(dir, r, rank_tensors(l, r, with_optimizer).views());
  write_metadata(dir, metadata_for(l, step, dir));
}

// A complete, committed checkpoint for `step` under checkpoints_dir.
inline fs::path save_checkpoint(const fs::path& checkpoints_dir, const ShardLayout& l, int64_t step,
                                int keep_last = 0) {
  const fs::path tmp = begin_checkpoint(checkpoints_dir, step);
  write_all_ranks(tmp, l, step);
  return commit_checkpoint(tmp, checkpoints_dir, step, keep_last);
}

// A fresh directory under $TMPDIR, removed at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/trainctl-ckpt-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

}  // namespace trainctl::checkpoint::testing
