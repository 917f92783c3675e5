#pragma once
// Whether a parameter server should hold a ready pending set back for a moment, so that
// the gradients of workers about to arrive join the same update: pure logic over times
// in seconds (no clocks, no sockets), so it is tested on its own.
//
// Why: the staleness rule (ps/staleness_rule.h) lets the server apply a pending set as
// soon as no computing worker would fall more than K updates behind. With workers of
// equal speed whose gradients arrive a few milliseconds apart, that splits every step
// into single-gradient updates, and each gradient is one update stale: on tinyshakespeare
// (dp 2, K = 2, AdamW) that alone cost +0.28 nats after 400 steps, against +0.0 for the
// same per-update batch without staleness. Asynchrony only pays where a worker is really
// slower; so a worker expected within a fraction of a step is waited for, one that is
// not is not.
//
// The forecast: worker w's compute time is an exponential moving average of the times
// from a reply sent to it to its next gradient's arrival; it is expected back at the last
// reply's time plus that average. The server holds the pending set until
//     deadline = (the first pending gradient's arrival) + window x (the fastest average)
// when some computing worker is expected by then; otherwise (or once every computing
// worker is in, or the deadline has passed) it applies. The wait is bounded by the
// deadline, so a late forecast costs at most window x one step; a worker without an
// average yet (its first step) is taken to be as fast as the fastest.
#include <optional>
#include <span>
#include <vector>

namespace trainctl::ps {

class UpdateGrouping {
 public:
  // `window`: the fraction of the fastest worker's step a pending set may be held (>= 0;
  // 0 never holds, the staleness rule alone decides).
  UpdateGrouping(int workers, double window);

  // A reply (fresh parameters) was sent to worker w at time t: it computes from now.
  void sent(int w, double t);
  // Worker w's gradient arrived at time t: updates its compute-time average.
  void arrived(int w, double t);
  // Forgets w's start time (a checkpoint pause or a goodbye: its next interval would
  // include the pause); its average stays.
  void paused(int w);

  // The time until which to hold a pending set whose first gradient arrived at
  // `first_arrival`, given the workers still computing; nullopt: apply now.
  std::optional<double> hold_until(std::span<const int> computing, double first_arrival,
                                   double now) const;

  // Worker w's compute-time average in seconds (0: none yet).
  double average(int w) const { return average_[static_cast<size_t>(w)]; }

 private:
  double window_;
  std::vector<double> average_;  // 0: no forecast yet
  std::vector<double> started_;  // time of the last reply; < 0: unknown
};

}  // namespace trainctl::ps
