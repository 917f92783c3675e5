#include "parallel/zero_optimizer.h"

#include "parallel/exact_sum.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace trainctl::parallel {

ZeroAdamW::ZeroAdamW(comm::Communicator& dp, model::ParameterSet& params, ops::Backend& backend,
                     const optim::OptimizerOptions& options, int stage, float* master_shard)
    : dp_(dp),
      params_(params),
      backend_(backend),
      options_(options),
      stage_(stage),
      layout_(make_shard_layout(params.total(), dp.size())),
      master_(master_shard) {
  if (stage != 1 && stage != 2) {
    throw std::invalid_argument("ZeRO stage must be 1 or 2, got " + std::to_string(stage));
  }
  if (options.type != "adamw") {
    throw std::invalid_argument("ZeRO optimizer sharding supports optimizer.type adamw, not " +
                                options.type);
  }
  const auto shard = static_cast<size_t>(layout_.shard_size);
  m_ = static_cast<float*>(backend.alloc(shard * sizeof(float)));
  v_ = static_cast<float*>(backend.alloc(shard * sizeof(float)));
  // Backend memory: the optimizer's kernels read it (device memory on GPUs).
  if (stage_ == 2) grad_shard_ = static_cast<float*>(backend.alloc(shard * sizeof(float)));
  if (master_ != nullptr) return;  // the owner of the master allgathers the weights
  if (dp.size() > 1) send_shard_ = static_cast<float*>(backend.alloc(shard * sizeof(float)));
  if (dp.size() > 1 && layout_.padded()) {
    padded_ = static_cast<float*>(
        backend.alloc(static_cast<size_t>(layout_.padded_total()) * sizeof(float)));
  }
}

ZeroAdamW::~ZeroAdamW() {
  backend_.free(m_);
  backend_.free(v_);
  if (grad_shard_ != nullptr) backend_.free(grad_shard_);
  if (send_shard_ != nullptr) backend_.free(send_shard_);
  if (padded_ != nullptr) backend_.free(padded_);
}

template <class Fn>
void ZeroAdamW::timed(size_t wire_bytes, size_t sent_bytes, Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.comm_s += s;
  stats_.exposed_s += s;
  stats_.collectives += 1;
  stats_.wire_bytes += wire_bytes;
  stats_.sent_bytes += sent_bytes;
}

float* ZeroAdamW::shard_grads() {
  return stage_ == 2 ? grad_shard_ : params_.grads() + shard_begin();
}

void ZeroAdamW::reduce_gradients() {
  stats_ = {};
  if (stage_ != 2) return;
  const auto shard = static_cast<size_t>(layout_.shard_size);
  if (dp_.size() == 1) {
    std::memcpy(grad_shard_, params_.grads(), static_cast<size_t>(params_.total()) * sizeof(float));
    return;
  }
  const float* in = params_.grads();
  if (layout_.padded()) {
    // The reduce-scatter takes whole blocks: pad the local gradients with zeros.
    const auto total = static_cast<size_t>(layout_.total);
    backend_.copy(padded_, params_.grads(), total);
    backend_.zero(padded_ + total, static_cast<size_t>(layout_.padded_total()) - total);
    in = padded_;
  }
  const size_t bytes = static_cast<size_t>(layout_.padded_total()) * sizeof(float);
  timed(bytes, ring_reduce_scatter_sent(bytes, dp_.size()),
        [&] { dp_.reduce_scatter(in, grad_shard_, shard); });
}

double ZeroAdamW::grad_norm() {
  const auto n = static_cast<size_t>(shard_end() - shard_begin());
  const double local = n > 0 ? backend_.sum_squares(shard_grads(), n) : 0.0;
  if (dp_.size() == 1) return std::sqrt(local);
  double sum = 0.0;
  timed(sizeof local, ring_allgather_sent(sizeof local, dp_.size()),
        [&] { sum = allsum_exact(dp_, local); });
  return std::sqrt(sum);
}

