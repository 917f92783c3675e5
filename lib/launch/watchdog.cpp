#include "launch/watchdog.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <stdexcept>

namespace trainctl::launch {
namespace {

using comm::CallRecord;
using comm::GroupProgress;
using comm::ProgressSnapshot;

// At most this many ranks outside the stuck group are described, one line each: the
// report must stay readable (and within the launcher's log tail) on large jobs.
constexpr size_t kMaxOtherRanks = 8;

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

int64_t system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string where(const std::optional<ProgressSnapshot>& s) {
  return s ? s->describe() : std::string("no progress report: it never published one");
}

using std::chrono::milliseconds;

bool is_stale(int r, const std::vector<milliseconds>& silent, milliseconds stale_after) {
  return stale_after.count() > 0 && r >= 0 && static_cast<size_t>(r) < silent.size() &&
         silent[static_cast<size_t>(r)] > stale_after;
}

std::string where(int r, const std::optional<ProgressSnapshot>& s,
                  const std::vector<milliseconds>& silent, milliseconds stale_after) {
  if (!s || !is_stale(r, silent, stale_after)) return where(s);
  const double quiet_s = static_cast<double>(silent[static_cast<size_t>(r)].count()) / 1000.0;
  return "STALE: no heartbeat for " + seconds_text(quiet_s) +
         ": the process is stopped (SIGSTOP, a debugger), frozen, or cut off from the "
         "rendezvous store; last known position: " +
         s->describe();
}

// Whether `s` entered collective number `seq` on group `name`.
bool reached(const ProgressSnapshot& s, const std::string& name, int64_t seq) {
  const GroupProgress* g = s.group(name);
  return g != nullptr && g->collectives >= seq;
}

}  // namespace

std::string watchdog_key(int rank) { return "rank" + std::to_string(rank); }

std::string watchdog_report_key(int rank) { return "report" + std::to_string(rank); }

std::string timeout_report(const ProgressSnapshot& self,
                           const std::vector<std::optional<ProgressSnapshot>>& by_rank,
                           milliseconds timeout, const std::vector<milliseconds>& silent,
                           milliseconds stale_after) {
  const GroupProgress* stuck = self.longest_in_flight();
  if (stuck == nullptr)
    return "no communicator call in flight on rank " + std::to_string(self.rank);
  const CallRecord& call = *stuck->in_flight;
  const double limit_s = static_cast<double>(timeout.count()) / 1000.0;
  auto snapshot_of = [&](int r) -> std::optional<ProgressSnapshot> {
    if (r == self.rank) return self;
    if (r < 0 || static_cast<size_t>(r) >= by_rank.size()) return std::nullopt;
    return by_rank[static_cast<size_t>(r)];
  };

  std::string out = GroupProgress::is_collective(call) ? "collective timed out after "
                                                       : "point-to-point call timed out after ";
  out += seconds_text(limit_s) + ": " + comm::describe_call(call, stuck->name);
  if (self.step >= 0) out += " at step " + std::to_string(self.step);
  out += " (rank " + std::to_string(self.rank) + " waited " + seconds_text(call.seconds) + ").";

  if (GroupProgress::is_collective(call)) {
    std::vector<int> yes;
    std::vector<int> no;
    for (int m : stuck->members) {
      auto s = snapshot_of(m);
      (s && reached(*s, stuck->name, call.seq) ? yes : no).push_back(m);
    }
    out += " Reached it: " + (yes.empty() ? std::string("none") : rank_list(yes)) + ".";
    if (no.empty()) {
      out += " Not reached: none; every rank of " + stuck->name +
             " is inside the call, so a peer process or the network is stuck (check the "
             "other ranks' logs and the network between their nodes).";
    } else {
      out += " Not reached: ";
      std::vector<int> stale;
      for (size_t i = 0; i < no.size(); ++i) {
        out += (i ? "; " : "") + std::string("rank ") + std::to_string(no[i]) + " (" +
               where(no[i], snapshot_of(no[i]), silent, stale_after) + ")";
        if (snapshot_of(no[i]) && is_stale(no[i], silent, stale_after)) stale.push_back(no[i]);
      }
      out += ".";
      if (!stale.empty())
        out += " Likely cause: " + rank_list(stale) + ", which stopped reporting.";
    }
  } else {
    const int peer =
        call.peer < static_cast<int>(stuck->members.size()) ? stuck->members[call.peer] : -1;
    out += " Its peer, rank " + std::to_string(peer) + ": " +
           where(peer, snapshot_of(peer), silent, stale_after) + ".";
  }

  // Ranks outside the group: where they are often shows why the group's ranks are.
  size_t listed = 0;
  size_t others = 0;
  std::string lines;
  for (int r = 0; r < static_cast<int>(by_rank.size()); ++r) {
    if (std::find(stuck->members.begin(), stuck->members.end(), r) != stuck->members.end()) {
      continue;
    }
    ++others;
    if (listed < kMaxOtherRanks) {
      lines +=
          "\n  rank " + std::to_string(r) + ": " + where(r, snapshot_of(r), silent, stale_after);
      ++listed;
    }
  }
  if (others > 0) {
    out += "\nRanks outside " + stuck->name + ":" + lines;
    if (others > listed) out += "\n  ... and " + std::to_string(others - listed) + " more";
  }
  return out;
}

Watchdog::Watchdog(std::shared_ptr<const comm::ProgressBoard> board,
                   std::shared_ptr<gloo::rendezvous::Store> store, WatchdogOptions options,
                   Action on_timeout)
    : board_(std::move(board)),
      store_(std::move(store)),
      options_(options),
      on_timeout_(std::move(on_timeout)) {
  if (!board_ || !on_timeout_) throw std::invalid_argument("Watchdog: null board or action");
  if (options_.timeout.count() <= 0 || options_.period.count() <= 0) {
    throw std::invalid_argument("Watchdog: timeout and period must be positive");
  }
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::loop() {
  using std::chrono::milliseconds;
  for (;;) {
    ProgressSnapshot snapshot = board_->snapshot();
    milliseconds next = options_.period;
    if (const GroupProgress* g = snapshot.longest_in_flight()) {
      const auto waited = milliseconds(static_cast<int64_t>(g->in_flight->seconds * 1000.0));
      if (waited >= options_.timeout) {
        fire(snapshot);
        return;
      }
      // Wake up right at the deadline rather than up to a period after it.
      next = std::min(next, options_.timeout - waited + milliseconds(1));
    }
    // A heartbeat even when nothing changed: a rank waiting in a long call looks the same
    // as a stopped one otherwise, and the report tells them apart by the beat's age.
    if (!published_any_ || snapshot.changes != published_changes_ ||
        std::chrono::steady_clock::now() - published_at_ >= options_.period / 2) {
      publish(snapshot);
    }
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, next, [&] { return stop_; })) return;
  }
}

