#include "comm/watched_communicator.h"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "comm/rank_coords.h"

namespace trainctl::comm {
namespace {

// Ends the board's record of a call when the call returns or throws.
class CallScope {
 public:
  CallScope(ProgressBoard& board, int group) : board_(board), group_(group) {}
  ~CallScope() { board_.end(group_); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  ProgressBoard& board_;
  int group_;
};

// A communicator call's timeline fields.
observe::TraceFields call_fields(const std::string& group, size_t bytes, int peer = -1) {
  observe::TraceFields f;
  f.group = group;
  f.bytes = static_cast<int64_t>(bytes);
  f.peer = peer;
  return f;
}

class WatchedPendingSend final : public PendingSend {
 public:
  WatchedPendingSend(std::unique_ptr<PendingSend> inner, std::shared_ptr<ProgressBoard> board,
                     int group, size_t bytes, int peer, int64_t seq, observe::TraceRecorder* trace,
                     const std::string& group_name)
      : inner_(std::move(inner)),
        board_(std::move(board)),
        group_(group),
        bytes_(bytes),
        peer_(peer),
        seq_(seq),
        trace_(trace),
        group_name_(group_name) {}
  // The wrapped request's destructor waits for an unwaited send: record that wait too.
  ~WatchedPendingSend() override {
    if (waited_) return;
    board_->begin_wait(group_, "isend.wait", bytes_, peer_, seq_);
    CallScope scope(*board_, group_);
    observe::TraceScope trace(trace_, "isend.wait", "comm",
                              call_fields(group_name_, bytes_, peer_));
    inner_.reset();
  }
  WatchedPendingSend(const WatchedPendingSend&) = delete;
  WatchedPendingSend& operator=(const WatchedPendingSend&) = delete;

  void wait() override {
    board_->begin_wait(group_, "isend.wait", bytes_, peer_, seq_);
    CallScope scope(*board_, group_);
    observe::TraceScope trace(trace_, "isend.wait", "comm",
                              call_fields(group_name_, bytes_, peer_));
    inner_->wait();
    waited_ = true;
  }

 private:
  std::unique_ptr<PendingSend> inner_;
  std::shared_ptr<ProgressBoard> board_;
  int group_;
  size_t bytes_;
  int peer_;
  int64_t seq_;
  observe::TraceRecorder* trace_;
  const std::string& group_name_;  // the communicator's name (outlives its sends)
  bool waited_ = false;
};

constexpr size_t kFloat = sizeof(float);

int64_t parse_int(std::string_view field, std::string_view value) {
  int64_t out = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size() || out < 0) {
    throw std::invalid_argument("stall hook: " + std::string(field) + "='" + std::string(value) +
                                "' is not a non-negative integer");
  }
  return out;
}

}  // namespace

bool StallHook::matches_group(const std::string& name) const {
  return name == group || (name.size() > group.size() &&
                           name.compare(0, group.size(), group) == 0 && name[group.size()] == '[');
}

std::optional<StallHook> parse_stall_hook(std::string_view spec, int world_rank) {
  StallHook hook;
  int64_t rank = -1;
  bool have_seconds = false;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw std::invalid_argument("stall hook: '" + std::string(item) + "' is not key=value");
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    if (key == "rank") {
      rank = parse_int(key, value);
    } else if (key == "group") {
      hook.group = value;
    } else if (key == "op") {
      hook.op = value;
    } else if (key == "call") {
      hook.call = parse_int(key, value);
    } else if (key == "seconds") {
      char* end = nullptr;
      const std::string text(value);
      const double s = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(s) || s < 0) {
        throw std::invalid_argument("stall hook: seconds='" + text + "' is not a duration");
      }
      hook.duration = std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0));
      have_seconds = true;
    } else {
      throw std::invalid_argument("stall hook: unknown key '" + std::string(key) +
                                  "' (expected rank, group, op, call, seconds)");
    }
  }
  if (rank < 0 || hook.group.empty() || hook.op.empty() || !have_seconds || hook.call < 1) {
    throw std::invalid_argument(
        "stall hook needs rank=, group=, op=, seconds= and call >= 1, e.g. "
        "'rank=1,group=dp,op=allreduce,call=5,seconds=600'");
  }
  if (rank != world_rank) return std::nullopt;
  return hook;
}

WatchedCommunicator::WatchedCommunicator(std::unique_ptr<Communicator> inner,
                                         std::shared_ptr<ProgressBoard> board,
                                         std::vector<int> world_ranks,
                                         std::optional<StallHook> stall)
    : inner_(std::move(inner)), board_(std::move(board)) {
  if (!inner_ || !board_) throw std::invalid_argument("WatchedCommunicator: null argument");
  if (world_ranks.size() != static_cast<size_t>(inner_->size())) {
    throw std::invalid_argument("WatchedCommunicator: " + std::to_string(world_ranks.size()) +
                                " world ranks for group " + inner_->name() + " of size " +
                                std::to_string(inner_->size()));
  }
  group_id_ = board_->add_group(inner_->name(), std::move(world_ranks));
  if (stall && stall->matches_group(inner_->name())) stall_ = std::move(stall);
}

