#pragma once
// The batch log (test hook TRAINCTL_TEST_BATCH_LOG=1, launch/test_hooks.h): which samples a
// run trained on, to compare two runs' data token for token (a resume across an epoch
// boundary on another layout must train on exactly the uninterrupted run's batches). Each
// worker that feeds a DP replica (tp rank 0, first pipeline stage) appends one JSON line per
// step to run_dir/batches/rank<R>.jsonl:
//   {"step": S, "samples": [[G, "H"], ...]}
// S: the 1-based step; G: each row's global sample index (data/sampler.h); H: FNV-1a 64 of
// the row's input ids and its last target (the whole window of seq_len + 1 tokens), as 16
// hex digits. The union over ranks of one step is the whole global batch.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "data/sampler.h"

namespace trainctl::train {

class BatchLog {
 public:
  // Inactive (log() does nothing) unless `enabled` and this rank feeds a replica.
  BatchLog(bool enabled, bool feeds_replica, const std::filesystem::path& run_dir, int rank);
  ~BatchLog();
  BatchLog(const BatchLog&) = delete;
  BatchLog& operator=(const BatchLog&) = delete;
  void log(const data::BatchLayout& layout, const data::StepBatch& batch);

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace trainctl::train
