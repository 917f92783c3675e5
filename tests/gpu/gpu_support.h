#pragma once
// Helpers for comparing the CUDA backend with the CPU backend: device buffers filled from
// host vectors and read back through Backend::copy (the CUDA backend's copy accepts host
// pointers in either direction and, reading into pageable host memory, returns once the
// data has arrived).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "device/make_backend.h"
#include "ops/backend.h"

namespace trainctl::gpu_test {

// Both backends with the same options (`matmul`: the operand type of matrix products).
struct Backends {
  explicit Backends(DType matmul = DType::fp32)
      : cpu(ops::make_cpu_backend({.threads = 1, .matmul = matmul})),
        cuda(device::make_backend(Device::cuda, {.threads = 1, .matmul = matmul}, 0)) {}
  std::unique_ptr<ops::Backend> cpu;
  std::unique_ptr<ops::Backend> cuda;
};

inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A device buffer of T owned by the CUDA backend.
template <typename T = float>
class DeviceVec {
 public:
  DeviceVec(ops::Backend& be, size_t n) : be_(be), n_(n) {
    p_ = static_cast<T*>(be.alloc(std::max<size_t>(n, 1) * sizeof(T)));
  }
  DeviceVec(ops::Backend& be, const std::vector<T>& host) : DeviceVec(be, host.size()) {
    upload(host);
  }
  ~DeviceVec() { be_.free(p_); }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;

  T* get() const { return p_; }
  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() == n_);
    if (n_ > 0)
      be_.copy(reinterpret_cast<float*>(p_), reinterpret_cast<const float*>(host.data()),
               n_ * sizeof(T) / sizeof(float));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_ > 0)
      be_.copy(reinterpret_cast<float*>(host.data()), reinterpret_cast<const float*>(p_),
               n_ * sizeof(T) / sizeof(float));
    return host;
  }

 private:
  ops::Backend& be_;
  size_t n_;
  T* p_ = nullptr;
};

// |got - want| <= atol + rtol |want| for every element; reports the worst one.
inline void check_close(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                        double atol, const std::string& what) {
  REQUIRE(got.size() == want.size());
  double worst = 0.0;
  size_t worst_i = 0;
  bool ok = true;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double allowed = atol + rtol * std::fabs(static_cast<double>(want[i]));
    if (!(err <= allowed)) ok = false;  // NaN fails too
    const double excess = err / allowed;
    if (!(excess <= worst)) {
      worst = excess;
      worst_i = i;
    }
  }
  INFO(what << ": worst element " << worst_i << " got " << got[worst_i] << " want " << want[worst_i]
            << " (error / allowed = " << worst << ", rtol " << rtol << ", atol " << atol << ")");
  CHECK(ok);
}

// |got - want| <= rel * max |want| for every element: errors measured against the
// magnitude of the whole result (sums of products with cancellation have elements near
// zero whose own relative error means nothing).
inline void check_close_to_scale(const std::vector<float>& got, const std::vector<float>& want,
                                 double rel, const std::string& what) {
  double scale = 0.0;
  for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  check_close(got, want, 0.0, rel * scale, what + " (scale " + std::to_string(scale) + ")");
}

}  // namespace trainctl::gpu_test
