#pragma once
// Whether a parameter server should hold a ready pending set back for a moment, so that
// the gradients of workers as fast as the others join the same update: pure logic over
// times in seconds (no clocks, no sockets), so it is tested on its own.
//
// Why: the staleness rule (ps/staleness_rule.h) lets the server apply a pending set as
// soon as no computing worker would fall more than K updates behind. With workers of
// equal speed whose gradients arrive a few milliseconds apart, that splits every step
// into single-gradient updates, and each gradient is one update stale: on tinyshakespeare
// (dp 2, K = 2, AdamW) that alone cost +0.28 nats after 400 steps, against +0.0 for the
// same per-update batch without staleness. Asynchrony only pays where a worker is really
// slower; so workers about as fast as the fastest are waited for, slower ones are not.
//
// Each worker's compute time is an exponential moving average of the times from a reply
// sent to it to its next gradient's arrival. A computing worker whose average is at most
// kPeerRatio (1.5) times the fastest one's is a peer of the fastest. The server holds the
// pending set while some peer is still computing, until
//     deadline = (the first pending gradient's arrival) + window x (the fastest average);
// then (or once every peer is in) it applies. A slower worker is not waited for: the
// others run ahead of it within K. The wait is bounded by the deadline, so a peer that
// stalls costs at most window x one step. A worker without an average yet (its first
// step) counts as a peer. An arrival-time forecast (wait only for a peer expected by the
// deadline) was tried first: it lost the grouping whenever the arrival jitter exceeded
// the window, as on a loaded machine (15 stale gradients, +0.14 nats); the peer rule
// kept all 800 gradients fresh there.
#include <optional>
#include <span>
#include <vector>

namespace trainctl::ps {

class UpdateGrouping {
 public:
  // `window`: how long a pending set may be held, in multiples of the fastest worker's
  // step (>= 0; 0 never holds, the staleness rule alone decides).
  UpdateGrouping(int workers, double window);

  // A reply (fresh parameters) was sent to worker w at time t: it computes from now.
  void sent(int w, double t);
  // Worker w's gradient arrived at time t: updates its compute-time average.
  void arrived(int w, double t);
  // Forgets w's start time (a checkpoint pause or a goodbye: its next interval would
  // include the pause, and it is not computing meanwhile); its average stays.
  void paused(int w);

  // The time until which to hold a pending set whose first gradient arrived at
  // `first_arrival`, given the workers still computing; nullopt: apply now.
  std::optional<double> hold_until(std::span<const int> computing, double first_arrival,
                                   double now) const;

  // Worker w's compute-time average in seconds (0: none yet).
  double average(int w) const { return average_[static_cast<size_t>(w)]; }

 private:
  double window_;
  std::vector<double> average_;  // 0: no average yet
  std::vector<double> started_;  // time of the last reply; < 0: not computing on one
};

}  // namespace trainctl::ps
