#pragma once
// A small tensor: shape, dtype, device and storage that is either owned (shared, 64-byte
// aligned, zero-initialised) or borrowed (a view into someone else's memory, e.g. one
// parameter inside the flat parameter buffer). No autograd, no strides: contiguous only.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/dtype.h"

namespace trainctl {

using Shape = std::vector<int64_t>;
int64_t numel_of(const Shape& s);
std::string shape_string(const Shape& s);  // "[768, 256]"

class Tensor {
 public:
  Tensor() = default;
  // Owned, zero-filled CPU storage.
  static Tensor zeros(Shape shape, DType dtype = DType::fp32);
  // A view of memory owned elsewhere; the caller keeps it alive.
  static Tensor borrow(void* data, Shape shape, DType dtype = DType::fp32,
                       Device device = Device::cpu);

  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_of(shape_); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool defined() const { return data_ != nullptr; }
  bool owns_storage() const { return storage_ != nullptr; }

  void* raw() const { return data_; }
  float* f32() const;  // checked: dtype must be fp32
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_);
  }

 private:
  Shape shape_;
  DType dtype_ = DType::fp32;
  Device device_ = Device::cpu;
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
};

}  // namespace trainctl
