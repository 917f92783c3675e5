#include "train/dp_sync_state.h"

#include <algorithm>

#include "checkpoint/shard_writer.h"
#include "util/error.h"

namespace trainctl::train {

namespace {

std::string replica_state_name(int replica, const std::string& what) {
  return "dp" + std::to_string(replica) + "_" + what;
}

// Reads state `name` of every parameter of this rank into a flat buffer laid out like
// the parameters; false when the checkpoint does not hold it.
bool read_flat(checkpoint::CheckpointReader& reader, const model::ParameterSet& params,
               const std::string& name, float* out) {
  for (const model::Param& p : params.list()) {
    if (!reader.contains(checkpoint::optimizer_tensor_name(name, p.name))) return false;
  }
  for (const model::Param& p : params.list()) {
    reader.read_slice(checkpoint::optimizer_tensor_name(name, p.name), p.shard, out + p.offset);
  }
  return true;
}

std::string powersgd_q_name(const parallel::PowerSgd& p) {
  // The rank is part of the name: Q of another rank has another shape.
  int rank = 0;
  for (size_t k = 0; k < p.matrices().size(); ++k) rank = std::max(rank, p.rank_of(k));
  return "powersgd_q" + std::to_string(rank);
}

// Every compressed matrix's Q (cols × r <= rows × cols floats) placed at the matrix's offset
// of a buffer laid out like the parameters, and back.
std::vector<float> q_as_flat(const parallel::PowerSgd& p, int64_t total) {
  std::vector<float> out(static_cast<size_t>(total), 0.0f);
  size_t at = 0;
  for (size_t k = 0; k < p.matrices().size(); ++k) {
    if (!p.compressed(k)) continue;
    const parallel::GradMatrix& g = p.matrices()[k];
    const auto len = static_cast<size_t>(g.cols * p.rank_of(k));
    std::copy(p.q().begin() + static_cast<std::ptrdiff_t>(at),
              p.q().begin() + static_cast<std::ptrdiff_t>(at + len), out.begin() + g.offset);
    at += len;
  }
  return out;
}

std::vector<float> q_from_flat(const parallel::PowerSgd& p, const std::vector<float>& flat) {
  std::vector<float> q;
  for (size_t k = 0; k < p.matrices().size(); ++k) {
    if (!p.compressed(k)) continue;
    const parallel::GradMatrix& g = p.matrices()[k];
    q.insert(q.end(), flat.begin() + g.offset, flat.begin() + g.offset + g.cols * p.rank_of(k));
  }
  return q;
}

void add_powersgd(Engine& e, std::vector<parallel::FlatState>& out) {
  parallel::PowerSgd* p = e.data_parallel.powersgd();
  if (p == nullptr) return;
  const int64_t total = e.gpt.params().total();
  out.push_back({replica_state_name(e.groups.coord.dp, "powersgd_error"), p->error(total)});
  if (e.groups.coord.dp == 0) out.push_back({powersgd_q_name(*p), q_as_flat(*p, total)});
}

void restore_powersgd(Engine& e, checkpoint::CheckpointReader& reader,
                      const std::function<void(const std::string&)>& say) {
  parallel::PowerSgd* p = e.data_parallel.powersgd();
  if (p == nullptr) return;
  const model::ParameterSet& params = e.gpt.params();
  const auto n = static_cast<size_t>(params.total());
  const auto& l = reader.metadata().layout;
  const Layout& mine = e.options.parallel.layout;
  std::vector<float> error(n, 0.0f), q(n, 0.0f);
  // Error feedback and Q are this rank's shard's: only the same layout can use them.
  const bool same =
      l.dp == mine.dp && l.tp == mine.tp && l.pp == mine.pp &&
      read_flat(reader, params, powersgd_q_name(*p), q.data()) &&
      read_flat(reader, params, replica_state_name(e.groups.coord.dp, "powersgd_error"),
                error.data());
  if (same) {
    p->load(error, q_from_flat(*p, q));
  } else if (e.groups.rank == 0 && say) {
    say("powersgd: the checkpoint holds no PowerSGD state for this layout and rank; error "
        "feedback starts from zero and Q from its initial values");
  }
}

}  // namespace

std::vector<parallel::FlatState> dp_sync_snapshot(Engine& e, const optim::OptimizerState& opt) {
  std::vector<parallel::FlatState> out;
  add_powersgd(e, out);
  parallel::PeriodicSync* periodic = e.data_parallel.periodic();
  if (periodic == nullptr) return out;
  const int replica = e.groups.coord.dp;
  if (replica == 0) {
    for (parallel::FlatState& s : periodic->save_outer()) out.push_back(std::move(s));
    return out;
  }
  const model::ParameterSet& params = e.gpt.params();
  // Mixed precision (never sharded with dp_sync): the replica's fp32 master.
  const float* w = e.data_parallel.mixed() ? e.data_parallel.mixed()->master() : params.data();
  out.push_back({replica_state_name(replica, "param"), std::vector<float>(w, w + params.total())});
  for (size_t k = 0; k < opt.names.size(); ++k) {
    out.push_back({replica_state_name(replica, opt.names[k]), opt.buffers[k]});
  }
  return out;
}

void restore_dp_sync_state(Engine& e, checkpoint::CheckpointReader& reader,
                           const std::function<void(const std::string&)>& say) {
  restore_powersgd(e, reader, say);
  parallel::PeriodicSync* periodic = e.data_parallel.periodic();
  if (periodic == nullptr) return;
  model::ParameterSet& params = e.gpt.params();
  const auto n = static_cast<size_t>(params.total());
  const int replica = e.groups.coord.dp;
  const bool same_dp = reader.metadata().layout.dp == e.layout.dp;
  const bool has_replicas = same_dp && e.layout.dp > 1 &&
                            reader.contains(checkpoint::optimizer_tensor_name(
                                replica_state_name(1, "param"), params.list().front().name));
  std::vector<float> values(n, 0.0f);
  if (replica > 0 && has_replicas &&
      read_flat(reader, params, replica_state_name(replica, "param"), values.data())) {
    if (parallel::MixedParams* mixed = e.data_parallel.mixed()) {
      mixed->load_master(values.data());
    } else {
      std::copy(values.begin(), values.end(), params.data());
    }
    optim::Optimizer& opt = e.data_parallel.optimizer();
    optim::OptimizerState state;
    state.step = reader.metadata().optimizer_step;
    state.names = opt.state_names();
    for (const std::string& name : state.names) {
      std::vector<float> buffer(n, 0.0f);
      if (!read_flat(reader, params, replica_state_name(replica, name), buffer.data())) {
        throw InputError("checkpoint " + reader.dir().string() + " holds replica " +
                         std::to_string(replica) + "'s parameters but not its optimizer state '" +
                         name + "'; resume with the optimizer that wrote it, or --resume none");
      }
      state.buffers.push_back(std::move(buffer));
    }
    opt.load_state(state);
  }
  if (!has_replicas && e.layout.dp > 1 && e.groups.rank == 0 && say) {
    say("dp_sync " + std::string(parallel::to_string(periodic->options().mode)) +
        ": the checkpoint holds no replica state for dp " + std::to_string(e.layout.dp) +
        "; every replica continues from replica 0's parameters and optimizer state");
  }
  std::vector<parallel::FlatState> outer;
  for (const std::string& name : periodic->outer_state_names()) {
    parallel::FlatState s{name, std::vector<float>(n, 0.0f)};
    if (!read_flat(reader, params, name, s.values.data())) {
      outer.clear();
      break;
    }
    outer.push_back(std::move(s));
  }
  if (!outer.empty()) {
    periodic->load_outer(outer);
  } else {
    periodic->reset_outer();
  }
}

}  // namespace trainctl::train
