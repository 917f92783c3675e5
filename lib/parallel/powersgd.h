#pragma once
// PowerSGD gradient compression (Vogels, Karimireddy and Jaggi, NeurIPS 2019), for
// `parallel.grad_compression: powersgd` with `parallel.powersgd_rank: r`.
//
// Each 2-D weight gradient G (n × m, this rank's shard) travels as two thin matrices. With
// error feedback e (what earlier steps' compression left out on this rank) and Q (m × r)
// warm-started from the previous step (i.i.d. normal at the first):
//   M ← G + e;  P ← M Q;  P ← Σ_ranks P;  P̂ ← orthonormal columns of P (Gram–Schmidt);
//   Q ← Mᵀ P̂;  e ← M − P̂ Qᵀ;  Q ← Σ_ranks Q;  G ← P̂ Qᵀ
// so the ranks exchange (n + m) r floats instead of n m, and every rank ends with the same
// rank-r approximation P̂ P̂ᵀ Σ M of the summed gradient (the sum of the local
// approximations: nothing is lost for good, the rest waits in e). At r = min(n, m) P̂
// spans the column space of Σ M and the result is the uncompressed sum up to rounding.
// The rank is min(r, n, m) per matrix. A matrix that compression would not make smaller
// ((n + m) r >= n m) and every other tensor (biases, LayerNorm) is summed as it is.
//
// One call handles one gradient bucket (parallel/grad_sync.h): the P of all its matrices
// travel in one allreduce, their Q together with its uncompressed tensors in a second.
// Collective over the DP group; not thread-safe (one compressor per communication thread).
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "model/parameters.h"
#include "parallel/buckets.h"
#include "parallel/comm_stats.h"

namespace trainctl::parallel {

// A 2-D gradient: `rows` × `cols` floats, row-major, at float offset `offset` of the flat
// gradient buffer. `key` (a hash of the parameter's name) seeds its first Q: the first and
// last pipeline stage, which both hold the tied embedding and both compress the same summed
// gradient of it, so keep identical copies of its Q and error feedback.
struct GradMatrix {
  int64_t offset = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t key = 0;
};

struct PowerSgdOptions {
  int rank = 4;
  uint64_t seed = 0;  // Q's first values: a pure function of (seed, GradMatrix::key)
  // false: compress every matrix, even when that sends more bytes (tests at full rank).
  bool only_when_smaller = true;
  // Optimizer steps (the first ones, 0-based steps [0, warmup_steps)) whose buckets are
  // summed uncompressed, like PyTorch's start_powerSGD_iter: the first gradients are the
  // largest and least alike from step to step, so a rank-r approximation of them loses
  // most, and error feedback would start out carrying that loss. Compression then starts
  // with zero error feedback and the initial Q, as at step 0 without a warm-up.
  int64_t warmup_steps = 0;
};

class PowerSgd {
 public:
  // `matrices` lie in the flat gradient buffer, each inside one bucket. Throws
  // std::invalid_argument for rank < 1, warmup_steps < 0 or a matrix with a dimension < 1.
  PowerSgd(comm::Communicator& dp, std::vector<GradMatrix> matrices,
           const PowerSgdOptions& options);

  // Sums grads[bucket.begin, bucket.end) over the DP group: the compressed matrices as
  // above, the rest exactly (fp32 allreduce). Returns what this rank sent.
  StepCommStats reduce_bucket(float* grads, const Bucket& bucket);

  // Whether optimizer step `step` (0-based) compresses (it is past the warm-up). During the
  // warm-up the caller sums the buckets as it would without compression, so those steps are
  // exactly uncompressed data parallelism, and error feedback and Q stay untouched.
  bool compresses_at(int64_t step) const { return step >= warmup_steps_; }
  int64_t warmup_steps() const { return warmup_steps_; }

  // Which matrices are compressed, and their rank.
  bool compressed(size_t matrix) const { return ranks_[matrix] > 0; }
  int rank_of(size_t matrix) const { return ranks_[matrix]; }
  const std::vector<GradMatrix>& matrices() const { return matrices_; }

  // State for checkpoints. error: laid out like the gradient buffer (`total` floats, zero
  // outside compressed matrices), this rank's own. q: every compressed matrix's Q (m × r,
  // stored as r columns of m), matrix after matrix, the same on every DP rank.
  std::vector<float> error(int64_t total) const;
  const std::vector<float>& q() const { return q_; }
  // Restores both; throws std::invalid_argument when the sizes do not match.
  void load(const std::vector<float>& error, const std::vector<float>& q);

 private:
  // One bucket's compressed matrices (sorted by offset), the ranges between them that
  // travel uncompressed, and the floats of their P, of their Q and of those ranges.
  struct BucketPlan {
    std::vector<size_t> matrices;
    std::vector<FloatRange> plain;
    size_t p_floats = 0, q_floats = 0, plain_floats = 0;
  };
  BucketPlan plan_bucket(const Bucket& bucket) const;
  // The three phases of reduce_bucket (see there), through the scratch buffers p_ and q_send_.
  void compute_p(float* grads, const BucketPlan& plan);
  void compute_q(const float* grads, const BucketPlan& plan);
  void apply_sums(float* grads, const BucketPlan& plan);
  // Sums `floats` floats over the DP group (nothing with one rank) and counts it in `stats`.
  void sum_over_dp(float* data, size_t floats, StepCommStats& stats);

  comm::Communicator& dp_;
  int64_t warmup_steps_;
  std::vector<GradMatrix> matrices_;
  std::vector<int> ranks_;           // 0: sent as it is
  std::vector<int64_t> q_offset_;    // into q_
  std::vector<int64_t> err_offset_;  // into error_
  std::vector<float> q_;
  std::vector<float> error_;
  // Scratch, reused between calls.
  std::vector<float> p_, q_send_, q_local_;
};

// Every 2-D parameter of `params` (this rank's shard), in the order of the list.
std::vector<GradMatrix> gradient_matrices(const model::ParameterSet& params);

}  // namespace trainctl::parallel
