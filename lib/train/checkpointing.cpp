#include "train/checkpointing.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "checkpoint/commit.h"
#include "checkpoint/errors.h"
#include "checkpoint/reader.h"
#include "checkpoint/shard_writer.h"
#include "train/dp_sync_state.h"
#include "train/resume_choice.h"
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

// A step (or a negative code) from world rank 0 to every rank. The collective carries
// floats, exact only up to 2^24: a step travels as two 16-bit halves, so every step up to
// kMaxCheckpointStep (2^31 - 1) arrives exactly.
int64_t broadcast_step(comm::Communicator& world, int64_t value) {
  static_assert(checkpoint::kMaxCheckpointStep < (int64_t{1} << 32));
  const bool negative = value < 0;
  const uint64_t magnitude = static_cast<uint64_t>(negative ? -value : value);
  float v[3] = {negative ? 1.0f : 0.0f, static_cast<float>(magnitude >> 16),
                static_cast<float>(magnitude & 0xffff)};
  world.broadcast(v, 3, 0);
  const int64_t m = (static_cast<int64_t>(v[1]) << 16) | static_cast<int64_t>(v[2]);
  return v[0] != 0.0f ? -m : m;
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
  if (e_.groups.coord.dp == 0) {
    for (const model::Param& p : params.list()) {
      if (!writes_param(p)) continue;
      add(p.name, p, gathered.empty() ? params.data() : gathered.data());
      for (size_t k = 0; k < opt.names.size(); ++k) {
        add(checkpoint::optimizer_tensor_name(opt.names[k], p.name), p, opt.buffers[k].data());
      }
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
  const fs::path final_dir =
      checkpoint::commit_checkpoint(tmp_, dir_, step, e_.options.checkpoint.keep_last);
  uint64_t bytes = 0;
  for (const auto& f : m.files) bytes += f.bytes;
  if (say_) {
    say_("checkpoint: step " + std::to_string(step) + " saved to " + final_dir.string() + " (" +
         std::to_string(bytes >> 10) + " KiB)");
  }
}

int64_t Checkpointer::restore(const std::string& resume) {
  const int64_t step = load(resume);
  cadence_.start(step, Clock::now());
  return step;
}

int64_t Checkpointer::load(const std::string& resume) {
  comm::Communicator& world = *e_.groups.world;
  // Rank 0 picks and verifies the checkpoint; every rank then reads its own slices. The
  // choice travels as a step number (-1: none; -2 / -3: rank 0 found bad input / failed
  // otherwise and reports why; the others fail the same way, so the launcher sees one
  // kind of failure whichever rank it hears from first).
  fs::path chosen;
  int64_t step = -1;
  if (world.rank() == 0) {
    try {
      // An interrupted save (a crash, a full disk) left its temporary directory behind: it
      // is never read, and the next save would remove it anyway; say so at the start.
      for (const fs::path& leftover : checkpoint::remove_leftovers(dir_)) {
        if (say_) {
          say_("removed " + leftover.string() +
               ": an unfinished checkpoint left by an interrupted save");
        }
      }
      if (auto dir = choose_resume_checkpoint(dir_, resume, e_.gpt.config(), say_)) {
        chosen = *dir;
        step = checkpoint::read_metadata(chosen).step;
      }
    } catch (const InputError&) {
      // run_worker prints the reason on the launcher's console too (the launcher may report
      // another rank first, whose log only says that rank 0 refused).
      broadcast_step(world, -2);
      throw;
    } catch (...) {
      broadcast_step(world, -3);
      throw;
    }
  }
  step = broadcast_step(world, step);
  const std::string why =
      "rank 0 could not load the checkpoint to resume from (the error rank 0 printed says why)";
  if (step == -2) throw InputError(why);
  if (step == -3) throw std::runtime_error(why);
  if (step < 0) return 0;
  if (world.rank() != 0) {
    // The same choice as rank 0's: auto picks a step_<N> directory whose metadata says step
    // N (read_metadata checks), a path resolves the same way on every rank.
    chosen = resume == "auto" ? dir_ / checkpoint::step_dir_name(step)
                              : checkpoint::resolve_checkpoint(resume);
  }
  checkpoint::CheckpointReader reader(chosen);
  reader.set_verify_on_read(false);  // rank 0 verified every file
  model::ParameterSet& params = e_.gpt.params();
  parallel::Zero3Params* zero3 = e_.data_parallel.zero3();
  // ZeRO-3: read the whole parameters into host memory, keep this rank's shard.
  std::vector<float> whole(zero3 ? static_cast<size_t>(params.total()) : 0, 0.0f);
  for (const model::Param& p : params.list()) {
    reader.read_slice(p.name, p.shard, (zero3 ? whole.data() : params.data()) + p.offset);
  }
  if (zero3) zero3->load_flat(whole.data());
  optim::Optimizer& opt = e_.data_parallel.optimizer();
  optim::OptimizerState state;
  state.step = reader.metadata().optimizer_step;
  state.names = opt.state_names();
  for (const std::string& name : state.names) {
    std::vector<float> buffer(static_cast<size_t>(params.total()), 0.0f);
    for (const model::Param& p : params.list()) {
      const std::string tensor = checkpoint::optimizer_tensor_name(name, p.name);
      if (!reader.contains(tensor)) {
        throw InputError("checkpoint " + chosen.string() + " has no optimizer state '" + name +
                         "' (it was written with another optimizer.type); resume with the "
                         "optimizer that wrote it, or --resume none");
      }
      reader.read_slice(tensor, p.shard, buffer.data() + p.offset);
    }
    state.buffers.push_back(std::move(buffer));
  }
  opt.load_state(state);
  restore_dp_sync_state(e_, reader, say_);
  // fp16: continue with the saved loss scale (a checkpoint from an fp32/bf16 run has none:
  // the scale starts from precision.loss_scale).
  const nlohmann::json& extra = reader.metadata().extra;
  if (e_.loss_scaler && extra.contains("loss_scale")) {
    e_.loss_scaler->load({extra["loss_scale"].at("scale").get<double>(),
                          extra["loss_scale"].at("good_steps").get<int64_t>()});
  }
  // The data stream goes on from the first sample the checkpoint had not drawn, whatever
  // the global batch is now.
  const checkpoint::CheckpointMetadata& meta = reader.metadata();
  e_.layout.first_step = step;
  e_.layout.first_sample = meta.data.samples_consumed;
  const int64_t old_batch = meta.extra.value("global_batch_size", e_.layout.global_batch());
  if (world.rank() == 0 && say_ && old_batch != e_.layout.global_batch()) {
    say_("global batch changed from " + std::to_string(old_batch) + " to " +
         std::to_string(e_.layout.global_batch()) + " samples: the data continues from sample " +
         std::to_string(meta.data.samples_consumed) + ", the learning-rate schedule from step " +
         std::to_string(step));
  }
  // The sampler draws from (seed, step, ...): another seed means another data stream from
  // here on, which a user who edited the spec should hear about (parameters and optimizer
  // state still come from the checkpoint).
  if (world.rank() == 0 && say_ && step < e_.options.training.steps && meta.rng.is_object() &&
      meta.rng.contains("seed") && meta.rng["seed"].is_number_unsigned() &&
      meta.rng["seed"].get<uint64_t>() != e_.options.seed) {
    say_("seed changed from " + std::to_string(meta.rng["seed"].get<uint64_t>()) + " to " +
         std::to_string(e_.options.seed) + ": from step " + std::to_string(step + 1) +
         " the data is drawn with the new seed (weights and optimizer state come from the "
         "checkpoint)");
  }
  if (world.rank() == 0 && say_) {
    const auto& l = reader.metadata().layout;
    say_("resumed from " + chosen.string() + ": step " + std::to_string(step) +
         " (written with dp " + std::to_string(l.dp) + " x tp " + std::to_string(l.tp) + " x pp " +
         std::to_string(l.pp) + ", zero " + std::to_string(l.zero) + ")");
  }
  return step;
}

}  // namespace trainctl::train
