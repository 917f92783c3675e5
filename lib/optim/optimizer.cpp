#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace trainctl::optim {

void check_state(const OptimizerState& s, const std::vector<std::string>& names,
                 const model::ParameterSet& params) {
  if (s.names != names || s.buffers.size() != names.size()) {
    throw std::invalid_argument("optimizer state holds other buffers than this optimizer's");
  }
  for (const auto& b : s.buffers) {
    if (static_cast<int64_t>(b.size()) != params.total()) {
      throw std::invalid_argument("optimizer state was saved for another parameter layout");
    }
  }
}

namespace {

// Runs of parameters that share a weight-decay setting are contiguous in the flat
// buffer (a bias sits between two weights), so the update walks parameters, not floats.
class AdamW : public Optimizer {
 public:
  AdamW(const OptimizerOptions& o, model::ParameterSet& p, ops::Backend& b, float* weights)
      : opt_(o), params_(p), backend_(b), w_(weights) {
    const size_t bytes = static_cast<size_t>(p.total()) * sizeof(float);
    m_ = static_cast<float*>(b.alloc(bytes));
    v_ = static_cast<float*>(b.alloc(bytes));
  }
  ~AdamW() override {
    backend_.free(m_);
    backend_.free(v_);
  }
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  void step(double lr) override {
    ++t_;
    for (const model::Param& p : params_.list()) {
      const float wd = p.weight_decay ? static_cast<float>(opt_.weight_decay) : 0.0f;
      backend_.adamw(w_ + p.offset, params_.grads() + p.offset, m_ + p.offset, v_ + p.offset,
                     static_cast<size_t>(p.numel), static_cast<float>(lr),
                     static_cast<float>(opt_.beta1), static_cast<float>(opt_.beta2),
                     static_cast<float>(opt_.eps), wd, t_);
    }
  }
  size_t state_bytes() const override {
    return 2 * static_cast<size_t>(params_.total()) * sizeof(float);
  }
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  OptimizerState save_state() override {
    const auto n = static_cast<size_t>(params_.total());
    return {t_, state_names(), {std::vector<float>(m_, m_ + n), std::vector<float>(v_, v_ + n)}};
  }
  void load_state(const OptimizerState& s) override {
    check_state(s, state_names(), params_);
    std::copy(s.buffers[0].begin(), s.buffers[0].end(), m_);
    std::copy(s.buffers[1].begin(), s.buffers[1].end(), v_);
    t_ = static_cast<int>(s.step);
  }

 private:
  OptimizerOptions opt_;
  model::ParameterSet& params_;
  ops::Backend& backend_;
  float* w_;  // the weights updated (params.data() or the master)
  float* m_ = nullptr;
  float* v_ = nullptr;
  int t_ = 0;
};

// SGD with heavy-ball momentum (beta1) and coupled L2 weight decay, as torch.optim.SGD.
// Runs on host memory: only the CPU backend exists for it.
class Sgd : public Optimizer {
 public:
  Sgd(const OptimizerOptions& o, model::ParameterSet& p, ops::Backend& b, float* weights)
      : opt_(o), params_(p), backend_(b), w_(weights) {
    if (b.device() != Device::cpu) throw std::invalid_argument("sgd: CPU backend only");
    buf_ = static_cast<float*>(b.alloc(static_cast<size_t>(p.total()) * sizeof(float)));
  }
  ~Sgd() override { backend_.free(buf_); }
  Sgd(const Sgd&) = delete;
  Sgd& operator=(const Sgd&) = delete;

  void step(double lr) override {
    const auto mu = static_cast<float>(opt_.beta1);
    for (const model::Param& p : params_.list()) {
      const float wd = p.weight_decay ? static_cast<float>(opt_.weight_decay) : 0.0f;
      float* w = w_ + p.offset;
      const float* g = params_.grads() + p.offset;
      float* buf = buf_ + p.offset;
      for (int64_t i = 0; i < p.numel; ++i) {
        const float d = g[i] + wd * w[i];
        buf[i] = first_ ? d : mu * buf[i] + d;
        w[i] -= static_cast<float>(lr) * buf[i];
      }
    }
    first_ = false;
  }
  size_t state_bytes() const override {
    return static_cast<size_t>(params_.total()) * sizeof(float);
  }
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
  OptimizerState save_state() override {
    const auto n = static_cast<size_t>(params_.total());
    return {first_ ? 0 : 1, state_names(), {std::vector<float>(buf_, buf_ + n)}};
  }
  void load_state(const OptimizerState& s) override {
    check_state(s, state_names(), params_);
    std::copy(s.buffers[0].begin(), s.buffers[0].end(), buf_);
    first_ = s.step == 0;
  }

 private:
  OptimizerOptions opt_;
  model::ParameterSet& params_;
  ops::Backend& backend_;
  float* w_;  // the weights updated (params.data() or the master)
  float* buf_ = nullptr;
  bool first_ = true;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options,
                                          model::ParameterSet& params, ops::Backend& backend,
                                          float* weights) {
  if (weights == nullptr) weights = params.data();
  if (options.type == "adamw") return std::make_unique<AdamW>(options, params, backend, weights);
  if (options.type == "sgd") return std::make_unique<Sgd>(options, params, backend, weights);
  throw std::invalid_argument("unknown optimizer type " + options.type);
}

double grad_norm(const model::ParameterSet& params, ops::Backend& backend) {
  return std::sqrt(backend.sum_squares(params.grads(), static_cast<size_t>(params.total())));
}

double clip_factor(double norm, double max_norm) {
  if (max_norm <= 0 || norm <= max_norm || !std::isfinite(norm)) return 1.0;
  return max_norm / (norm + 1e-6);
}

double clip_grad_norm(model::ParameterSet& params, ops::Backend& backend, double norm,
                      double max_norm) {
  const double factor = clip_factor(norm, max_norm);
  if (factor != 1.0) {
    backend.scale(params.grads(), static_cast<float>(factor), static_cast<size_t>(params.total()));
  }
  return factor;
}

}  // namespace trainctl::optim
