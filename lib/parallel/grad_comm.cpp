#include "parallel/grad_comm.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "parallel/comm_stats.h"

namespace trainctl::parallel {

std::string_view to_string(GradCommDType dtype) {
  return dtype == GradCommDType::bf16 ? "bf16" : "fp32";
}

GradCommDType parse_grad_comm_dtype(std::string_view name) {
  if (name == "fp32") return GradCommDType::fp32;
  if (name == "bf16") return GradCommDType::bf16;
  throw std::invalid_argument("unknown gradient communication type '" + std::string(name) +
                              "' (expected fp32 or bf16)");
}

uint16_t to_bf16(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  // A NaN must stay a NaN: rounding could carry its payload into the exponent (inf).
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x = 0;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

double bf16_sum_error_bound(int ranks) {
  const double bf16_unit = 1.0 / 256.0;       // 2^-8: 8 significant bits
  const double fp32_unit = 1.0 / 16777216.0;  // 2^-24
  // Recursive fp32 summation of the rounded terms adds at most (ranks-1) fp32 units of
  // their absolute sum, which is at most (1 + 2^-8) times the original one; 1% slack
  // covers the second-order terms.
  return bf16_unit + (ranks - 1) * fp32_unit * (1.0 + bf16_unit) * 1.01;
}

size_t GradReducer::sent_bytes(size_t count) const {
  if (dtype_ == GradCommDType::bf16) {
    return ring_allgather_sent(2 * ((count + 1) / 2) * sizeof(uint16_t), comm_.size());
  }
  return ring_allreduce_sent(count * sizeof(float), comm_.size());
}

void GradReducer::allreduce_sum(float* data, size_t count) {
  if (comm_.size() == 1 || count == 0) return;
  if (dtype_ == GradCommDType::bf16) {
    allreduce_bf16(data, count);
  } else {
    comm_.allreduce(data, count, comm::ReduceOp::sum);
  }
}

void GradReducer::allreduce_bf16(float* data, size_t count) {
  const auto ranks = static_cast<size_t>(comm_.size());
  // The communicator moves floats; two bf16 values travel in each (bytes are not
  // interpreted on the way, only copied).
  const size_t floats = (count + 1) / 2;
  const size_t halves = 2 * floats;
  send_.resize(halves);
  all_.resize(halves * ranks);
  for (size_t i = 0; i < count; ++i) send_[i] = to_bf16(data[i]);
  if (halves > count) send_[count] = 0;
  comm_.allgather(reinterpret_cast<const float*>(send_.data()),
                  reinterpret_cast<float*>(all_.data()), floats);
  // Rank order on every rank: identical results everywhere.
  const uint16_t* first = all_.data();
  for (size_t i = 0; i < count; ++i) data[i] = from_bf16(first[i]);
  for (size_t r = 1; r < ranks; ++r) {
    const uint16_t* contrib = all_.data() + r * halves;
    for (size_t i = 0; i < count; ++i) data[i] += from_bf16(contrib[i]);
  }
}

}  // namespace trainctl::parallel
