#include "train/elastic_training.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "comm/gloo/gloo_groups.h"
#include "data/prefetcher.h"
#include "device/make_backend.h"
#include "launch/ft_quorum.h"
#include "launch/ft_store.h"
#include "launch/prefixed_store.h"
#include "parallel/periodic_sync.h"
#include "parallel/replica_exchange.h"
#include "train/blend_progress.h"
#include "train/cadence.h"
#include "train/checkpointing.h"
#include "train/engine.h"
#include "train/export_model.h"
#include "train/jsonl_file.h"
#include "train/metrics.h"
#include "train/run_reporting.h"
#include "train/step_stats.h"
#include "util/error.h"

namespace trainctl::train {
namespace {

// The floats that travel with the gradients: the loss sums, and the requests every
// replica must act on at the same step.
enum Tail : size_t { kLossSum, kLossCount, kStop, kCheckpoint, kTailSize };

// A primary remembers this many logged lines, to write the ones a dead primary could not.
constexpr size_t kRecentLines = 8;

// The last line of a JSON-lines file that parses (a torn last line is skipped); nullopt
// when there is none.
std::optional<nlohmann::json> last_json_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::optional<nlohmann::json> last;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) last = std::move(j);
  }
  return last;
}

// runtime.fault_tolerance.replay: the replicas a recorded run trained each step with. A
// line supersedes every earlier one from its first step on (a step trained again after a
// failed vote, or a restart from a checkpoint).
class MembershipReplay {
 public:
  explicit MembershipReplay(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) throw InputError("runtime.fault_tolerance.replay: cannot read " + path.string());
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (line.empty()) continue;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("first_step") || !j.contains("replicas")) {
        throw InputError(path.string() + ":" + std::to_string(number) +
                         ": not a membership line (runtime.fault_tolerance.replay takes a "
                         "fault-tolerant run's membership.jsonl)");
      }
      const auto first = j.at("first_step").get<int64_t>();
      by_first_step_.erase(by_first_step_.lower_bound(first), by_first_step_.end());
      by_first_step_[first] = j.at("replicas").get<std::vector<int>>();
    }
    if (by_first_step_.empty()) {
      throw InputError("runtime.fault_tolerance.replay: " + path.string() + " has no membership");
    }
  }
  // The replicas of step `step` (1-based); the first line's before it.
  const std::vector<int>& at(int64_t step) const {
    auto it = by_first_step_.upper_bound(step);
    if (it != by_first_step_.begin()) --it;
    return it->second;
  }

 private:
  std::map<int64_t, std::vector<int>> by_first_step_;
};

class ReplicaRun {
 public:
  ReplicaRun(const RunOptions& options, Engine& e, const TrainContext& ctx, bool periodic)
      : options_(options),
        e_(e),
        ctx_(ctx),
        ec_(*ctx.elastic),
        world_(*e.groups.world),
        leader_(e.groups.rank == 0),
        store_(ec_.store, ec_.store_prefix),
        gloo_store_(std::make_shared<launch::PrefixedStore>(ec_.store, ec_.store_prefix)) {
    periodic_mode_ = periodic;
    if (!options.fault_tolerance.replay.empty()) replay_.emplace(options.fault_tolerance.replay);
    // Every rank beats (its own connection): a replica with one hung rank falls silent.
    auto beat_client =
        std::make_shared<launch::TcpStoreClient>(ec_.store_addr, ec_.store_port, ec_.token);
    beat_ = std::make_unique<launch::ReplicaHeartbeat>(
        std::make_unique<launch::TcpQuorumStore>(beat_client, ec_.store_prefix), ec_.replica,
        ec_.generation, e.groups.rank);
    if (leader_) {
      launch::QuorumOptions q;
      q.replicas = options.parallel.layout.dp;
      q.min_replicas = options.fault_tolerance.min_replicas;
      q.ranks_per_replica = world_.size();
      q.heartbeat_timeout = options.fault_tolerance.heartbeat_timeout;
      q.join_timeout = options.fault_tolerance.join_timeout;
      quorum_.emplace(store_, ec_.replica, ec_.generation, q);
    }
    // Until the first epoch names a primary, the first start of replica 0 speaks (restoring
    // a checkpoint, the opening lines), as rank 0 of a job without fault tolerance would.
    use_reporter(ec_.replica == 0 && ec_.generation == 0);
  }

