#pragma once
// Pipeline-parallel schedules as pure functions: each stage's ordered instruction list for one
// training step, with no communication or tensors involved. The engine will execute these
// lists; `trainctl plan` simulates and draws them (plan/pipeline_simulate.h).
//
// Stages are the physical pipeline ranks. Each holds V model chunks (V = virtual_stages: 1
// for gpipe and 1f1b); chunk c of stage s is virtual stage v = c * num_stages + s, so the
// model runs virtual stages 0, 1, ..., num_stages * V - 1 in order (with V == 1, v == s).
//
// Conventions shared by every schedule:
//   - activations flow from virtual stage v to v + 1, gradients from v to v - 1; messages
//     are identified by (activation or gradient, micro-batch, receiving virtual stage);
//   - a forward on virtual stage > 0 is immediately preceded by its recv_activation, and a
//     forward on virtual stage < last is immediately followed by its send_activation;
//   - a backward on virtual stage < last is immediately preceded by its recv_grad, and a
//     backward on virtual stage > 0 is immediately followed by its send_grad;
//   - sends are asynchronous (isend): they never wait for the receiver;
//   - the list ends with exactly one optimizer_step.
//
// The zero-bubble schedules (Qi et al. 2024, arXiv 2401.10241) split a backward in two: B
// (backward_input: the gradient of the chunk's input, what the previous stage waits for)
// and W (backward_weight: the weight gradients, which nobody waits for). recv_grad and
// send_grad surround B as they surround a full backward; W of a (chunk, micro-batch) comes
// after its B, and a chunk's Ws run in micro-batch order (the gradients then accumulate in
// the same order as under 1F1B: bitwise the same sums).
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
  optimizer_step,
  backward_input,   // B: input gradient only; the weight-gradient work is kept for W
  backward_weight,  // W: the weight gradients B kept
};

const char* to_string(OpKind kind);

// True for forward, backward, backward_input and backward_weight (the ops that take
// compute time).
bool is_compute(OpKind kind);
// True for backward and backward_input: the ops that consume a received gradient and
// produce the input gradient.
bool is_input_backward(OpKind kind);
// True for backward and backward_weight: the op after which a (chunk, micro-batch) holds
// nothing more (its activations, or what W needs of them).
bool ends_micro_batch(OpKind kind);

struct Instruction {
  OpKind kind;
  int micro_batch;  // -1 for optimizer_step
  int peer_stage;   // the other end of a send/recv (a physical stage, never this one);
                    // -1 for compute ops and optimizer_step
  // The model chunk on this rank (interleaved schedule; always 0 otherwise): the one a
  // forward/backward computes, the one that consumes a received message, or the one that
  // produced a sent message. Its virtual stage is chunk * num_stages + this stage.
  int chunk = 0;

  bool operator==(const Instruction&) const = default;
};

// "forward mb 3", "send_activation mb 3 to stage 2", "optimizer_step"; instructions of a
// chunk other than 0 add it: "forward mb 3 chunk 1".
std::string describe(const Instruction& instruction);

enum class ScheduleKind {
  gpipe,        // all forwards, then all backwards: peak activations = micro-batches
  one_f_one_b,  // PipeDream-flush as in Megatron: warm-up forwards, 1F1B steady state,
                // cool-down backwards; same bubble as GPipe, peak activations <= stages
  interleaved,  // Megatron's interleaved 1F1B over V >= 2 chunks per stage: bubble cut by
                // about V, at the price of V times more point-to-point messages
  zb1p,         // ZB-H1 (zero bubble, handcrafted 1): 1F1B's warm-up and peak memory with
                // backwards split into B and W; held-back Ws fill the cool-down bubbles
                // (bubble about (p-1)/(3m) instead of 1F1B's (p-1)/m)
};

// "gpipe" | "1f1b" | "interleaved" | "zb1p" (the spelling of parallel.schedule in the job spec).
const char* to_string(ScheduleKind kind);
// Throws InputError naming the accepted values for anything else.
ScheduleKind parse_schedule_kind(std::string_view name);

// The instruction list of `stage` (0-based) in a pipeline of `num_stages` stages running
// `num_micro_batches` (m) micro-batches per step with `virtual_stages` (V) chunks per stage.
// Throws std::invalid_argument unless num_stages >= 1, 0 <= stage < num_stages, m >= 1 and
// V == 1 for gpipe/1f1b; interleaved also needs V >= 2, num_stages >= 2 (one stage would
// send to itself) and m % num_stages == 0.
//
// GPipe: for mb 0..m-1 forward; for mb 0..m-1 backward.
// 1F1B on stage s: w = min(num_stages - s - 1, m) warm-up forwards, then m - w rounds of
// (forward mb w+i, backward mb i), then the remaining w backwards. Backwards run in
// micro-batch order in both.
// Interleaved (Megatron's forward_backward_pipelining_with_interleaving), p = num_stages:
// the k-th forward of a stage (k = 0 .. m*V-1) runs chunk (k / p) % V on micro-batch
// (k / (p*V)) * p + k % p; the k-th backward the same micro-batch on chunk V-1 - (k / p) % V.
// w = min((p - s - 1) * 2 + (V - 1) * p, m * V) warm-up forwards, then m*V - w rounds of
// (forward w+i, backward i), then the remaining w backwards. At most w + 1 (chunk,
// micro-batch) activations are held at once (m * V when w == m * V), each 1/V of a stage's.
// zb1p: 1F1B's warm-up, then F, backward_input, backward_weight as in
// parallel/zero_bubble_schedule.h (stage s holds back s Ws for the cool-down).
std::vector<Instruction> make_schedule(ScheduleKind kind, int stage, int num_stages,
                                       int num_micro_batches, int virtual_stages = 1);

// Every stage's list: result[s] == make_schedule(kind, s, num_stages, num_micro_batches,
// virtual_stages).
std::vector<std::vector<Instruction>> make_all_schedules(ScheduleKind kind, int num_stages,
                                                         int num_micro_batches,
                                                         int virtual_stages = 1);

// Warm-up forwards of `stage` before its first backward: the w above (for every kind).
int warmup_forwards(ScheduleKind kind, int stage, int num_stages, int num_micro_batches,
                    int virtual_stages = 1);

// The bubble fraction of the schedule in theory, with no communication time: (p-1)/(m+p-1)
// for gpipe and 1f1b, (p-1)/(V*m+p-1) for interleaved (the fill and drain of one chunk
// per stage take 1/V of a stage's time), (p-1)/(3m+p-1) for zb1p (ZB-H1 with F, B and W
// of equal cost: a bubble of (p-1)(F+B-W) = (p-1) units against 3m units of work).
double theoretical_bubble(ScheduleKind kind, int num_stages, int num_micro_batches,
                          int virtual_stages = 1);

}  // namespace trainctl::parallel
