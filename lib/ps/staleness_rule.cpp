#include "ps/staleness_rule.h"

#include <stdexcept>
#include <string>

namespace trainctl::ps {

namespace {
void check_worker(int w, int workers) {
  if (w < 0 || w >= workers) {
    throw std::out_of_range("staleness rule: worker " + std::to_string(w) + " of " +
                            std::to_string(workers));
  }
}
}  // namespace

StalenessRule::StalenessRule(int workers, int max_staleness)
    : workers_(workers),
      max_staleness_(max_staleness),
      held_(static_cast<size_t>(workers > 0 ? workers : 0), 0),
      pending_(held_.size(), 0),
      finished_(held_.size(), 0) {
  if (workers < 1) throw std::invalid_argument("staleness rule: needs at least one worker");
  if (max_staleness < 0) throw std::invalid_argument("staleness rule: max_staleness < 0");
}

void StalenessRule::arrive(int w, int64_t computed_on) {
  check_worker(w, workers_);
  const auto i = static_cast<size_t>(w);
  if (pending_[i]) {
    throw std::logic_error("staleness rule: worker " + std::to_string(w) +
                           " sent a gradient while its previous one is still pending");
  }
  if (finished_[i]) {
    throw std::logic_error("staleness rule: worker " + std::to_string(w) +
                           " sent a gradient after it finished");
  }
  if (computed_on > version_) {
    throw std::logic_error("staleness rule: worker " + std::to_string(w) + " computed on version " +
                           std::to_string(computed_on) + ", newer than the server's " +
                           std::to_string(version_));
  }
  held_[i] = computed_on;
  pending_[i] = 1;
}

void StalenessRule::finish(int w) {
  check_worker(w, workers_);
  finished_[static_cast<size_t>(w)] = 1;
}

void StalenessRule::rejoin(int w, int64_t held) {
  check_worker(w, workers_);
  finished_[static_cast<size_t>(w)] = 0;
  held_[static_cast<size_t>(w)] = held;
}

bool StalenessRule::ready() const {
  bool any = false;
  for (size_t j = 0; j < held_.size(); ++j) {
    if (pending_[j]) {
      any = true;
    } else if (!finished_[j] && (version_ + 1) - held_[j] > max_staleness_) {
      return false;  // applying now would leave worker j, still computing, too far behind
    }
  }
  return any;
}

StalenessRule::Applied StalenessRule::apply() {
  if (!ready()) throw std::logic_error("staleness rule: apply() when not ready");
  Applied a;
  for (size_t i = 0; i < held_.size(); ++i) {
    if (!pending_[i]) continue;
    a.workers.push_back(static_cast<int>(i));
    a.staleness.push_back(version_ - held_[i]);
  }
  ++version_;
  for (int w : a.workers) {
    held_[static_cast<size_t>(w)] = version_;
    pending_[static_cast<size_t>(w)] = 0;
  }
  a.version = version_;
  return a;
}

void StalenessRule::reset(int64_t v) {
  version_ = v;
  held_.assign(held_.size(), v);
  pending_.assign(pending_.size(), 0);
  finished_.assign(finished_.size(), 0);
}

bool StalenessRule::pending(int w) const {
  check_worker(w, workers_);
  return pending_[static_cast<size_t>(w)] != 0;
}

std::vector<int> StalenessRule::computing() const {
  std::vector<int> out;
  for (size_t j = 0; j < held_.size(); ++j) {
    if (!pending_[j] && !finished_[j]) out.push_back(static_cast<int>(j));
  }
  return out;
}

}  // namespace trainctl::ps
