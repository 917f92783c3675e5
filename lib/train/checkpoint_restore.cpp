// Checkpointer's restoring side (train/checkpointing.h): rank 0 picks and verifies the
// checkpoint, every rank reads its own slices of the parameters and optimizer state, and
// the data stream, loss scale and dp_sync state continue from it. The saving side is
// train/checkpointing.cpp.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/commit.h"
#include "checkpoint/hf_import.h"
#include "checkpoint/reader.h"
#include "checkpoint/shard_writer.h"
#include "model/moe/moe_ffn.h"
#include "train/blend_progress.h"
#include "train/checkpointing.h"
#include "train/dp_sync_state.h"
#include "train/resume_choice.h"
#include "util/error.h"

namespace trainctl::train {

namespace fs = std::filesystem;

namespace {

using Say = std::function<void(const std::string&)>;

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

// Rank 0's choice: the checkpoint `resume` selects in `dir` (`chosen`) and its step, -1
// for none. An interrupted save (a crash, a full disk) left its temporary directory
// behind: it is never read, and the next save would remove it anyway; say so at the start.
int64_t choose_on_rank0(const Engine& e, const fs::path& dir, const std::string& resume,
                        const Say& say, fs::path& chosen) {
  for (const fs::path& leftover : checkpoint::remove_leftovers(dir)) {
    if (say) {
      say("removed " + leftover.string() +
          ": an unfinished checkpoint left by an interrupted save");
    }
  }
  if (auto picked = choose_resume_checkpoint(dir, resume, e.gpt.config(), say)) {
    chosen = *picked;
    return checkpoint::read_metadata(chosen).step;
  }
  return -1;
}

// Fills `out` with the slice `shard` of parameter `name` (a checkpoint's or an imported model's).
using SliceReader =
    std::function<void(const std::string& name, const model::TensorShard& shard, float* out)>;

// The parameters, into the model's buffer (ZeRO-3: the whole parameters into host memory,
// of which this rank keeps its shard; mixed precision: likewise, as the fp32 master).
void read_parameters(Engine& e, const SliceReader& read_slice) {
  model::ParameterSet& params = e.gpt.params();
  parallel::Zero3Params* zero3 = e.data_parallel.zero3();
  parallel::MixedParams* mixed = e.data_parallel.mixed();
  const bool whole_first = zero3 != nullptr || mixed != nullptr;
  std::vector<float> whole(whole_first ? static_cast<size_t>(params.total()) : 0, 0.0f);
  for (const model::Param& p : params.list()) {
    read_slice(p.name, p.shard, (whole_first ? whole.data() : params.data()) + p.offset);
  }
  if (zero3) zero3->load_flat(whole.data());
  if (mixed) mixed->load_master(whole.data());
}

// balance: bias: each MoE layer's expert bias. (A checkpoint of another balance mode has
// none, but resuming refuses a model config that differs; should one lack it, it stays 0.)
void read_expert_biases(Engine& e, checkpoint::CheckpointReader& reader) {
  for (const model::MoeLayer& l : e.gpt.moe_layers()) {
    std::vector<float>& bias = l.ffn->expert_bias();
    if (bias.empty() || !reader.contains(l.ffn->expert_bias_name())) continue;
    model::TensorShard whole;
    whole.global_shape = {static_cast<int64_t>(bias.size())};
    reader.read_slice(l.ffn->expert_bias_name(), whole, bias.data());
  }
}

// model.init_from, when no checkpoint was chosen (a run's own checkpoint wins, so a restart
// resumes rather than starting over): the parameters from a Hugging Face folder, each rank
// copying only its own slices. The optimizer starts fresh, the data stream from sample 0.
void import_parameters(Engine& e, const fs::path& folder_path, const Say& say) {
  checkpoint::HfModelFolder folder(folder_path, e.gpt.config());
  folder.check();
  read_parameters(e, [&](const std::string& name, const model::TensorShard& shard, float* out) {
    folder.read_slice(name, shard, out);
  });
  if (say) say("initialised the parameters from " + folder_path.string() + " (model.init_from)");
}

// Every state buffer the optimizer keeps, laid out like the parameters; InputError when
// the checkpoint `chosen` was written by another optimizer type.
void read_optimizer_state(Engine& e, checkpoint::CheckpointReader& reader, const fs::path& chosen) {
  const model::ParameterSet& params = e.gpt.params();
  optim::Optimizer& opt = e.data_parallel.optimizer();
  // An imported checkpoint (step 0, `ckpt import`) holds no optimizer state: it starts fresh.
  const std::vector<std::string>& names = reader.tensor_names();
  if (reader.metadata().step == 0 &&
      std::none_of(names.begin(), names.end(), checkpoint::is_optimizer_tensor)) {
    return;
  }
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
}

// fp16: continue with the saved loss scale (a checkpoint from an fp32/bf16 run has none:
// the scale starts from precision.loss_scale).
void restore_loss_scale(Engine& e, const checkpoint::CheckpointMetadata& meta) {
  const nlohmann::json& extra = meta.extra;
  if (e.loss_scaler && extra.contains("loss_scale")) {
    e.loss_scaler->load({extra["loss_scale"].at("scale").get<double>(),
                         extra["loss_scale"].at("good_steps").get<int64_t>()});
  }
}

// The data stream goes on from the first sample the checkpoint had not drawn, whatever
// the global batch is now. `say`: rank 0's, empty on the others.
void continue_data_stream(Engine& e, const checkpoint::CheckpointMetadata& meta, int64_t step,
                          const Say& say) {
  e.layout.first_step = step;
  e.layout.first_sample = meta.data.samples_consumed;
  const std::string blend_note = continue_blend(e, meta);
  if (say && !blend_note.empty()) say(blend_note);
  const int64_t old_batch = meta.extra.value("global_batch_size", e.layout.global_batch());
  if (say && old_batch != e.layout.global_batch()) {
    say("global batch changed from " + std::to_string(old_batch) + " to " +
        std::to_string(e.layout.global_batch()) + " samples: the data continues from sample " +
        std::to_string(meta.data.samples_consumed) + ", the learning-rate schedule from step " +
        std::to_string(step));
  }
  // The sampler draws from (seed, step, ...): another seed means another data stream from
  // here on, which a user who edited the spec should hear about (parameters and optimizer
  // state still come from the checkpoint).
  if (say && step < e.options.training.steps && meta.rng.is_object() && meta.rng.contains("seed") &&
      meta.rng["seed"].is_number_unsigned() && meta.rng["seed"].get<uint64_t>() != e.options.seed) {
    say("seed changed from " + std::to_string(meta.rng["seed"].get<uint64_t>()) + " to " +
        std::to_string(e.options.seed) + ": from step " + std::to_string(step + 1) +
        " the data is drawn with the new seed (weights and optimizer state come from the "
        "checkpoint)");
  }
}

}  // namespace

int64_t Checkpointer::restore(const std::string& resume) {
  const int64_t step = load(resume);
  cadence_.start(step, CheckpointCadence::Clock::now());
  return step;
}

int64_t Checkpointer::choose(const std::string& resume, fs::path& chosen) {
  comm::Communicator& world = *e_.groups.world;
  // Rank 0 picks and verifies the checkpoint; every rank then reads its own slices. The
  // choice travels as a step number (-1: none; -2 / -3: rank 0 found bad input / failed
  // otherwise and reports why; the others fail the same way, so the launcher sees one
  // kind of failure whichever rank it hears from first).
  int64_t step = -1;
  if (world.rank() == 0) {
    try {
      step = choose_on_rank0(e_, dir_, resume, say_, chosen);
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
  if (step >= 0 && world.rank() != 0) {
    // The same choice as rank 0's: auto picks a step_<N> directory whose metadata says step
    // N (read_metadata checks), a path resolves the same way on every rank.
    chosen = resume == "auto" ? dir_ / checkpoint::step_dir_name(step)
                              : checkpoint::resolve_checkpoint(resume);
  }
  return step;
}

int64_t Checkpointer::load(const std::string& resume) {
  fs::path chosen;
  const int64_t step = choose(resume, chosen);
  if (step < 0) {
    const fs::path& init_from = e_.options.model.init_from;
    if (!init_from.empty()) {
      import_parameters(e_, init_from, e_.groups.world->rank() == 0 ? say_ : Say());
    }
    return 0;
  }
  checkpoint::CheckpointReader reader(chosen);
  reader.set_verify_on_read(false);  // rank 0 verified every file
  read_parameters(e_, [&](const std::string& name, const model::TensorShard& shard, float* out) {
    reader.read_slice(name, shard, out);
  });
  read_expert_biases(e_, reader);
  read_optimizer_state(e_, reader, chosen);
  restore_dp_sync_state(e_, reader, say_);
  const checkpoint::CheckpointMetadata& meta = reader.metadata();
  restore_loss_scale(e_, meta);
  const bool rank0 = e_.groups.world->rank() == 0;
  continue_data_stream(e_, meta, step, rank0 ? say_ : Say());
  if (rank0 && say_) {
    const auto& l = meta.layout;
    say_("resumed from " + chosen.string() + ": step " + std::to_string(step) +
         " (written with dp " + std::to_string(l.dp) + " x tp " + std::to_string(l.tp) + " x pp " +
         std::to_string(l.pp) + ", zero " + std::to_string(l.zero) + ")");
  }
  return step;
}

}  // namespace trainctl::train