  TrainResult run();

 private:
  void use_reporter(bool primary);
  std::function<void(const std::string&)> say() {
    return [this](const std::string& line) {
      reporter_->message(line);
      spdlog::info("{}", line);
    };
  }
  // Every rank of this replica learns the leader's answer.
  bool all_ranks(bool ok);
  void agree_epoch(int64_t step);
  bool connect_and_heal(int64_t& step);
  void start_epoch(int64_t step);
  launch::ReplicaQuorum::Vote vote(int64_t step, bool ok, const char* kind = "vote");
  // local SGD / DiLoCo: the replicas' meeting after step `step` (0-based), voted like a
  // step; a meeting voted down is skipped (every replica keeps its own model) and the
  // next epoch forms. Returns false then.
  bool meet(int64_t step, bool last);
  const data::StepBatch& batch_of(int64_t step);
  void close_group() {
    periodic_.reset();  // it holds the group
    group_.reset();
  }
  bool primary() const { return epoch_.primary() == ec_.replica; }
  void write_membership();
  void fill_metrics();
  int64_t logged_through() const;  // the step of metrics.jsonl's last line (0: none)
  double evaluate_whole();
  void finish(TrainResult& result, Checkpointer& ckpt, double seconds, int64_t start);

  const RunOptions& options_;
  Engine& e_;
  const TrainContext& ctx_;
  const ElasticContext& ec_;
  comm::Communicator& world_;
  const bool leader_;
  launch::TcpQuorumStore store_;
  std::shared_ptr<launch::PrefixedStore> gloo_store_;
  std::unique_ptr<launch::ReplicaHeartbeat> beat_;
  std::optional<launch::ReplicaQuorum> quorum_;
  std::optional<MembershipReplay> replay_;
  launch::Epoch epoch_;
  std::unique_ptr<comm::Communicator> group_;
  std::unique_ptr<MetricsReporter> reporter_;
  bool reporting_ = false;
  std::shared_ptr<observe::TensorBoardWriter> tensorboard_;
  bool tensorboard_started_ = false;  // for this reporter (null when logging.tensorboard is off)
  std::deque<nlohmann::ordered_json> recent_;
  std::vector<float> staging_;                        // the exchange's buffer, reused every step
  bool periodic_mode_ = false;                        // parallel.dp_sync local_sgd / diloco
  std::unique_ptr<parallel::PeriodicSync> periodic_;  // over group_, this epoch
  std::vector<parallel::FlatState> outer_;
  std::optional<data::Prefetcher> prefetch_;
  int64_t prefetched_ = -1;  // the step the prefetcher delivers next
  std::optional<data::StepBatch> batch_;
  int64_t batch_step_ =
      -1;  // the step batch_ belongs to            // DiLoCo's outer state, as last agreed
};

void ReplicaRun::use_reporter(bool primary) {
  if (reporter_ && (primary && leader_) == reporting_) return;
  reporting_ = primary && leader_;
  // metrics.jsonl opened only by the one writer: opening repairs a torn last line (a
  // primary killed mid-write).
  reporter_ = std::make_unique<MetricsReporter>(
      reporting_ ? ctx_.run_dir / "metrics.jsonl" : std::filesystem::path(),
      reporting_ ? ctx_.console_fd : -1, options_.observability.log_every_steps);
  tensorboard_.reset();
  tensorboard_started_ = false;
}

bool ReplicaRun::all_ranks(bool ok) {
  if (world_.size() == 1) return ok;
  float failed = ok ? 0.0f : 1.0f;
  world_.allreduce(&failed, 1, comm::ReduceOp::max);
  return failed == 0.0f;
}