void Watchdog::publish(const ProgressSnapshot& snapshot) {
  if (!store_) return;
  try {
    const std::string text = snapshot.encode();
    store_->set(watchdog_key(board_->rank()), std::vector<char>(text.begin(), text.end()));
    published_changes_ = snapshot.changes;
    published_any_ = true;
    published_at_ = std::chrono::steady_clock::now();
  } catch (const std::exception& e) {
    if (!store_failed_) {
      spdlog::warn(
          "hang watchdog: cannot publish progress to the rendezvous store ({}); timeouts are "
          "still enforced, but reports will not show the other ranks",
          e.what());
      store_failed_ = true;
    }
  }
}

std::vector<std::optional<ProgressSnapshot>> Watchdog::gather(std::vector<milliseconds>& silent) {
  std::vector<std::optional<ProgressSnapshot>> out(static_cast<size_t>(options_.world_size));
  silent.assign(static_cast<size_t>(options_.world_size), milliseconds(0));
  if (!store_ || store_failed_) return out;
  std::vector<std::string> keys;
  for (int r = 0; r < options_.world_size; ++r) keys.push_back(watchdog_key(r));
  bool all_there = true;
  try {
    store_->wait(keys, options_.gather_timeout);
  } catch (const std::exception&) {
    all_there = false;  // some rank never published: read the others one by one
  }
  const int64_t now = system_now_ms();
  for (int r = 0; r < options_.world_size; ++r) {
    try {
      if (!all_there) store_->wait({keys[static_cast<size_t>(r)]}, std::chrono::milliseconds(50));
      std::vector<char> text = store_->get(keys[static_cast<size_t>(r)]);
      const ProgressSnapshot s =
          ProgressSnapshot::decode(std::string_view(text.data(), text.size()));
      silent[static_cast<size_t>(r)] = milliseconds(std::max<int64_t>(now - s.taken_at_ms, 0));
      out[static_cast<size_t>(r)] = s.aged_to(now);
    } catch (const std::exception&) {
      // Absent or unreadable: reported as "no progress report".
    }
  }
  return out;
}

void Watchdog::fire(const ProgressSnapshot& self) {
  publish(self);  // peers firing at the same moment see where this rank is now
  std::vector<milliseconds> silent;
  auto by_rank = gather(silent);
  // Live watchdogs publish at least once per period (they wake every period and beat when
  // half of one has passed); twice that without a beat is a process that is not running.
  const milliseconds stale_after = 2 * options_.period;
  std::string report = timeout_report(self, by_rank, options_.timeout, silent, stale_after);
  if (store_ && !store_failed_) {
    try {
      store_->set(watchdog_report_key(board_->rank()),
                  std::vector<char>(report.begin(), report.end()));
    } catch (const std::exception&) {
      // The launcher then reports this rank's exit and log tail instead.
    }
  }
  fired_ = true;
  on_timeout_(report);
}

}  // namespace trainctl::launch
