#pragma once
// All of a model's parameters live in one flat buffer and their gradients in a second one
// with the same layout, so the optimizer, gradient clipping and data-parallel reductions
// each work on one contiguous range (or on a few large buckets of it) instead of on many
// small tensors. Each Param is a named view into those buffers.
#include <cstdint>
#include <string>
#include <vector>

#include "model/shard.h"
#include "ops/backend.h"
#include "tensor/tensor.h"

namespace trainctl::model {

struct Param {
  std::string name;        // nanoGPT name, e.g. "transformer.h.0.attn.c_attn.weight"
  Shape shape;             // this rank's (local) shape, nanoGPT/nn.Linear layout
  TensorShard shard;       // where it sits in the global tensor (whole when not sharded)
  bool tied_copy = false;  // see ParamSpec::tied_copy
  bool expert = false;     // see ParamSpec::expert
  int64_t offset = 0;      // in floats, into the flat buffers
  int64_t numel = 0;
  Init init = Init::zeros;
  float init_std = 0.0f;
  bool weight_decay = false;  // 2-D weights decay; biases and LayerNorm parameters do not
};

// Floats in the flat buffers of a ParameterSet declaring `specs` (each parameter starts
// on a 64-byte boundary), without allocating anything: what total() will be.
int64_t flat_size(const std::vector<ParamSpec>& specs);
// Where each of `specs` starts in those buffers (floats), in order: what Param::offset
// will be.
std::vector<int64_t> flat_offsets(const std::vector<ParamSpec>& specs);

class ParameterSet {
 public:
  explicit ParameterSet(ops::Backend& backend) : backend_(&backend) {}
  ~ParameterSet();
  ParameterSet(const ParameterSet&) = delete;
  ParameterSet& operator=(const ParameterSet&) = delete;

  // Declaration phase: returns the index of the new parameter.
  size_t declare(std::string name, Shape shape, Init init, float init_std, bool weight_decay);
  // A parameter of a model shard: local shape from spec.shard.
  size_t declare(const ParamSpec& spec);
  // Allocates both flat buffers (zeroed). No declarations after this.
  void allocate();
  // Ends the declarations without allocating: every parameter's storage comes from
  // bind() instead (ZeRO-3 keeps only a shard of the flat buffers, parallel/zero3_params.h).
  // data() and grads() are null then, and so is data(i) / grad(i) until bound.
  void allocate_unbound();
  // Allocates the flat gradient buffer only (zeroed): gradients live there as after
  // allocate(), while each parameter's values come from bind_data() (the mixed-precision
  // layout keeps the model's weights in 16 bits and widens each unit to fp32 around its
  // use; parallel/mixed_params.h). data() is null.
  void allocate_grads_only();
  // The parameters that start inside [begin, end) of the flat layout now live in
  // `data` / `grads` (either may be null), which hold that range of the flat layout:
  // data(i) = data + offset - begin. Only after allocate_unbound().
  void bind(int64_t begin, int64_t end, float* data, float* grads);
  bool bound() const { return data_ == nullptr && !data_at_.empty(); }
  // After allocate_grads_only(): the parameters starting inside [begin, end) read their
  // values from `data`, which holds that range of the flat layout; gradients stay put.
  void bind_data(int64_t begin, int64_t end, float* data);
  // Fills every parameter from its init rule; values depend only on (seed, name, GLOBAL
  // element index), never on the order of declaration or on the process layout: a shard
  // holds exactly its slice of the unsharded model.
  void initialize(uint64_t seed);
  // The same for the parameters starting inside [begin, end) of the flat layout.
  void initialize(uint64_t seed, int64_t begin, int64_t end);

  const std::vector<Param>& list() const { return params_; }
  const Param& at(size_t i) const { return params_.at(i); }
  const Param& find(const std::string& name) const;  // throws if absent
  int64_t total() const { return total_; }

  float* data() const { return data_; }
  float* grads() const { return grads_; }
  float* data(size_t i) const { return data_at_[i]; }
  float* grad(size_t i) const { return grad_at_[i]; }
  Tensor tensor(size_t i) const;  // a borrowed view of parameter i

  void zero_grads();

 private:
  ops::Backend* backend_;
  std::vector<Param> params_;
  int64_t total_ = 0;
  float* data_ = nullptr;
  float* grads_ = nullptr;
  // Where each parameter and its gradient live: inside the flat buffers, or bound.
  std::vector<float*> data_at_, grad_at_;
};

}  // namespace trainctl::model