// The leader joins the next epoch; the replica's other ranks read the same record.
void ReplicaRun::agree_epoch(int64_t step) {
  float id = 0;
  std::string lost;
  if (leader_) {
    try {
      epoch_ = quorum_->join(step);
      id = static_cast<float>(epoch_.id);
    } catch (const launch::QuorumLost& q) {
      id = -1;
      lost = q.what();
    }
  }
  if (world_.size() > 1) world_.broadcast(&id, 1, 0);
  if (id < 0) throw launch::QuorumLost(leader_ ? lost : "this replica's leader lost the quorum");
  if (!leader_) {
    std::optional<launch::Epoch> e = launch::read_epoch(store_, static_cast<int>(id));
    if (!e)
      throw launch::QuorumLost("epoch " + std::to_string(static_cast<int>(id)) + " has no record");
    epoch_ = *e;
  }
  spdlog::info("fault tolerance: epoch {} from step {}: replicas {}{}", epoch_.id,
               epoch_.start_step + 1, nlohmann::json(epoch_.replicas()).dump(),
               epoch_.heal.empty()
                   ? ""
                   : fmt::format(", {} heal from replica {}", nlohmann::json(epoch_.heal).dump(),
                                 epoch_.source));
}

// This rank's gradient group of the epoch, and the state of the epoch's source when a
// member needs it. False when a peer failed meanwhile; `step` is then -1 if this replica
// was taking the state (it is undefined now).
bool ReplicaRun::connect_and_heal(int64_t& step) {
  const int index = epoch_.index_of(ec_.replica);
  const std::string name = "replicas[e" + std::to_string(epoch_.id) + "]";
  const bool healing =
      std::find(epoch_.heal.begin(), epoch_.heal.end(), ec_.replica) != epoch_.heal.end();
  // A hung peer (stopped, its heartbeat silent too) fails the epoch's collectives after the
  // heartbeat timeout, not after runtime.comm_timeout_s: the others then go on without it.
  comm::GlooOptions gloo = ec_.gloo;
  gloo.timeout = std::min(gloo.timeout, options_.fault_tolerance.heartbeat_timeout);
  try {
    close_group();
    group_ = comm::connect_gloo_group(
        *gloo_store_,
        "ft/e" + std::to_string(epoch_.id) + "/grad/" + std::to_string(e_.groups.rank), name, index,
        static_cast<int>(epoch_.members.size()), gloo, ec_.node_addr);
    if (periodic_mode_) {
      // local SGD / DiLoCo: the replicas meet over this epoch's groups; DiLoCo's outer
      // state (the same on every replica) carries over from epoch to epoch.
      periodic_ = std::make_unique<parallel::PeriodicSync>(*group_, e_.gpt.params(), *e_.backend,
                                                           options_.parallel.periodic);
      if (outer_.empty()) outer_ = periodic_->save_outer();
    }
    if (epoch_.source >= 0) {
      parallel::ReplicaPosition position{step, 0, e_.layout.first_step, e_.layout.first_sample};
      std::vector<std::vector<float>*> outer;
      for (parallel::FlatState& state : outer_) outer.push_back(&state.values);
      parallel::copy_replica_state(*group_, epoch_.index_of(epoch_.source), e_.gpt,
                                   e_.data_parallel.optimizer(), position, outer);
      step = position.step;
      e_.layout.first_step = position.first_step;
      e_.layout.first_sample = position.first_sample;
      if (healing)
        spdlog::info("fault tolerance: took replica {}'s state at step {}", epoch_.source,
                     step + 1);
    }
    if (periodic_ && !outer_.empty()) periodic_->load_outer(outer_);
    return true;
  } catch (const std::exception& ex) {
    spdlog::warn("fault tolerance: epoch {} could not start: {}", epoch_.id, ex.what());
    close_group();
    if (healing) step = -1;
    return false;
  }
}

