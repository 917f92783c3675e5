#include "comm/progress.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace trainctl::comm {
namespace {

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

int64_t system_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void bad_snapshot(const std::string& why) {
  throw std::invalid_argument("malformed progress snapshot: " + why);
}

void encode_call(std::ostringstream& out, const char* kind, const CallRecord& c) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", c.seconds);
  out << "call " << kind << ' ' << c.op << ' ' << c.seq << ' ' << c.bytes << ' ' << c.peer << ' '
      << seconds << '\n';
}

}  // namespace

std::string describe_call(const CallRecord& call, const std::string& group) {
  std::string out = call.op + " #" + std::to_string(call.seq);
  if (call.peer >= 0) {
    out += (call.op == "recv" ? " from" : " to");
    out += " group rank " + std::to_string(call.peer);
  }
  out += " on " + group + " (" + std::to_string(call.bytes) + " B)";
  return out;
}

// ---- ProgressSnapshot ----

const GroupProgress* ProgressSnapshot::group(std::string_view name) const {
  for (const auto& g : groups) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

const GroupProgress* ProgressSnapshot::longest_in_flight() const {
  const GroupProgress* best = nullptr;
  for (const auto& g : groups) {
    if (g.in_flight && (best == nullptr || g.in_flight->seconds > best->in_flight->seconds)) {
      best = &g;
    }
  }
  return best;
}

ProgressSnapshot ProgressSnapshot::aged_to(int64_t now_ms) const {
  ProgressSnapshot out = *this;
  const double extra = static_cast<double>(std::max<int64_t>(now_ms - taken_at_ms, 0)) / 1000.0;
  for (auto& g : out.groups) {
    if (g.in_flight) g.in_flight->seconds += extra;
    if (g.last_done) g.last_done->seconds += extra;
  }
  out.taken_at_ms = std::max(now_ms, taken_at_ms);
  return out;
}

std::string ProgressSnapshot::describe() const {
  std::string out;
  if (step >= 0) {
    out = "step " + std::to_string(step);
    if (!phase.empty()) out += " (" + phase + ")";
    out += ": ";
  } else if (!phase.empty()) {
    out = "(" + phase + "): ";
  }
  if (const GroupProgress* g = longest_in_flight()) {
    return out + describe_call(*g->in_flight, g->name) + ", waiting " +
           seconds_text(g->in_flight->seconds);
  }
  const GroupProgress* latest = nullptr;
  for (const auto& g : groups) {
    if (g.last_done && (latest == nullptr || g.last_done->seconds < latest->last_done->seconds)) {
      latest = &g;
    }
  }
  if (latest == nullptr) return out + "no communicator call yet";
  return out + "idle for " + seconds_text(latest->last_done->seconds) + " since " +
         describe_call(*latest->last_done, latest->name);
}

std::string ProgressSnapshot::encode() const {
  std::ostringstream out;
  out << "progress 1\nrank " << rank << "\nstep " << step << "\ntaken " << taken_at_ms << "\nphase "
      << phase << '\n';
  for (const auto& g : groups) {
    out << "group " << g.name << ' ' << g.collectives << ' ' << g.p2p << ' ';
    for (size_t i = 0; i < g.members.size(); ++i) out << (i ? "," : "") << g.members[i];
    out << '\n';
    if (g.in_flight) encode_call(out, "in", *g.in_flight);
    if (g.last_done) encode_call(out, "done", *g.last_done);
  }
  return out.str();
}

ProgressSnapshot ProgressSnapshot::decode(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string line;
  if (!std::getline(in, line) || line != "progress 1") bad_snapshot("missing header");
  ProgressSnapshot s;
  bool have_rank = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (key == "rank") {
      have_rank = static_cast<bool>(fields >> s.rank);
    } else if (key == "step") {
      fields >> s.step;
    } else if (key == "taken") {
      fields >> s.taken_at_ms;
    } else if (key == "phase") {
      s.phase = line.size() > 6 ? line.substr(6) : std::string();
      continue;
    } else if (key == "group") {
      GroupProgress g;
      std::string members;
      fields >> g.name >> g.collectives >> g.p2p >> members;
      std::istringstream list(members);
      for (std::string m; std::getline(list, m, ',');) g.members.push_back(std::stoi(m));
      s.groups.push_back(std::move(g));
    } else if (key == "call") {
      if (s.groups.empty()) bad_snapshot("call before any group");
      std::string kind;
      CallRecord c;
      fields >> kind >> c.op >> c.seq >> c.bytes >> c.peer >> c.seconds;
      if (kind == "in") {
        s.groups.back().in_flight = c;
      } else if (kind == "done") {
        s.groups.back().last_done = c;
      } else {
        bad_snapshot("unknown call kind '" + kind + "'");
      }
    } else {
      bad_snapshot("unknown line '" + line + "'");
    }
    if (fields.fail()) bad_snapshot("bad line '" + line + "'");
  }
  if (!have_rank) bad_snapshot("no rank");
  return s;
}

