#pragma once
// When a parameter server applies the gradients it has received: the bounded-staleness
// rule, as pure logic (no sockets, no tensors) so it is tested on its own.
//
// The server's version V counts its updates. Worker i computed its pending gradient on
// the parameters of version v_i (the version its last reply carried). The received but
// not yet applied gradients form the pending set P; the workers still computing (not in
// P, not finished) form O. The server applies all of P as ONE update (the mean of the
// gradients) as soon as
//     P is not empty, and for every worker j in O:  (V + 1) - v_j <= K      (K = max_staleness)
// i.e. as soon as applying it cannot leave a worker that is still computing more than K
// updates behind when its own gradient arrives. The staleness of a gradient applied at
// version V is V - v_i (<= K always).
//
// K = 0 is synchronous data parallelism: nothing is applied until every worker's gradient
// is in, and then all of them together, in one averaged update per step. K >= 1 lets fast
// workers' gradients be applied alone (each its own update) while a slow worker computes,
// until the slow one would fall K updates behind: then the fast ones wait for it.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainctl::ps {

class StalenessRule {
 public:
  StalenessRule(int workers, int max_staleness);

  // Worker `w` delivered a gradient computed on version `computed_on`. It must not already
  // be pending.
  void arrive(int w, int64_t computed_on);
  // Worker `w` will send no more gradients (it is no longer waited for).
  void finish(int w);
  // A finished worker `w` (paused for a checkpoint) computes again, on version `held`.
  void rejoin(int w, int64_t held);
  bool finished(int w) const { return finished_[static_cast<std::size_t>(w)] != 0; }
  // Whether the pending set may be applied now.
  bool ready() const;
  // The pending workers, in increasing worker order (the order their gradients are summed
  // in, so the sum is the same whatever the arrival order), and their staleness; then
  // V += 1, P is emptied, and each of them now holds version V. Only when ready().
  struct Applied {
    std::vector<int> workers;
    std::vector<int64_t> staleness;
    int64_t version = 0;  // V after the update
  };
  Applied apply();

  int64_t version() const { return version_; }
  // Starts from version `v` (a resume): every worker holds it.
  void reset(int64_t v);
  bool pending(int w) const;
  // The workers still computing (neither pending nor finished), in increasing order.
  std::vector<int> computing() const;

 private:
  int workers_;
  int max_staleness_;
  int64_t version_ = 0;
  std::vector<int64_t> held_;   // v_i
  std::vector<char> pending_;   // in P
  std::vector<char> finished_;  // neither in P nor in O
};

}  // namespace trainctl::ps
