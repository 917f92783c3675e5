#include "tensor/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace trainctl {

namespace {
// Cache-line alignment: vector loads never straddle lines and two tensors never share one.
constexpr size_t kAlignment = 64;
}  // namespace

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) {
      throw std::invalid_argument("tensor shape " + shape_string(s) + " has a negative dimension");
    }
    n *= d;
  }
  return n;
}

std::string shape_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t;
  const size_t bytes = static_cast<size_t>(numel_of(shape)) * dtype_size(dtype);
  // Round up so aligned_alloc's size rule holds; never 0 bytes so an empty tensor is
  // still `defined()`.
  const size_t padded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  void* p = std::aligned_alloc(kAlignment, padded);
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  std::memset(p, 0, padded);
  t.storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = p;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = Device::cpu;
  return t;
}

Tensor Tensor::borrow(void* data, Shape shape, DType dtype, Device device) {
  numel_of(shape);  // validates the shape
  Tensor t;
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

float* Tensor::f32() const {
  if (dtype_ != DType::fp32) {
    throw std::runtime_error(std::string("tensor ") + shape_string(shape_) + " is " +
                             dtype_name(dtype_) + ", expected fp32");
  }
  return static_cast<float*>(data_);
}

}  // namespace trainctl
