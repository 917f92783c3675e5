#include "train/checkpointing.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "checkpoint/commit.h"
#include "checkpoint/errors.h"
#include "checkpoint/shard_writer.h"
#include "model/moe/moe_ffn.h"
#include "train/blend_progress.h"
#include "train/dp_sync_state.h"
#include "util/error.h"

namespace trainctl::train {

namespace fs = std::filesystem;

// Everything one rank writes, copied out of the live buffers so training can go on.
struct Checkpointer::Snapshot {
  int64_t step = 0;
  int64_t optimizer_step = 0;
  std::optional<optim::LossScalerState> loss_scale;  // fp16 runs
  std::vector<std::string> names;
  std::vector<model::TensorShard> shards;
  std::vector<std::vector<float>> values;
};

namespace {

using Clock = std::chrono::steady_clock;

// DP replicas hold the same state and TP ranks the same replicated tensors: one copy of
// each is enough (any layout reads any copy), and the LM head's tied copy of wte is the
// first stage's wte.
bool writes_param(const model::Param& p) {
  return !p.tied_copy && (p.shard.split() || p.shard.index == 0);
}

}  // namespace

Checkpointer::Checkpointer(Engine& engine, const fs::path& run_dir,
                           std::function<void(const std::string&)> say, int64_t crash_at_step)
    : e_(engine),
      dir_(run_dir / "checkpoints"),
      say_(std::move(say)),
      cadence_(engine.options.checkpoint, engine.groups.rank == 0),
      crash_at_step_(crash_at_step) {}

Checkpointer::~Checkpointer() {
  if (writer_.joinable()) writer_.join();
}

bool Checkpointer::written() const { return write_done_.load(); }

void Checkpointer::maybe_save(int64_t step, bool last, bool requested) {
  if (!cadence_.periodic_due(step, last, requested)) return;
  save(step, e_.options.checkpoint.async);
  cadence_.saved(step, Clock::now());
}

void Checkpointer::save_final(int64_t step) {
  if (cadence_.final_due(step)) save(step, false);
  finish_pending();
}

void Checkpointer::save(int64_t step, bool async) {
  finish_pending();
  comm::Communicator& world = *e_.groups.world;
  const auto t0 = Clock::now();
  // Collective over DP under ZeRO: every rank takes part, DP replica 0 writes.
  optim::OptimizerState opt = e_.data_parallel.optimizer().save_state();
  // ZeRO-3: the whole parameters from every DP rank's shards (collective over DP too).
  std::vector<float> gathered;
  if (parallel::Zero3Params* zero3 = e_.data_parallel.zero3()) gathered = zero3->gather_flat();
  // Mixed precision: the fp32 master weights (collective over DP when ZeRO shards them),
  // so the checkpoint holds what the optimizer continues from.
  if (parallel::MixedParams* mixed = e_.data_parallel.mixed()) gathered = mixed->gather_master();
  auto snap = std::make_unique<Snapshot>();
  snap->step = step;
  snap->optimizer_step = opt.step;
  if (e_.loss_scaler) snap->loss_scale = e_.loss_scaler->state();
  const model::ParameterSet& params = e_.gpt.params();
  auto add = [&](const std::string& name, const model::Param& p, const float* base) {
    snap->names.push_back(name);
    snap->shards.push_back(p.shard);
    snap->values.emplace_back(base + p.offset, base + p.offset + p.numel);
  };
  // DP replica 0 writes (CP rank 0 of it: CP ranks hold the same parameters); with expert
  // parallelism each block of routed experts is written by
  // the first DP rank holding it (dp rank < ep), under the experts' global indices.
  const int dp_rank = e_.groups.coord.dp;
  for (const model::Param& p : params.list()) {
    if (!writes_param(p) || e_.groups.coord.cp != 0 ||
        (p.expert ? dp_rank >= e_.groups.layout.ep : dp_rank != 0))
      continue;
    add(p.name, p, gathered.empty() ? params.data() : gathered.data());
    for (size_t k = 0; k < opt.names.size(); ++k) {
      add(checkpoint::optimizer_tensor_name(opt.names[k], p.name), p, opt.buffers[k].data());
    }
  }
  // balance: bias: each MoE layer's expert bias, a buffer the same on every rank of its
  // stage (one copy: DP replica 0, TP rank 0, CP rank 0).
  if (e_.groups.coord.dp == 0 && e_.groups.coord.tp == 0 && e_.groups.coord.cp == 0) {
    for (const model::MoeLayer& l : e_.gpt.moe_layers()) {
      const std::vector<float>& bias = l.ffn->expert_bias();
      if (bias.empty()) continue;
      snap->names.push_back(l.ffn->expert_bias_name());
      model::TensorShard whole;
      whole.global_shape = {static_cast<int64_t>(bias.size())};
      snap->shards.push_back(whole);
      snap->values.push_back(bias);
    }
  }
  // dp_sync local_sgd / diloco: each replica's own state and DiLoCo's outer state.
  for (const parallel::FlatState& extra : dp_sync_snapshot(e_, opt)) {
    for (const model::Param& p : params.list()) {
      if (writes_param(p)) {
        add(checkpoint::optimizer_tensor_name(extra.name, p.name), p, extra.values.data());
      }
    }
  }
  if (world.rank() == 0) tmp_ = checkpoint::begin_checkpoint(dir_, step);
  world.barrier();  // the temporary directory exists (and leftovers are gone) everywhere
  tmp_ = checkpoint::tmp_dir_for(dir_, step);
  pending_step_ = step;
  snapshot_ = std::move(snap);
  write_error_ = nullptr;
  write_done_ = false;
  if (async) {
    writer_ = std::thread([this] {
      try {
        observe::TraceScope trace(e_.trace, "checkpoint.write", "checkpoint");
        write_snapshot(*snapshot_);
      } catch (...) {
        write_error_ = std::current_exception();
      }
      write_done_ = true;
    });
    return;
  }
  {
    observe::TraceScope trace(e_.trace, "checkpoint.write", "checkpoint");
    write_snapshot(*snapshot_);
  }
  write_done_ = true;
  finish_pending();
  if (world.rank() == 0) {
    spdlog::info("checkpoint step {} written in {:.2f} s", step,
                 std::chrono::duration<double>(Clock::now() - t0).count());
  }
}

void Checkpointer::write_snapshot(const Snapshot& s) {
  std::vector<checkpoint::ShardTensor> tensors;
  for (size_t i = 0; i < s.names.size(); ++i) {
    tensors.push_back({s.names[i], s.shards[i], s.values[i].data()});
  }
  checkpoint::write_shard(tmp_, e_.groups.rank, tensors);
  if (s.step == crash_at_step_ && e_.groups.rank + 1 == e_.groups.world->size()) {
    spdlog::error("test hook: dying in the middle of checkpoint step {}", s.step);
    spdlog::default_logger()->flush();
    std::_Exit(9);
  }
}

void Checkpointer::commit_if_written(bool all_written) {
  if (!pending() || !all_written) return;
  if (writer_.joinable()) writer_.join();
  if (write_error_) std::rethrow_exception(write_error_);
  // Every rank's file is complete: rank 0 alone finishes; the others go on training.
  if (e_.groups.rank == 0) commit(pending_step_);
  pending_step_ = -1;
  snapshot_.reset();
}

void Checkpointer::finish_pending() {
  if (!pending()) return;
  if (writer_.joinable()) writer_.join();
  if (write_error_) std::rethrow_exception(write_error_);
  e_.groups.world->barrier();  // every rank's file is complete
  if (e_.groups.rank == 0) commit(pending_step_);
  e_.groups.world->barrier();  // nobody starts another save into a directory being renamed
  pending_step_ = -1;
  snapshot_.reset();
}

void Checkpointer::commit(int64_t step) {
  const RunOptions& options = e_.options;
  checkpoint::CheckpointMetadata m;
  m.step = step;
  m.layout = {options.parallel.layout, options.parallel.virtual_stages, options.parallel.zero};
  m.model = e_.gpt.config();
  m.data.next_step = step;
  m.data.samples_consumed = e_.layout.samples_before(step);
  m.data.sources = source_positions(e_, step);
  m.optimizer_step = snapshot_ ? snapshot_->optimizer_step : 0;
  // The sampler is a pure function of (seed, step, position): the step is the whole
  // random state of the data stream; nothing else in training draws random numbers.
  m.rng = {{"seed", options.seed}, {"sampler", "counter-based: (seed, step, micro-batch, row)"}};
  m.extra = {{"job", options.name}, {"global_batch_size", e_.layout.global_batch()}};
  if (snapshot_ && snapshot_->loss_scale) {
    m.extra["loss_scale"] = {{"scale", snapshot_->loss_scale->scale},
                             {"good_steps", snapshot_->loss_scale->good_steps}};
  }
  m.producer = "trainctl " TRAINCTL_VERSION;
  m.files = checkpoint::collect_shard_records(tmp_, e_.groups.world->size());
  checkpoint::write_metadata(tmp_, m);
  write_data_sources(e_, dir_.parent_path(), step);
  const fs::path final_dir =
      checkpoint::commit_checkpoint(tmp_, dir_, step, e_.options.checkpoint.keep_last);
  uint64_t bytes = 0;
  for (const auto& f : m.files) bytes += f.bytes;
  if (say_) {
    say_("checkpoint: step " + std::to_string(step) + " saved to " + final_dir.string() + " (" +
         std::to_string(bytes >> 10) + " KiB)");
  }
}

}  // namespace trainctl::train
