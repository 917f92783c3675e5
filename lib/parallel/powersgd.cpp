#include "parallel/powersgd.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/cpu/sgemm.h"
#include "util/random.h"

namespace trainctl::parallel {

namespace {

// Orthonormalises the r columns (each n floats, contiguous) by modified Gram–Schmidt,
// accumulating in double. A column that vanishes (a zero gradient) stays zero: its
// contribution to P̂ Qᵀ is then zero too, instead of a division by zero.
void orthonormalise(float* cols, int64_t n, int r) {
  for (int j = 0; j < r; ++j) {
    float* c = cols + j * n;
    for (int k = 0; k < j; ++k) {
      const float* b = cols + k * n;
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(c[i]) * b[i];
      const auto d = static_cast<float>(dot);
      for (int64_t i = 0; i < n; ++i) c[i] -= d * b[i];
    }
    double norm = 0;
    for (int64_t i = 0; i < n; ++i) norm += static_cast<double>(c[i]) * c[i];
    norm = std::sqrt(norm);
    const float inv = norm > 1e-30 ? static_cast<float>(1.0 / norm) : 0.0f;
    for (int64_t i = 0; i < n; ++i) c[i] *= inv;
  }
}

}  // namespace

std::vector<GradMatrix> gradient_matrices(const model::ParameterSet& params) {
  std::vector<GradMatrix> out;
  for (const model::Param& p : params.list()) {
    if (p.shape.size() == 2) {
      out.push_back({p.offset, p.shape[0], p.shape[1], rng::hash_name(p.name)});
    }
  }
  return out;
}

PowerSgd::PowerSgd(comm::Communicator& dp, std::vector<GradMatrix> matrices,
                   const PowerSgdOptions& options)
    : dp_(dp), warmup_steps_(options.warmup_steps), matrices_(std::move(matrices)) {
  if (options.rank < 1) throw std::invalid_argument("PowerSGD: rank must be >= 1");
  if (warmup_steps_ < 0) throw std::invalid_argument("PowerSGD: warmup_steps must be >= 0");
  int64_t q_total = 0, err_total = 0;
  for (size_t k = 0; k < matrices_.size(); ++k) {
    const GradMatrix& g = matrices_[k];
    if (g.rows < 1 || g.cols < 1) throw std::invalid_argument("PowerSGD: empty matrix");
    const int64_t r = std::min<int64_t>({options.rank, g.rows, g.cols});
    const bool smaller = (g.rows + g.cols) * r < g.rows * g.cols;
    ranks_.push_back(smaller || !options.only_when_smaller ? static_cast<int>(r) : 0);
    q_offset_.push_back(q_total);
    err_offset_.push_back(err_total);
    if (ranks_.back() > 0) {
      q_total += g.cols * ranks_.back();
      err_total += g.rows * g.cols;
    }
  }
  q_.resize(static_cast<size_t>(q_total));
  error_.assign(static_cast<size_t>(err_total), 0.0f);
  // The same first Q on every rank: a pure function of (seed, the parameter's name).
  for (size_t k = 0; k < matrices_.size(); ++k) {
    if (ranks_[k] == 0) continue;
    const int64_t len = matrices_[k].cols * ranks_[k];
    const uint64_t stream = rng::hash(options.seed, 0x90e35ULL, matrices_[k].key);
    for (int64_t i = 0; i < len; ++i) {
      q_[static_cast<size_t>(q_offset_[k] + i)] =
          static_cast<float>(rng::normal(stream, static_cast<uint64_t>(i)));
    }
  }
}

PowerSgd::BucketPlan PowerSgd::plan_bucket(const Bucket& bucket) const {
  BucketPlan plan;
  // The bucket's compressed matrices; everything else in it travels as it is.
  std::vector<size_t>& in = plan.matrices;
  for (size_t k = 0; k < matrices_.size(); ++k) {
    const GradMatrix& g = matrices_[k];
    if (ranks_[k] > 0 && g.offset >= bucket.begin && g.offset + g.rows * g.cols <= bucket.end) {
      in.push_back(k);
    }
  }
  std::sort(in.begin(), in.end(),
            [&](size_t a, size_t b) { return matrices_[a].offset < matrices_[b].offset; });
  // Uncompressed ranges: the gaps between the compressed matrices.
  int64_t at = bucket.begin;
  for (size_t k : in) {
    if (matrices_[k].offset > at) plan.plain.emplace_back(at, matrices_[k].offset);
    at = matrices_[k].offset + matrices_[k].rows * matrices_[k].cols;
  }
  if (bucket.end > at) plan.plain.emplace_back(at, bucket.end);
  for (size_t k : in) {
    plan.p_floats += static_cast<size_t>(matrices_[k].rows * ranks_[k]);
    plan.q_floats += static_cast<size_t>(matrices_[k].cols * ranks_[k]);
  }
  for (const auto& [b, e] : plan.plain) plan.plain_floats += static_cast<size_t>(e - b);
  return plan;
}

void PowerSgd::sum_over_dp(float* data, size_t floats, StepCommStats& stats) {
  const int ranks = dp_.size();
  if (floats == 0 || ranks <= 1) return;
  dp_.allreduce(data, floats, comm::ReduceOp::sum);
  stats.collectives += 1;
  stats.wire_bytes += floats * sizeof(float);
  stats.sent_bytes += ring_allreduce_sent(floats * sizeof(float), ranks);
}

void PowerSgd::compute_p(float* grads, const BucketPlan& plan) {
  p_.assign(plan.p_floats, 0.0f);
  size_t po = 0;
  for (size_t k : plan.matrices) {
    const GradMatrix& g = matrices_[k];
    const int r = ranks_[k];
    float* m = grads + g.offset;
    const float* e = error_.data() + err_offset_[k];
    for (int64_t i = 0; i < g.rows * g.cols; ++i) m[i] += e[i];
    const auto rows = static_cast<int>(g.rows), cols = static_cast<int>(g.cols);
    // P is kept transposed, [r, rows]: Pᵀ = Q Mᵀ with Q [r, cols].
    ops::cpu::sgemm_serial(false, true, r, rows, cols, 1.0f, q_.data() + q_offset_[k], cols, m,
                           cols, 0.0f, p_.data() + po, rows);
    po += static_cast<size_t>(g.rows * r);
  }
}

void PowerSgd::compute_q(const float* grads, const BucketPlan& plan) {
  q_send_.assign(plan.q_floats + plan.plain_floats, 0.0f);
  q_local_.resize(plan.q_floats);
  size_t po = 0, qo = 0;
  for (size_t k : plan.matrices) {
    const GradMatrix& g = matrices_[k];
    const int r = ranks_[k];
    float* p = p_.data() + po;
    orthonormalise(p, g.rows, r);
    const float* m = grads + g.offset;
    float* q = q_local_.data() + qo;
    const auto rows = static_cast<int>(g.rows), cols = static_cast<int>(g.cols);
    // Q [r, cols] = P̂ᵀ M; e = M - P̂ Q.
    ops::cpu::sgemm_serial(false, false, r, cols, rows, 1.0f, p, rows, m, cols, 0.0f, q, cols);
    float* e = error_.data() + err_offset_[k];
    std::copy(m, m + g.rows * g.cols, e);
    ops::cpu::sgemm_serial(true, false, rows, cols, r, -1.0f, p, rows, q, cols, 1.0f, e, cols);
    std::copy(q, q + g.cols * r, q_send_.begin() + static_cast<std::ptrdiff_t>(qo));
    po += static_cast<size_t>(g.rows * r);
    qo += static_cast<size_t>(g.cols * r);
  }
  size_t so = plan.q_floats;
  for (const auto& [b, e] : plan.plain) {
    std::copy(grads + b, grads + e, q_send_.begin() + static_cast<std::ptrdiff_t>(so));
    so += static_cast<size_t>(e - b);
  }
}

void PowerSgd::apply_sums(float* grads, const BucketPlan& plan) {
  size_t po = 0, qo = 0;
  for (size_t k : plan.matrices) {
    const GradMatrix& g = matrices_[k];
    const int r = ranks_[k];
    const float* p = p_.data() + po;
    const float* q = q_send_.data() + qo;
    const auto rows = static_cast<int>(g.rows), cols = static_cast<int>(g.cols);
    ops::cpu::sgemm_serial(true, false, rows, cols, r, 1.0f, p, rows, q, cols, 0.0f,
                           grads + g.offset, cols);
    std::copy(q, q + g.cols * r, q_.begin() + q_offset_[k]);
    po += static_cast<size_t>(g.rows * r);
    qo += static_cast<size_t>(g.cols * r);
  }
  size_t so = plan.q_floats;
  for (const auto& [b, e] : plan.plain) {
    std::copy(q_send_.begin() + static_cast<std::ptrdiff_t>(so),
              q_send_.begin() + static_cast<std::ptrdiff_t>(so + static_cast<size_t>(e - b)),
              grads + b);
    so += static_cast<size_t>(e - b);
  }
}

StepCommStats PowerSgd::reduce_bucket(float* grads, const Bucket& bucket) {
  StepCommStats stats;
  const BucketPlan plan = plan_bucket(bucket);
  // 1. M = G + e (in place: the gradient buffer holds M until it receives the result);
  //    P = M Q for every matrix, one after another in p_ (r columns of n each); P summed.
  compute_p(grads, plan);
  sum_over_dp(p_.data(), p_.size(), stats);
  // 2. P̂; Q = Mᵀ P̂ (this rank's), e = M − P̂ Qᵀ; the uncompressed rest after the Qs;
  //    all of it summed.
  compute_q(grads, plan);
  sum_over_dp(q_send_.data(), q_send_.size(), stats);
  // 3. G = P̂ Qᵀ with the summed Q, kept as next step's warm start; the rest copied back.
  apply_sums(grads, plan);
  return stats;
}

std::vector<float> PowerSgd::error(int64_t total) const {
  std::vector<float> out(static_cast<size_t>(total), 0.0f);
  for (size_t k = 0; k < matrices_.size(); ++k) {
    if (ranks_[k] == 0) continue;
    const GradMatrix& g = matrices_[k];
    std::copy(error_.begin() + err_offset_[k], error_.begin() + err_offset_[k] + g.rows * g.cols,
              out.begin() + g.offset);
  }
  return out;
}

void PowerSgd::load(const std::vector<float>& error, const std::vector<float>& q) {
  if (q.size() != q_.size()) {
    throw std::invalid_argument("PowerSGD state: Q holds " + std::to_string(q.size()) +
                                " floats, this layout and rank need " + std::to_string(q_.size()));
  }
  for (size_t k = 0; k < matrices_.size(); ++k) {
    if (ranks_[k] == 0) continue;
    const GradMatrix& g = matrices_[k];
    if (static_cast<int64_t>(error.size()) < g.offset + g.rows * g.cols) {
      throw std::invalid_argument("PowerSGD state: the error buffer is too small");
    }
    std::copy(error.begin() + g.offset, error.begin() + g.offset + g.rows * g.cols,
              error_.begin() + err_offset_[k]);
  }
  q_ = q;
}

}  // namespace trainctl::parallel
