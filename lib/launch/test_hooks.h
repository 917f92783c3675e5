#pragma once
// Every test hook in one place. A test hook is NOT a user feature: an environment variable
// that makes a worker misbehave on purpose, so the integration tests can prove that the
// launcher, the watchdog and the checkpoint commit handle real failures. Workers read them
// once at start-up, with the rest of their environment (launch/worker_env.h), into this
// struct, which is passed down to the code that acts on them; nothing else reads them.
// The launcher passes them through to the workers (it sets the other TRAINCTL_* variables
// itself and drops the ones it inherited; TRAINCTL_TEST_* and non-TRAINCTL_ names pass).
//
//   TEST_TRAINCTL_STALL=rank=R,group=G,op=OP[,call=N],seconds=S
//       rank R hangs S seconds just before the N-th call of OP on group G, as if its own
//       code were stuck (comm/watched_communicator.h, StallHook): the hang watchdog's test.
//   TRAINCTL_TEST_CRASH_IN_CHECKPOINT=STEP
//       the last world rank dies (_exit 9) right after writing its file of step STEP's
//       checkpoint, before the checkpoint is complete, to prove a crash mid-save leaves
//       the previous checkpoint intact (train/checkpointing.h).
//   TRAINCTL_TEST_SLOWDOWN=RANK:FACTOR
//       worker RANK takes FACTOR times as long for each step's computation (it sleeps
//       FACTOR - 1 times its compute time after the backward pass): a heterogeneous
//       cluster on one machine, to compare synchronous DP with parameter servers.
//   TRAINCTL_TEST_BATCH_LOG=1
//       not a failure: every worker that feeds a DP replica (tp rank 0, first pipeline
//       stage) appends one line per step to run_dir/batches/rank<R>.jsonl naming each global
//       sample it trained on and a hash of its token ids (train/batch_log.h), so a test can
//       compare the batches of two runs, e.g. across a resume on another layout.
#include <cstdint>
#include <string>

namespace trainctl::launch {

inline constexpr const char* kStallHookVariable = "TEST_TRAINCTL_STALL";
inline constexpr const char* kCrashInCheckpointVariable = "TRAINCTL_TEST_CRASH_IN_CHECKPOINT";
inline constexpr const char* kSlowdownVariable = "TRAINCTL_TEST_SLOWDOWN";
inline constexpr const char* kBatchLogVariable = "TRAINCTL_TEST_BATCH_LOG";

struct TestHooks {
  std::string stall;                      // TEST_TRAINCTL_STALL as given ("": off)
  int64_t crash_in_checkpoint_step = -1;  // TRAINCTL_TEST_CRASH_IN_CHECKPOINT (-1: off)
  int slowdown_rank = -1;                 // TRAINCTL_TEST_SLOWDOWN (-1: off)
  double slowdown_factor = 1.0;
  bool batch_log = false;  // TRAINCTL_TEST_BATCH_LOG=1
};

}  // namespace trainctl::launch
