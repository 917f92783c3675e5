#pragma once
// Saving and restoring an engine's state through the sharded checkpoint format
// (lib/checkpoint): every rank holding unique state writes one file with its parameter and
// optimizer-state shards (DP replicas and TP copies of replicated tensors are written once),
// world rank 0 writes metadata.json and commits the directory atomically. Restoring reads
// each rank's slices from whatever layout wrote the checkpoint.
//
// Every public call is collective over the world group: all ranks call it at the same
// step boundary.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "checkpoint/metadata.h"
#include "train/cadence.h"
#include "train/engine.h"

namespace trainctl::train {

class Checkpointer {
 public:
  // `say` prints a line for the user (rank 0's console); called on rank 0 only.
  // `crash_at_step`, a test hook (launch/test_hooks.h, TRAINCTL_TEST_CRASH_IN_CHECKPOINT):
  // the last world rank dies (_exit 9) right after writing its file of that step's
  // checkpoint, before the checkpoint is complete; -1: never.
  Checkpointer(Engine& engine, const std::filesystem::path& run_dir,
               std::function<void(const std::string&)> say, int64_t crash_at_step = -1);
  // Waits for a background write (without committing it: an unfinished checkpoint is
  // never made visible).
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Whether this rank asks for a checkpoint after the coming step because
  // checkpoint.every_minutes have passed (world rank 0's clock alone decides).
  bool time_due() const { return cadence_.time_due(CheckpointCadence::Clock::now()); }
  // After `step` completed steps: saves (checkpoint.async) when checkpoint.every_steps
  // divides `step` or some rank asked by time (`requested`, StepOutcome::checkpoint); not
  // after the last step (`last`), which save_final() covers.
  void maybe_save(int64_t step, bool last, bool requested);
  // The end of training, or a stop signal (Slurm preemption): a complete checkpoint of
  // `step` unless one exists, and every pending write committed, before the run reports done.
  void save_final(int64_t step);

  // Snapshots the state after `step` completed steps. Async: the files are written on a
  // background thread and committed by a later commit_if_written(); else written and
  // committed before returning. A pending async save is completed first.
  void save(int64_t step, bool async);
  // This rank's background write has finished (true when none is pending).
  bool written() const;
  bool pending() const { return pending_step_ >= 0; }
  // Commits the pending save once every rank's write has finished; `all_written` is the
  // agreement of all ranks' written() (the caller gathers it with its per-step collective).
  void commit_if_written(bool all_written);
  // Blocks until a pending save is written on every rank and committed.
  void finish_pending();

  // Loads the checkpoint `resume` selects ("auto", "none" or a path; see TrainContext and
  // resume_choice.h) into the engine's model and optimizer. Returns the completed steps to
  // continue after (0: nothing loaded). With "auto", every skipped checkpoint is reported
  // and the next older one used; a path is used as given or refused (InputError). The
  // checkpoint cadence counts from here.
  int64_t restore(const std::string& resume);

 private:
  // Restoring (train/checkpoint_restore.cpp). choose: the step of the checkpoint `resume`
  // selects, as world rank 0 decided it (-1: none), and its directory in `chosen`.
  int64_t load(const std::string& resume);
  int64_t choose(const std::string& resume, std::filesystem::path& chosen);
  // Saving (train/checkpointing.cpp).
  struct Snapshot;
  void write_snapshot(const Snapshot& s);
  void commit(int64_t step);

  Engine& e_;
  std::filesystem::path dir_;  // run_dir/checkpoints
  std::function<void(const std::string&)> say_;
  CheckpointCadence cadence_;
  std::filesystem::path tmp_;
  int64_t pending_step_ = -1;
  std::unique_ptr<Snapshot> snapshot_;
  std::thread writer_;
  std::exception_ptr write_error_;
  std::atomic<bool> write_done_{true};
  int64_t crash_at_step_;  // the test hook above
};

}  // namespace trainctl::train