void WatchedCommunicator::maybe_stall(const char* op) {
  if (!stall_ || stall_->op != op || ++stall_op_calls_ != stall_->call) return;
  const auto until = std::chrono::steady_clock::now() + stall_->duration;
  while (std::chrono::steady_clock::now() < until) {
    if (stall_->interrupted && stall_->interrupted()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void WatchedCommunicator::allreduce(float* data, size_t count, ReduceOp op) {
  maybe_stall("allreduce");
  board_->begin_collective(group_id_, "allreduce", count * kFloat);
  CallScope scope(*board_, group_id_);
  observe::TraceScope trace(trace_, "allreduce", "comm", call_fields(name(), count * kFloat));
  inner_->allreduce(data, count, op);
}

void WatchedCommunicator::reduce_scatter(const float* in, float* out, size_t count) {
  maybe_stall("reduce_scatter");
  board_->begin_collective(group_id_, "reduce_scatter",
                           count * static_cast<size_t>(size()) * kFloat);
  CallScope scope(*board_, group_id_);
  observe::TraceScope trace(trace_, "reduce_scatter", "comm",
                            call_fields(name(), count * static_cast<size_t>(size()) * kFloat));
  inner_->reduce_scatter(in, out, count);
}

void WatchedCommunicator::allgather(const float* in, float* out, size_t count) {
  maybe_stall("allgather");
  board_->begin_collective(group_id_, "allgather", count * kFloat);
  CallScope scope(*board_, group_id_);
  observe::TraceScope trace(trace_, "allgather", "comm", call_fields(name(), count * kFloat));
  inner_->allgather(in, out, count);
}

void WatchedCommunicator::broadcast(float* data, size_t count, int root) {
  maybe_stall("broadcast");
  board_->begin_collective(group_id_, "broadcast", count * kFloat);
  CallScope scope(*board_, group_id_);
  observe::TraceScope trace(trace_, "broadcast", "comm", call_fields(name(), count * kFloat, root));
  inner_->broadcast(data, count, root);
}

void WatchedCommunicator::send(const void* data, size_t bytes, int dst, uint32_t tag) {
  maybe_stall("send");
  board_->begin_p2p(group_id_, "send", bytes, dst);
  CallScope scope(*board_, group_id_);
  observe::TraceScope trace(trace_, "send", "comm", call_fields(name(), bytes, dst));
  inner_->send(data, bytes, dst, tag);
}

void WatchedCommunicator::recv(void* data, size_t bytes, int src, uint32_t tag) {
  maybe_stall("recv");
  board_->begin_p2p(group_id_, "recv", bytes, src);
  CallScope scope(*board_, group_id_);
  observe::TraceScope trace(trace_, "recv", "comm", call_fields(name(), bytes, src));
  inner_->recv(data, bytes, src, tag);
}

std::unique_ptr<PendingSend> WatchedCommunicator::isend(const void* data, size_t bytes, int dst,
                                                        uint32_t tag) {
  maybe_stall("isend");
  int64_t seq = board_->begin_p2p(group_id_, "isend", bytes, dst);
  std::unique_ptr<PendingSend> pending;
  {
    CallScope scope(*board_, group_id_);
    observe::TraceScope trace(trace_, "isend", "comm", call_fields(name(), bytes, dst));
    pending = inner_->isend(data, bytes, dst, tag);
  }
  return std::make_unique<WatchedPendingSend>(std::move(pending), board_, group_id_, bytes, dst,
                                              seq, trace_, name());
}

void WatchedCommunicator::barrier() {
  maybe_stall("barrier");
  board_->begin_collective(group_id_, "barrier", 0);
  CallScope scope(*board_, group_id_);
  observe::TraceScope trace(trace_, "barrier", "comm", call_fields(name(), 0));
  inner_->barrier();
}

void WatchedCommunicator::alltoallv(const float* in, const size_t* send_counts, float* out,
                                    const size_t* recv_counts) {
  maybe_stall("alltoallv");
  size_t sent = 0;
  for (int r = 0; r < size(); ++r) sent += send_counts[r];
  board_->begin_collective(group_id_, "alltoallv", sent * kFloat);
  CallScope scope(*board_, group_id_);
  observe::TraceScope trace(trace_, "alltoallv", "comm", call_fields(name(), sent * kFloat));
  inner_->alltoallv(in, send_counts, out, recv_counts);
}

void watch_process_groups(ProcessGroups& groups, const std::optional<StallHook>& stall) {
  auto board = std::make_shared<ProgressBoard>(groups.rank);
  const Layout& layout = groups.layout;
  std::vector<int> everyone(static_cast<size_t>(layout.world_size()));
  for (int r = 0; r < layout.world_size(); ++r) everyone[static_cast<size_t>(r)] = r;
  auto wrap = [&](std::unique_ptr<Communicator>& group, std::vector<int> members) {
    if (!group) throw std::invalid_argument("watch_process_groups: a group is missing");
    group =
        std::make_unique<WatchedCommunicator>(std::move(group), board, std::move(members), stall);
  };
  wrap(groups.world, everyone);
  wrap(groups.dp,
       layout.cp == 1 ? dp_group(layout, groups.rank) : dp_cp_group(layout, groups.rank));
  wrap(groups.tp, tp_group(layout, groups.rank));
  wrap(groups.pp, pp_group(layout, groups.rank));
  if (groups.cp) wrap(groups.cp, cp_group(layout, groups.rank));
  if (groups.ep) wrap(groups.ep, ep_group(layout, groups.rank));
  if (groups.edp) wrap(groups.edp, edp_group(layout, groups.rank));
  groups.progress = std::move(board);
}

void trace_process_groups(ProcessGroups& groups, observe::TraceRecorder* trace) {
  for (Communicator* c : {groups.world.get(), groups.dp.get(), groups.tp.get(), groups.pp.get(),
                          groups.ep.get(), groups.edp.get()}) {
    if (auto* watched = dynamic_cast<WatchedCommunicator*>(c)) watched->set_trace(trace);
  }
}

}  // namespace trainctl::comm
