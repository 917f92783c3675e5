#pragma once
// Pipeline-parallel schedules as pure functions: each stage's ordered instruction list for one
// training step, with no communication or tensors involved. The engine will execute these
// lists; `trainctl plan` simulates and draws them (parallel/pipeline_simulate.h).
//
// Conventions shared by every schedule:
//   - stage 0 holds the first layers; activations flow to stage + 1, gradients to stage - 1;
//   - a forward on stage > 0 is preceded by recv_activation from stage - 1, and a forward on
//     stage < last is followed by send_activation to stage + 1;
//   - a backward on stage < last is preceded by recv_grad from stage + 1, and a backward on
//     stage > 0 is followed by send_grad to stage - 1;
//   - sends are asynchronous (isend): they never wait for the receiver;
//   - the list ends with exactly one optimizer_step.
#include <string>
#include <string_view>
#include <vector>

namespace trainctl::parallel {

enum class OpKind {
  forward,
  backward,
  send_activation,
  recv_activation,
  send_grad,
  recv_grad,
  optimizer_step
};

const char* to_string(OpKind kind);

// True for forward and backward (the ops that take compute time).
bool is_compute(OpKind kind);

struct Instruction {
  OpKind kind;
  int micro_batch;  // -1 for optimizer_step
  int peer_stage;   // the other end of a send/recv; -1 for compute ops and optimizer_step
  // The model chunk on this rank (interleaved schedule; 0 otherwise): computed by a
  // forward/backward, consuming a received message, or producing a sent one.
  int chunk = 0;

  bool operator==(const Instruction&) const = default;
};

// "forward mb 3", "send_activation mb 3 to stage 2", "optimizer_step".
std::string describe(const Instruction& instruction);

enum class ScheduleKind {
  gpipe,        // all forwards, then all backwards: peak activations = micro-batches
  one_f_one_b,  // PipeDream-flush as in Megatron: warm-up forwards, 1F1B steady state,
                // cool-down backwards; same bubble as GPipe, peak activations <= stages
};

// "gpipe" | "1f1b" (the spelling of parallel.schedule in the job spec).
const char* to_string(ScheduleKind kind);
// Throws InputError naming the accepted values for anything else.
ScheduleKind parse_schedule_kind(std::string_view name);

// The instruction list of `stage` (0-based) in a pipeline of `num_stages` stages running
// `num_micro_batches` micro-batches per step. Throws std::invalid_argument unless
// num_stages >= 1, 0 <= stage < num_stages and num_micro_batches >= 1.
//
// GPipe: for mb 0..m-1 forward; for mb 0..m-1 backward.
// 1F1B on stage s: w = min(num_stages - s - 1, m) warm-up forwards, then m - w rounds of
// (forward mb w+i, backward mb i), then the remaining w backwards. Backwards run in
// micro-batch order in both.
std::vector<Instruction> make_schedule(ScheduleKind kind, int stage, int num_stages,
                                       int num_micro_batches);

// Every stage's list: result[s] == make_schedule(kind, s, num_stages, num_micro_batches).
std::vector<std::vector<Instruction>> make_all_schedules(ScheduleKind kind, int num_stages,
                                                         int num_micro_batches);

}  // namespace trainctl::parallel