launch::ReplicaQuorum::Vote ReplicaRun::vote(int64_t step, bool ok, const char* kind) {
  float v[2] = {0, 0};
  if (leader_) {
    const launch::ReplicaQuorum::Vote r = quorum_->vote(epoch_, step, ok, kind);
    v[0] = r.commit ? 1.0f : 0.0f;
    v[1] = r.join_pending ? 1.0f : 0.0f;
  }
  if (world_.size() > 1) world_.broadcast(v, 2, 0);
  return {v[0] > 0, v[1] > 0};
}

// membership.jsonl gets every epoch of this attempt after the last one it holds (a dead
// primary's included: the records stay in the store).
void ReplicaRun::write_membership() {
  const auto path = ctx_.run_dir / "membership.jsonl";
  int last = 0;
  if (auto j = last_json_line(path); j && j->value("attempt", -1) == ec_.attempt) {
    last = j->value("epoch", 0);
  }
  JsonLinesFile file(path);
  for (int id = last + 1; id <= epoch_.id; ++id) {
    std::optional<launch::Epoch> e = launch::read_epoch(store_, id);
    if (!e) continue;
    nlohmann::ordered_json line;
    line["attempt"] = ec_.attempt;
    line["epoch"] = e->id;
    line["first_step"] = e->start_step + 1;
    line["replicas"] = e->replicas();
    std::vector<int> generations;
    for (const launch::Member& m : e->members) generations.push_back(m.generation);
    line["generations"] = generations;
    line["healed"] = e->heal;
    if (e->source >= 0) line["source"] = e->source;
    file.append(line.dump());
  }
}

// The logged lines after metrics.jsonl's last one that this replica remembers: a primary
// that died after a step committed could not write them.
void ReplicaRun::fill_metrics() {
  const int64_t through = logged_through();
  for (const auto& line : recent_) {
    if (line.value("step", int64_t{0}) > through) reporter_->append(line);
  }
}

int64_t ReplicaRun::logged_through() const {
  const auto last = last_json_line(ctx_.run_dir / "metrics.jsonl");
  return last ? last->value("step", int64_t{0}) : 0;
}

void ReplicaRun::start_epoch(int64_t step) {
  const bool was = reporting_;
  use_reporter(primary());
  if (reporting_) {
    // TensorBoard first: the lines written below go to it too. Its event file starts after
    // the last line metrics.jsonl holds.
    if (!tensorboard_started_) {
      tensorboard_ =
          start_tensorboard(options_.observability, e_.groups, ctx_, *reporter_, logged_through());
      tensorboard_started_ = true;
    }
    if (!was) {
      spdlog::info("fault tolerance: this replica writes the run's files from step {}", step + 1);
      fill_metrics();
    }
    write_membership();
    reporter_->message(fmt::format(
        "fault tolerance: step {}: {} of {} replicas live {}{}", step + 1, epoch_.members.size(),
        options_.parallel.layout.dp, nlohmann::json(epoch_.replicas()).dump(),
        epoch_.heal.empty() ? ""
                            : fmt::format(" ({} healed from replica {})",
                                          nlohmann::json(epoch_.heal).dump(), epoch_.source)));
  }
}

// Validation on every replica over every batch (the replicas' results are the same), so
// any of them can log it.
double ReplicaRun::evaluate_whole() {
  const data::BatchLayout saved = e_.layout;
  e_.layout.dp = 1;
  e_.layout.dp_rank = 0;
  const double loss = e_.evaluate();
  e_.layout = saved;
  return loss;
}

