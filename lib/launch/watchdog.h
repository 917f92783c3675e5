#pragma once
// The hang watchdog: a background thread per worker that turns a stuck communicator call
// into a clear error instead of an indefinite hang (runtime.comm_timeout_s).
//
// Every `period` it takes this rank's ProgressBoard snapshot and publishes it to the
// rendezvous store under "rank<R>" when anything changed or a period has passed since the
// last one (a heartbeat: one small set per period at most; nothing per collective). When a call on
// this rank has been in flight for `timeout`, it publishes once more, reads every rank's latest
// snapshot, and hands on_timeout a report naming the call, the step, which ranks of the group
// reached it and where the others are, e.g.
//   collective timed out after 30 s: allreduce #431 on dp[0] (4096 B) at step 12.
//   Reached it: ranks 0, 2, 3. Not reached: rank 1 (step 12: idle for 31.0 s since
//   allreduce #430 on dp[0] (4096 B)).
// It fires once; the worker's action logs the report and exits (the worker wiring sets
// Gloo's own timeout a little later, so this report comes before Gloo's terse error).
#include <gloo/rendezvous/store.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/progress.h"

namespace trainctl::launch {

struct WatchdogOptions {
  // A call in flight this long fires the watchdog (runtime.comm_timeout_s).
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // How often the board is checked and published.
  std::chrono::milliseconds period{std::chrono::seconds(1)};
  // When firing: how long to wait for the other ranks' snapshots in the store (a rank
  // that never published, e.g. one that died at startup, is reported as "no report").
  std::chrono::milliseconds gather_timeout{std::chrono::seconds(2)};
  int world_size = 1;
};

// The report for a call stuck on `self` (already aged to now): `self.longest_in_flight()`
// is the stuck call. `by_rank[r]` is rank r's latest snapshot aged to now, or nullopt
// when it has none; self's own entry is ignored (self is used). `silent[r]`, when given,
// is how long ago rank r last published (every live watchdog publishes at least once per
// period, a heartbeat): beyond `stale_after` (> 0) its position is marked stale, since a
// process that stopped publishing is stopped (SIGSTOP, a debugger), frozen or cut off,
// and is named as the likely cause, e.g.
//   Not reached: rank 1 (STALE: no heartbeat for 3.9 s: the process is stopped (SIGSTOP,
//   a debugger), frozen, or cut off from the rendezvous store; last known position: step
//   1355: idle for 3.9 s since allreduce #1355 on world (20 B)). Likely cause: rank 1,
//   which stopped reporting.
std::string timeout_report(const comm::ProgressSnapshot& self,
                           const std::vector<std::optional<comm::ProgressSnapshot>>& by_rank,
                           std::chrono::milliseconds timeout,
                           const std::vector<std::chrono::milliseconds>& silent = {},
                           std::chrono::milliseconds stale_after = {});

// The key (within the watchdog's store) under which the watchdog of `rank` leaves its
// report when it fires: the launcher prints it as the reason the job stopped.
std::string watchdog_report_key(int rank);

// The store key a rank publishes its snapshot under (within the store given below).
std::string watchdog_key(int rank);

class Watchdog {
 public:
  using Action = std::function<void(const std::string& report)>;

  // Starts the thread. `store` (shared by all ranks, already prefixed per attempt, and
  // safe to use from this thread: give it its own store connection) may be null: then
  // nothing is published and reports describe this rank only. Store errors are logged
  // once and never stop the timeout check.
  Watchdog(std::shared_ptr<const comm::ProgressBoard> board,
           std::shared_ptr<gloo::rendezvous::Store> store, WatchdogOptions options,
           Action on_timeout);
  // Stops the thread (without firing).
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // True once on_timeout has been called.
  bool fired() const { return fired_.load(); }

 private:
  void loop();
  void publish(const comm::ProgressSnapshot& snapshot);
  void fire(const comm::ProgressSnapshot& self);
  // Every rank's latest snapshot aged to now, and how long ago each was published.
  std::vector<std::optional<comm::ProgressSnapshot>> gather(
      std::vector<std::chrono::milliseconds>& silent);

  std::shared_ptr<const comm::ProgressBoard> board_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
  WatchdogOptions options_;
  Action on_timeout_;

  // Watchdog thread only.
  bool store_failed_ = false;  // an error was logged already
  uint64_t published_changes_ = 0;
  bool published_any_ = false;
  std::chrono::steady_clock::time_point published_at_{};  // the heartbeat's last beat

  std::atomic<bool> fired_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // under mu_

  std::thread thread_;  // last: started once everything above exists
};

}  // namespace trainctl::launch
