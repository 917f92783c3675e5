#include "model/parameters.h"

#include <stdexcept>

#include "util/random.h"

namespace trainctl::model {

namespace {
// Keep every parameter 64-byte aligned inside the flat buffer (whole cache lines, and
// aligned vector loads in the kernels).
constexpr int64_t kAlignFloats = 16;
int64_t align_up(int64_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }
}  // namespace

int64_t flat_size(const std::vector<ParamSpec>& specs) {
  int64_t total = 0;
  for (const ParamSpec& spec : specs) total = align_up(total + numel_of(spec.shard.local_shape()));
  return total;
}

std::vector<int64_t> flat_offsets(const std::vector<ParamSpec>& specs) {
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const ParamSpec& spec : specs) {
    offsets.push_back(total);
    total = align_up(total + numel_of(spec.shard.local_shape()));
  }
  return offsets;
}

ParameterSet::~ParameterSet() {
  if (data_) backend_->free(data_);
  if (grads_) backend_->free(grads_);
}

size_t ParameterSet::declare(std::string name, Shape shape, Init init, float init_std,
                             bool weight_decay) {
  ParamSpec spec;
  spec.name = std::move(name);
  spec.shard.global_shape = std::move(shape);
  spec.init = init;
  spec.init_std = init_std;
  spec.weight_decay = weight_decay;
  return declare(spec);
}

size_t ParameterSet::declare(const ParamSpec& spec) {
  if (data_ || !data_at_.empty())
    throw std::logic_error("ParameterSet: declare() after allocate()");
  Param p;
  p.name = spec.name;
  p.shape = spec.shard.local_shape();
  p.shard = spec.shard;
  p.tied_copy = spec.tied_copy;
  p.expert = spec.expert;
  p.numel = numel_of(p.shape);
  p.offset = total_;
  p.init = spec.init;
  p.init_std = spec.init_std;
  p.weight_decay = spec.weight_decay;
  total_ = align_up(total_ + p.numel);
  params_.push_back(std::move(p));
  return params_.size() - 1;
}

void ParameterSet::allocate() {
  if (data_) return;
  const size_t bytes = static_cast<size_t>(total_) * sizeof(float);
  data_ = static_cast<float*>(backend_->alloc(bytes));
  grads_ = static_cast<float*>(backend_->alloc(bytes));
  data_at_.clear();
  grad_at_.clear();
  for (const Param& p : params_) {
    data_at_.push_back(data_ + p.offset);
    grad_at_.push_back(grads_ + p.offset);
  }
}

void ParameterSet::allocate_unbound() {
  if (data_) throw std::logic_error("ParameterSet: allocate_unbound() after allocate()");
  data_at_.assign(params_.size(), nullptr);
  grad_at_.assign(params_.size(), nullptr);
}

void ParameterSet::allocate_grads_only() {
  if (data_ || grads_) throw std::logic_error("ParameterSet: allocate_grads_only() twice");
  grads_ = static_cast<float*>(backend_->alloc(static_cast<size_t>(total_) * sizeof(float)));
  data_at_.assign(params_.size(), nullptr);
  grad_at_.clear();
  for (const Param& p : params_) grad_at_.push_back(grads_ + p.offset);
}

void ParameterSet::bind_data(int64_t begin, int64_t end, float* data) {
  if (!bound() || grads_ == nullptr) {
    throw std::logic_error("ParameterSet: bind_data() needs allocate_grads_only()");
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t offset = params_[i].offset;
    if (offset >= begin && offset < end) data_at_[i] = data + (offset - begin);
  }
}

void ParameterSet::bind(int64_t begin, int64_t end, float* data, float* grads) {
  if (!bound()) throw std::logic_error("ParameterSet: bind() needs allocate_unbound()");
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t offset = params_[i].offset;
    if (offset < begin || offset >= end) continue;
    data_at_[i] = data ? data + (offset - begin) : nullptr;
    grad_at_[i] = grads ? grads + (offset - begin) : nullptr;
  }
}

void ParameterSet::initialize(uint64_t seed) { initialize(seed, 0, total_); }

void ParameterSet::initialize(uint64_t seed, int64_t begin, int64_t end) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const Param& p = params_[i];
    if (p.offset < begin || p.offset >= end) continue;
    float* w = data(i);
    switch (p.init) {
      case Init::zeros:
        backend_->zero(w, static_cast<size_t>(p.numel));
        break;
      case Init::ones:
        for (int64_t k = 0; k < p.numel; ++k) w[k] = 1.0f;
        break;
      case Init::normal: {
        const uint64_t stream = rng::hash(seed, rng::hash_name(p.name));
        for (int64_t k = 0; k < p.numel; ++k) {
          const int64_t g = p.shard.global_index(k);
          w[k] = static_cast<float>(p.init_std * rng::normal(stream, static_cast<uint64_t>(g)));
        }
        break;
      }
    }
  }
}

const Param& ParameterSet::find(const std::string& name) const {
  for (const Param& p : params_) {
    if (p.name == name) return p;
  }
  throw std::out_of_range("no parameter named " + name);
}

Tensor ParameterSet::tensor(size_t i) const {
  return Tensor::borrow(data(i), params_.at(i).shape, DType::fp32, backend_->device());
}

void ParameterSet::zero_grads() {
  // Bound storage (ZeRO-3) is zeroed by its owner.
  if (grads_) backend_->zero(grads_, static_cast<size_t>(total_));
}

}  // namespace trainctl::model