TrainResult ReplicaRun::run() {
  announce(e_, *reporter_);
  Checkpointer ckpt(e_, ctx_.run_dir, say(), ctx_.crash_in_checkpoint_step);
  const int64_t steps = options_.training.steps;
  // A restarted replica holds nothing: it takes a live peer's state when it joins.
  int64_t step = ec_.generation == 0 ? ckpt.restore(ctx_.resume) : -1;
  if (ec_.generation == 0) report_metrics_repairs(*reporter_, step);
  const int64_t start = step;
  TrainResult result{.steps = std::max<int64_t>(step, 0)};
  StepTimer timer;
  // local SGD / DiLoCo: each replica steps on its own gradients; only the tail travels.
  const auto n = periodic_mode_ ? size_t{0} : static_cast<size_t>(e_.gpt.params().total());
  const int replicas = options_.parallel.layout.dp;
  bool join = true;
  while (true) {
    if (join) {
      agree_epoch(step);
      const bool ok = all_ranks(connect_and_heal(step));
      if (!ok) {
        vote(epoch_.start_step, false);
        continue;
      }
      join = false;
      start_epoch(step);
    }
    if (step >= steps) break;
    timer.begin_step();
    const data::StepBatch& batch = batch_of(step);
    const std::vector<int> counting = replay_ ? replay_->at(step + 1) : epoch_.replicas();
    const bool counted = std::find(counting.begin(), counting.end(), ec_.replica) != counting.end();
    const StepRequests asked{ctx_.should_stop && ctx_.should_stop(), ckpt.time_due(), true};
    // The exchange: a peer replica that fails makes it fail here, and the step is voted
    // down. Anything after the vote is this replica's own (its launcher restarts it).
    bool ok = true;
    Engine::Gradients g;
    float tail[kTailSize] = {};
    try {
      g = e_.compute_gradients(step, batch, e_.step_dloss(1.0));
      tail[kLossSum] = static_cast<float>(g.loss_sum);
      tail[kLossCount] = static_cast<float>(g.loss_count);
      tail[kStop] = asked.stop ? 1.0f : 0.0f;
      tail[kCheckpoint] = asked.checkpoint ? 1.0f : 0.0f;
      parallel::sum_over_replicas(
          *group_, e_.gpt.params().grads(), n, tail, kTailSize,
          static_cast<float>(replicas) / static_cast<float>(counting.size()), counted, staging_);
    } catch (const comm::CommError& ex) {
      spdlog::warn("fault tolerance: step {}: {}", step + 1, ex.what());
      ok = false;
      // Closed at once: a peer still waiting on this rank inside the collective fails now
      // instead of at Gloo's timeout (and would not join the next epoch meanwhile).
      close_group();
    }
    const launch::ReplicaQuorum::Vote v = vote(step, all_ranks(ok));
    if (!v.commit) {
      spdlog::warn("fault tolerance: step {} voted down; forming a new membership", step + 1);
      close_group();
      join = true;
      continue;
    }
    g.loss_sum = tail[kLossSum];
    g.loss_count = static_cast<int64_t>(tail[kLossCount]);
    const StepOutcome out =
        e_.finish_step(step, g, {tail[kStop] > 0, tail[kCheckpoint] > 0, true}, 1.0);
    result.steps = step + 1;
    result.final_loss = out.loss;
    result.stopped = out.stop;
    const bool last = step + 1 == steps || out.stop;
    if (periodic_ && periodic_->due(step + 1, last) && !meet(step, last)) join = true;
    const bool logged = reporter_->should_log(step + 1, last, out.skipped);
    StepMetrics m = measure_step(e_, out, step + 1, timer, logged);
    m.replicas = static_cast<int>(counting.size());
    if (eval_due(options_.training, step + 1, last)) {
      m.val_loss = evaluate_whole();
      result.final_val_loss = *m.val_loss;
    }
    m.tokens_per_s = timer.tokens_per_s(e_.tokens_per_step());
    if (logged && leader_) {
      recent_.push_back(metrics_json(m));
      if (recent_.size() > kRecentLines) recent_.pop_front();
    }
    report_step(*reporter_, m, logged, timer);
    if (primary()) ckpt.maybe_save(step + 1, last, out.checkpoint);
    ++step;
    if (out.stop) break;
    if (v.join_pending) join = true;
  }
  finish(result, ckpt, timer.elapsed_s(), std::max<int64_t>(start, 0));
  return result;
}

