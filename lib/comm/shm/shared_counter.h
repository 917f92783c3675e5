#pragma once
// A 32-bit counter that lives in shared memory and that other processes can sleep on
// until it reaches a value (a futex shared between processes: std::atomic::wait uses
// process-private futexes, which never wake a waiter in another process).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

namespace trainctl::comm::shm {

// Alone on its cache line, so spinning on one counter does not slow writes to another.
struct alignas(64) SharedCounter {
  std::atomic<uint32_t> value{0};
};
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// Stores `value` (release: writes before it are visible to whoever sees it) and wakes
// every process sleeping on the counter.
void publish(SharedCounter& counter, uint32_t value);

// Returns once `counter` has reached `target` (modulo 2^32: counters wrap). Spins a
// little, then sleeps on the futex in slices of `slice`; after each slice it calls
// `between_slices`, which throws to give up (peer gone, deadline passed).
void wait_until_reaches(const SharedCounter& counter, uint32_t target,
                        std::chrono::milliseconds slice,
                        const std::function<void()>& between_slices);

}  // namespace trainctl::comm::shm
