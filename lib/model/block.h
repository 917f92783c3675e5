#pragma once
// The interfaces a model is built from (docs/ARCHITECTURE.md, "The model as blocks").
//
// A Block is one layer of the transformer: the unit that pipeline stages, ZeRO-3 residency
// and the trace see. The model (model/gpt.h) holds a list of them, chunk by chunk, made by
// model/block_factory.h from the ModelConfig. Today's one kind is the pre-norm residual
// block (model/transformer_block.h), made of two Branches.
//
// A Branch is one residual sub-layer inside a block, y = f(h) with h = norm(x) and
// x += y: the token mixer (attention: model/attention_mha.h, model/attention_gqa.h) and
// the feed-forward (model/mlp_gelu.h, model/mlp_swiglu.h). A new mixer (context-parallel
// attention) or a new feed-forward (mixture of experts) is a new Branch, chosen per layer in
// block_factory.cpp; nothing else changes.
//
// What a block or branch implements, and the rules that keep every layout, schedule,
// recomputation mode and ZeRO stage correct:
//   - parameters: declared in its constructor through ParamList (checkpoint name, global
//     shape, init, TP split), contiguous and in flat-buffer order;
//   - gradient pieces: piece_starts(), the parameter starting each piece in the order its
//     backward makes them final (descending through the flat buffer), and one report per
//     piece in that order, before the product that gives the input gradient;
//   - activations: allocate() takes what each of the `slots` micro-batches keeps, and what
//     recomputation drops from the arena's shared buffers (model/activation_arena.h);
//   - forward, recompute (refill what the mode dropped, the same kernels on the same inputs:
//     bitwise), backward; TP collectives inside, in the same order on every TP rank;
//   - cost: macs_per_token() (pipeline partition, model/shard.h).
#include <functional>
#include <utility>
#include <vector>

#include "model/activation_arena.h"
#include "model/model_context.h"

namespace trainctl::model {

// Reports gradient pieces final during backward: piece k of a part is model piece first + k.
class PieceReport {
 public:
  PieceReport() = default;  // reports nothing
  PieceReport(const std::function<void(int)>* hook, int first) : hook_(hook), first_(first) {}
  void ready(int k = 0) const {
    if (hook_ != nullptr && *hook_) (*hook_)(first_ + k);
  }
  PieceReport from(int k) const { return {hook_, first_ + k}; }

 private:
  const std::function<void(int)>* hook_ = nullptr;
  int first_ = 0;
};

class Branch {
 public:
  virtual ~Branch() = default;
  // Parameter indices [first, end), declared in the constructor.
  int first_param() const { return first_; }
  int end_param() const { return end_; }
  // The parameter starting each gradient piece, in the order backward reports them.
  virtual std::vector<int> piece_starts() const { return {first_}; }

  // Buffers for `slots` micro-batches in flight.
  virtual void allocate(ActivationArena& arena, int slots) = 0;
  // y = f(h) [N,C], summed over the TP group (ModelContext::tp_sum_rows: under sequence
  // parallelism only y's first rows() rows, this rank's). y may be h's buffer: read h fully
  // before the first write to y.
  virtual void forward(int slot, const float* h, float* y) = 0;
  // Selective recomputation: refill what this branch dropped from the slot's kept
  // activations, without reading its input (the norm before it is recomputed after); with
  // y, also write the output again.
  virtual void refill(int slot, float* y) = 0;
  // dy = d(output) [N,C]; writes dh = d(h) [N,C] summed over the TP group (tp_sum_rows, as
  // y; dh is this branch's scratch until then). Parameter gradients accumulate; each piece is
  // reported as soon as its gradients are final. Reads h (the slot's, as forward saw it).
  virtual void backward(int slot, const float* h, const float* dy, float* dh,
                        const PieceReport& report) = 0;
  // Multiply-adds per token of the forward, whole model (not per TP rank).
  virtual double macs_per_token(int seq_len) const = 0;

 protected:
  int first_ = 0, end_ = 0;
};

class Block {
 public:
  virtual ~Block() = default;
  // Parameter indices [first, end).
  virtual std::pair<int, int> param_range() const = 0;
  virtual std::vector<int> piece_starts() const = 0;
  virtual void allocate(ActivationArena& arena, int slots) = 0;
  // Runs the block on input x [N,C]; returns its output (kept in the slot until its
  // backward; with 16-bit kept activations in the slot's store, and the pointer a working
  // buffer valid until the next block after this one runs, or ActivationArena::
  // unpack_output fills it again).
  virtual const float* forward(int slot, const float* x) = 0;
  virtual const float* output(int slot) const = 0;
  // Refills what recomputation dropped from the slot, just before backward.
  virtual void recompute(int slot, const float* x) = 0;
  // dres holds d(output) on entry and d(x) on exit.
  virtual void backward(int slot, const float* x, float* dres, const PieceReport& report) = 0;
  virtual double macs_per_token(int seq_len) const = 0;
  // The feed-forward branch (the MoE layers' statistics and expert bias), or null.
  virtual Branch* feed_forward() { return nullptr; }
};

}  // namespace trainctl::model