// Step `step`'s batch: the one held when the step is trained again after a vote went down,
// else the prefetcher's next (started again at `step` after a heal moved the position).
const data::StepBatch& ReplicaRun::batch_of(int64_t step) {
  if (batch_step_ != step) {
    if (prefetched_ != step) {
      prefetch_.reset();
      prefetch_.emplace(*e_.dataset, e_.layout, step, options_.training.steps);
      prefetched_ = step;
    }
    batch_ = prefetch_->next();
    ++prefetched_;
    batch_step_ = step;
  }
  return *batch_;
}

bool ReplicaRun::meet(int64_t step, bool last) {
  model::ParameterSet& params = e_.gpt.params();
  const std::vector<float> before(params.data(), params.data() + params.total());
  bool ok = true;
  try {
    periodic_->after_update(step + 1, last);
  } catch (const comm::CommError& ex) {
    spdlog::warn("fault tolerance: the meeting after step {}: {}", step + 1, ex.what());
    ok = false;
    close_group();
  }
  if (vote(step, all_ranks(ok), "meet").commit) {
    outer_ = periodic_->save_outer();
    return true;
  }
  // Voted down: every replica keeps the model it had before the meeting (the outer state
  // too: outer_ is the last agreed one), as torchft lets a replica miss a sync round.
  std::copy(before.begin(), before.end(), params.data());
  spdlog::warn("fault tolerance: the meeting after step {} was voted down: skipped", step + 1);
  close_group();
  return false;
}

void ReplicaRun::finish(TrainResult& result, Checkpointer& ckpt, double seconds, int64_t start) {
  if (!primary()) {
    spdlog::info("fault tolerance: done at step {}; replica {} writes the files", result.steps,
                 epoch_.primary());
    return;
  }
  ckpt.save_final(result.steps);
  if (e_.groups.rank == 0) write_data_sources(e_, ctx_.run_dir, result.steps);
  const auto model_path = ctx_.run_dir / "model.safetensors";
  export_model(e_.gpt, e_.options, e_.groups, model_path);
  const AttemptSummary attempt{start, result.steps, seconds, result.stopped};
  result.tokens_per_s = attempt.tokens_per_s(e_.tokens_per_step());
  if (e_.groups.rank == 0) {
    const std::string line =
        attempt.head() + fmt::format(" | final loss {:.4f} | {:.0f} tokens/s | model: {}",
                                     result.final_loss, result.tokens_per_s, model_path.string());
    reporter_->message(line);
    spdlog::info("{}", line);
  }
  world_.barrier();
}

}  // namespace

TrainResult run_elastic_training(const RunOptions& options, comm::ProcessGroups& groups,
                                 const TrainContext& ctx) {
  if (!ctx.elastic) throw std::logic_error("run_elastic_training without an ElasticContext");
  // The replica is a job of dp 1 to the engine (its groups, its checkpoints); its share of
  // the batch is that of data-parallel rank `replica` of parallel.dp. Checkpoints are
  // written synchronously: the primary may change between steps.
  RunOptions replica = options;
  replica.parallel.layout.dp = 1;
  replica.checkpoint.async = false;
  // local SGD / DiLoCo: the replicas meet over the epochs' groups (ReplicaRun), not over
  // the replica's own DP group of one.
  const bool periodic = options.parallel.periodic.mode != parallel::DpSyncMode::allreduce;
  replica.parallel.periodic.mode = parallel::DpSyncMode::allreduce;
  std::unique_ptr<ops::Backend> backend =
      device::make_backend(replica.device, replica.backend, ctx.local_rank);
  Engine e(replica, groups, std::move(backend));
  e.slowdown = ctx.slowdown;
  e.layout.dp = options.parallel.layout.dp;
  e.layout.dp_rank = ctx.elastic->replica;
  // Each replica's gradient is the mean over its own tokens when it steps on its own.
  e.grad_scale = static_cast<float>(periodic ? options.parallel.layout.dp : 1) /
                 static_cast<float>(e.tokens_per_step());
  ReplicaRun run(options, e, ctx, periodic);
  return run.run();
}

}  // namespace trainctl::train
