#include "comm/shm/shared_counter.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

namespace trainctl::comm::shm {

namespace {

// The futex word is the atomic's own storage (same size, lock-free: see the header).
uint32_t* word(const SharedCounter& c) {
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint32_t>*>(&c.value));
}

bool reached(uint32_t value, uint32_t target) { return static_cast<int32_t>(value - target) >= 0; }

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

void publish(SharedCounter& counter, uint32_t value) {
  counter.value.store(value, std::memory_order_release);
  // Not FUTEX_PRIVATE_FLAG: the waiters are other processes mapping the same page.
  ::syscall(SYS_futex, word(counter), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void wait_until_reaches(const SharedCounter& counter, uint32_t target,
                        std::chrono::milliseconds slice,
                        const std::function<void()>& between_slices) {
  // A short spin catches a peer that is a few microseconds behind without a syscall;
  // longer spinning would steal the core from the compute threads.
  for (int i = 0; i < 256; ++i) {
    if (reached(counter.value.load(std::memory_order_acquire), target)) return;
    cpu_relax();
  }
  const auto ms = slice.count();
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
  for (;;) {
    const uint32_t seen = counter.value.load(std::memory_order_acquire);
    if (reached(seen, target)) return;
    // Sleeps only while the word still equals `seen`: a publish in between is not lost.
    const long rc = ::syscall(SYS_futex, word(counter), FUTEX_WAIT, seen, &ts, nullptr, 0);
    if (rc != 0 && errno == ETIMEDOUT) between_slices();
  }
}

}  // namespace trainctl::comm::shm