double ZeroAdamW::local_grad_sumsq(const std::vector<FloatRange>& counted) {
  const int64_t begin = shard_begin(), end = shard_end();
  const float* grads = shard_grads();
  double sum = 0.0;
  for (const auto& [b, e] : counted) {
    const int64_t lo = std::max(b, begin), hi = std::min(e, end);
    if (hi > lo) sum += backend_.sum_squares(grads + (lo - begin), static_cast<size_t>(hi - lo));
  }
  return sum;
}

double ZeroAdamW::clip_grad_norm(double norm, double max_norm) {
  const double factor = optim::clip_factor(norm, max_norm);
  if (factor != 1.0) scale_grads(factor);
  return factor;
}

void ZeroAdamW::scale_grads(double factor) {
  const auto n = static_cast<size_t>(shard_end() - shard_begin());
  if (n > 0) backend_.scale(shard_grads(), static_cast<float>(factor), n);
}

void ZeroAdamW::step(double lr) {
  ++t_;
  const int64_t begin = shard_begin(), end = shard_end();
  float* grads = shard_grads();
  // The slice may start or end inside a parameter: update each parameter's overlap with
  // it, so weight decay follows the parameter and alignment gaps stay untouched.
  for (const model::Param& p : params_.list()) {
    const int64_t a = std::max(begin, p.offset);
    const int64_t b = std::min(end, p.offset + p.numel);
    if (a >= b) continue;
    const float wd = p.weight_decay ? static_cast<float>(options_.weight_decay) : 0.0f;
    const int64_t k = a - begin;
    float* w = master_ != nullptr ? master_ + k : params_.data() + a;
    backend_.adamw(w, grads + k, m_ + k, v_ + k, static_cast<size_t>(b - a), static_cast<float>(lr),
                   static_cast<float>(options_.beta1), static_cast<float>(options_.beta2),
                   static_cast<float>(options_.eps), wd, t_);
  }
  if (dp_.size() == 1 || master_ != nullptr) return;
  const auto shard = static_cast<size_t>(layout_.shard_size);
  const auto owned = static_cast<size_t>(end - begin);
  backend_.copy(send_shard_, params_.data() + begin, owned);
  if (shard > owned) backend_.zero(send_shard_ + owned, shard - owned);
  float* out = layout_.padded() ? padded_ : params_.data();
  timed(shard * sizeof(float), ring_allgather_sent(shard * sizeof(float), dp_.size()),
        [&] { dp_.allgather(send_shard_, out, shard); });
  if (layout_.padded()) backend_.copy(params_.data(), padded_, static_cast<size_t>(layout_.total));
}

optim::OptimizerState ZeroAdamW::save_state() {
  optim::OptimizerState s{t_, state_names(), {}};
  const auto shard = static_cast<size_t>(layout_.shard_size);
  for (const float* moment : {m_, v_}) {
    std::vector<float> whole(static_cast<size_t>(layout_.padded_total()));
    dp_.allgather(moment, whole.data(), shard);
    whole.resize(static_cast<size_t>(layout_.total));
    s.buffers.push_back(std::move(whole));
  }
  return s;
}

void ZeroAdamW::load_state(const optim::OptimizerState& s) {
  optim::check_state(s, state_names(), params_);
  const auto begin = static_cast<size_t>(shard_begin()), end = static_cast<size_t>(shard_end());
  const auto shard = static_cast<size_t>(layout_.shard_size);
  float* moments[2] = {m_, v_};
  for (size_t k = 0; k < 2; ++k) {
    std::fill(moments[k], moments[k] + shard, 0.0f);
    std::copy(s.buffers[k].begin() + static_cast<std::ptrdiff_t>(begin),
              s.buffers[k].begin() + static_cast<std::ptrdiff_t>(end), moments[k]);
  }
  t_ = static_cast<int>(s.step);
}

size_t ZeroAdamW::state_bytes() const {
  return 2 * static_cast<size_t>(layout_.shard_size) * sizeof(float);
}

}  // namespace trainctl::parallel
