#include "parallel/staging_pool.h"

#include <chrono>
#include <stdexcept>

namespace trainctl::parallel {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void* StagingPool::take(double* idle_s) {
  if (free_.empty()) {
    if (in_flight_.empty()) {
      throw std::logic_error("pipeline: every staging buffer holds a hand-over to another chunk");
    }
    const auto t0 = std::chrono::steady_clock::now();
    in_flight_.front().second->wait();
    *idle_s += seconds_since(t0);
    free_.push_back(in_flight_.front().first);
    in_flight_.pop_front();
  }
  void* buffer = free_.back();
  free_.pop_back();
  return buffer;
}

void StagingPool::sent(void* buffer, std::unique_ptr<comm::PendingSend> send) {
  in_flight_.emplace_back(buffer, std::move(send));
}

void StagingPool::wait_all(double* idle_s) {
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& [buffer, send] : in_flight_) {
    send->wait();
    free_.push_back(buffer);
  }
  in_flight_.clear();
  *idle_s += seconds_since(t0);
}

}  // namespace trainctl::parallel
