#pragma once
// Keeps a warning that strangers can trigger at will (a port scanner or a misconfigured
// job knocking at the rendezvous store with the wrong token) from flooding the launcher's
// log: the first occurrence is logged at once, later ones at most once per interval, each
// carrying how many were held back since the last line. Time is passed in, so the policy
// is tested without waiting.
#include <chrono>
#include <cstdint>
#include <optional>

namespace trainctl::launch {

class RepeatLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RepeatLimiter(Clock::duration interval) : interval_(interval) {}

  // One more occurrence at `now`. Returns nullopt when it must not be logged, else the
  // number of occurrences held back since the last logged one (0 for the first).
  std::optional<uint64_t> admit(Clock::time_point now) {
    if (logged_any_ && now - last_logged_ < interval_) {
      ++held_back_;
      return std::nullopt;
    }
    return take(now);
  }
  // Called periodically: once the interval has passed, the occurrences still held back
  // (to log as a summary line); nullopt when there are none or it is too early.
  std::optional<uint64_t> overdue(Clock::time_point now) {
    if (held_back_ == 0 || now - last_logged_ < interval_) return std::nullopt;
    return take(now);
  }

 private:
  uint64_t take(Clock::time_point now) {
    const uint64_t n = held_back_;
    held_back_ = 0;
    last_logged_ = now;
    logged_any_ = true;
    return n;
  }

  Clock::duration interval_;
  Clock::time_point last_logged_{};
  bool logged_any_ = false;
  uint64_t held_back_ = 0;
};

}  // namespace trainctl::launch