// ---- ProgressBoard ----

ProgressBoard::ProgressBoard(int world_rank) : rank_(world_rank) {}

void ProgressBoard::set_step(int64_t step) {
  std::lock_guard lock(mu_);
  if (step_ != step) ++changes_;
  step_ = step;
}

void ProgressBoard::set_phase(std::string_view phase) {
  std::lock_guard lock(mu_);
  if (phase_ == phase) return;
  ++changes_;
  phase_.assign(phase);
  std::replace(phase_.begin(), phase_.end(), '\n', ' ');  // one line in encode()
}

int ProgressBoard::add_group(std::string name, std::vector<int> members) {
  if (name.empty() || name.find_first_of(" \t\n") != std::string::npos) {
    throw std::invalid_argument("ProgressBoard: group name '" + name +
                                "' must be non-empty without whitespace");
  }
  std::lock_guard lock(mu_);
  ++changes_;
  groups_.push_back(Group{std::move(name), std::move(members), 0, 0, false, false, {}, {}});
  return static_cast<int>(groups_.size()) - 1;
}

ProgressBoard::Group& ProgressBoard::at(int group) {
  if (group < 0 || static_cast<size_t>(group) >= groups_.size()) {
    throw std::out_of_range("ProgressBoard: unknown group id " + std::to_string(group));
  }
  return groups_[static_cast<size_t>(group)];
}

void ProgressBoard::start(Group& g, const char* op, int64_t seq, size_t bytes, int peer) {
  ++changes_;
  g.busy = true;
  g.current = Call{op, seq, bytes, peer, Clock::now()};
}

int64_t ProgressBoard::begin_collective(int group, const char* op, size_t bytes) {
  std::lock_guard lock(mu_);
  Group& g = at(group);
  start(g, op, ++g.collectives, bytes, -1);
  return g.collectives;
}

int64_t ProgressBoard::begin_p2p(int group, const char* op, size_t bytes, int peer) {
  std::lock_guard lock(mu_);
  Group& g = at(group);
  start(g, op, ++g.p2p, bytes, peer);
  return g.p2p;
}

void ProgressBoard::begin_wait(int group, const char* op, size_t bytes, int peer, int64_t seq) {
  std::lock_guard lock(mu_);
  start(at(group), op, seq, bytes, peer);
}

void ProgressBoard::end(int group) {
  const auto now = Clock::now();
  std::lock_guard lock(mu_);
  Group& g = at(group);
  if (!g.busy) return;
  ++changes_;
  g.busy = false;
  g.done_any = true;
  g.last = g.current;
  g.last.at = now;
}

ProgressSnapshot ProgressBoard::snapshot() const {
  ProgressSnapshot s;
  s.rank = rank_;
  s.taken_at_ms = system_now_ms();
  const auto now = Clock::now();
  auto record = [&](const Call& c) {
    const double seconds = std::chrono::duration<double>(now - c.at).count();
    return CallRecord{c.op, c.seq, c.bytes, c.peer, std::max(seconds, 0.0)};
  };
  std::lock_guard lock(mu_);
  s.changes = changes_;
  s.step = step_;
  s.phase = phase_;
  s.groups.reserve(groups_.size());
  for (const Group& g : groups_) {
    GroupProgress p{g.name, g.members, g.collectives, g.p2p, std::nullopt, std::nullopt};
    if (g.busy) p.in_flight = record(g.current);
    if (g.done_any) p.last_done = record(g.last);
    s.groups.push_back(std::move(p));
  }
  return s;
}

}  // namespace trainctl::comm
