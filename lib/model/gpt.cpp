#include "model/gpt.h"

#include <functional>
#include <stdexcept>
#include <string>

#include "model/moe/moe_ffn.h"

namespace trainctl::model {

namespace {

// Each chunk's slots: options.chunk_slots, or options.slots for every chunk.
std::vector<int> slots_per_chunk(const GptOptions& options, const GptShardSpec& shard) {
  const size_t chunks = shard.chunks.size();
  if (options.chunk_slots.empty()) return std::vector<int>(chunks, options.slots);
  if (options.chunk_slots.size() != chunks) {
    throw std::invalid_argument("Gpt: chunk_slots needs one entry per chunk (" +
                                std::to_string(chunks) + ")");
  }
  return options.chunk_slots;
}

void check_sequence_parallel(const ModelContext& ctx) {
  if (!ctx.sequence_parallel) return;
  if (ctx.shard.tp_size < 2 || ctx.T % ctx.shard.tp_size != 0) {
    throw std::invalid_argument("Gpt: sequence parallelism needs tp > 1 dividing seq_len (tp " +
                                std::to_string(ctx.shard.tp_size) + ", seq_len " +
                                std::to_string(ctx.T) + ")");
  }
}

ModelContext make_context(const ModelConfig& config, const GptOptions& options, int batch,
                          int seq_len) {
  ModelContext ctx;
  ctx.config = config;
  ctx.shard = options.shard.chunks.empty() ? GptShardSpec::whole(config) : options.shard;
  ctx.B = batch;
  ctx.T = seq_len;
  ctx.recompute = options.recompute;
  ctx.tp = options.tp;
  ctx.cp = options.cp;
  ctx.ep = options.ep;
  ctx.sequence_parallel = options.sequence_parallel;
  ctx.kept = options.kept_activations;
  return ctx;
}

observe::TraceFields layer_fields(int layer, int chunk) {
  observe::TraceFields f;
  f.layer = layer;
  f.chunk = chunk;
  return f;
}

}  // namespace

Gpt::Gpt(const ModelConfig& config, ops::Backend& backend, int batch, int seq_len,
         GptOptions options)
    : ctx_(make_context(config, options, batch, seq_len)),
      params_(backend),
      arena_(&backend, options.kept_activations) {
  if (seq_len > config.max_seq_len) {
    throw std::invalid_argument("sequence length exceeds the model's position table");
  }
  if (config.llama() && (config.n_head % config.kv_heads() != 0 || config.head_dim() % 2 != 0)) {
    throw std::invalid_argument("Gpt: llama needs n_kv_head dividing n_head and an even head size");
  }
  const int tp = ctx_.shard.tp_size;
  if (tp > 1 &&
      (ctx_.tp == nullptr || ctx_.tp->size() != tp || ctx_.tp->rank() != ctx_.shard.tp_rank)) {
    throw std::invalid_argument("Gpt: a tensor-parallel shard needs its TP communicator");
  }
  if (options.slots < 1) throw std::invalid_argument("Gpt: slots must be >= 1");
  for (int n : options.chunk_slots) {
    if (n < 1) throw std::invalid_argument("Gpt: every chunk needs a slot");
  }
  check_tp_divisible(config, tp);
  if (ctx_.cp.active()) {
    if (options.cp_group == nullptr || options.cp_group->size() != ctx_.cp.cp ||
        options.cp_group->rank() != ctx_.cp.rank || seq_len != ctx_.cp.local_len()) {
      throw std::invalid_argument("Gpt: a context-parallel shard needs its CP communicator");
    }
    cp_ring_ = std::make_unique<comm::RingExchange>(*options.cp_group);
    ctx_.cp_ring = cp_ring_.get();
  }
  check_sequence_parallel(ctx_);
  ctx_.backend = &backend;
  ctx_.params = &params_;
  ParamList list(ctx_.shard);
  parts_ = compose_model(ctx_, list);
  for (const ParamSpec& spec : list.specs()) params_.declare(spec);
  if (options.unbound_params) {
    params_.allocate_unbound();
  } else if (options.grads_only) {
    params_.allocate_grads_only();
  } else {
    params_.allocate();
  }
  parts_.allocate(ctx_, arena_, slots_per_chunk(options, ctx_.shard));
  ctx_.sp_rows = parts_.sp_rows;
  // Gradient pieces (grad_pieces): the tied copy's, each block's from the last, the
  // embeddings'.
  int piece = tied_copy_param() >= 0 ? 1 : 0;
  block_first_piece_.assign(parts_.blocks.size(), 0);
  for (size_t j = parts_.blocks.size(); j-- > 0;) {
    block_first_piece_[j] = piece;
    piece += static_cast<int>(parts_.blocks[j]->piece_starts().size());
  }
  embedding_piece_ = piece;
}

Gpt::~Gpt() = default;

GptMemoryFloats gpt_memory_floats(const ModelConfig& config, const GptOptions& options, int batch,
                                  int seq_len) {
  const ModelContext ctx = make_context(config, options, batch, seq_len);
  check_tp_divisible(config, ctx.shard.tp_size);
  check_sequence_parallel(ctx);
  ParamList list(ctx.shard);
  ModelParts parts = compose_model(ctx, list);
  ActivationArena arena(nullptr, options.kept_activations);
  parts.allocate(ctx, arena, slots_per_chunk(options, ctx.shard));
  GptMemoryFloats m = arena.floats();
  m.params = flat_size(list.specs());
  return m;
}

void Gpt::init_weights(uint64_t seed) { params_.initialize(seed); }

int64_t Gpt::boundary_floats() const { return static_cast<int64_t>(ctx_.rows_C()); }

int64_t Gpt::boundary_bytes() const {
  return boundary_floats() * static_cast<int64_t>(dtype_size(arena_.kept()));
}

void Gpt::store_boundary(void* dst, const float* src) {
  backend().cast(dst, arena_.kept(), src, DType::fp32, static_cast<size_t>(boundary_floats()));
}

void Gpt::copy_boundary(void* dst, const void* src) {
  backend().cast(dst, arena_.kept(), src, arena_.kept(), static_cast<size_t>(boundary_floats()));
}

void Gpt::check_slot(int chunk, int slot) const {
  if (chunk < 0 || chunk >= num_chunks() || slot < 0 ||
      slot >= static_cast<int>(parts_.inputs[static_cast<size_t>(chunk)].size())) {
    throw std::out_of_range("Gpt: no activation slot " + std::to_string(slot) + " of chunk " +
                            std::to_string(chunk));
  }
}

void* Gpt::input_buffer(int chunk, int slot) {
  check_slot(chunk, slot);
  return parts_.inputs[static_cast<size_t>(chunk)][static_cast<size_t>(slot)];
}

// --- blocks and gradient pieces -----------------------------------------------------------

int Gpt::num_blocks() const { return static_cast<int>(parts_.blocks.size()); }

std::vector<MoeLayer> Gpt::moe_layers() {
  std::vector<MoeLayer> out;
  for (int b = 0; b < num_blocks(); ++b) {
    const int chunk = chunk_of_block(b);
    const int layer = ctx_.shard.chunks[static_cast<size_t>(chunk)].begin + b -
                      parts_.chunk_first_block[static_cast<size_t>(chunk)];
    auto* ffn = dynamic_cast<moe::MoeFfn*>(parts_.blocks[static_cast<size_t>(b)]->feed_forward());
    if (ffn != nullptr) out.push_back({layer, ffn});
  }
  return out;
}

int Gpt::chunk_of_block(int block) const {
  int chunk = 0;
  const auto& first = parts_.chunk_first_block;
  while (chunk + 1 < num_chunks() && first[static_cast<size_t>(chunk) + 1] <= block) ++chunk;
  return chunk;
}

std::pair<int64_t, int64_t> Gpt::block_param_range(int block) const {
  const auto [first, end] = parts_.blocks.at(static_cast<size_t>(block))->param_range();
  const Param& last = params_.at(static_cast<size_t>(end) - 1);
  return {params_.at(static_cast<size_t>(first)).offset, last.offset + last.numel};
}

int Gpt::embedding_param() const { return parts_.embedding ? parts_.embedding->token_table() : -1; }

int Gpt::tied_copy_param() const { return parts_.head ? parts_.head->tied_copy() : -1; }

std::vector<std::pair<int64_t, int64_t>> Gpt::grad_pieces() const {
  std::vector<std::pair<int64_t, int64_t>> pieces;
  int64_t end = params_.total();
  auto piece_from = [&](int param) {
    const int64_t begin = params_.at(static_cast<size_t>(param)).offset;
    pieces.emplace_back(begin, end);
    end = begin;
  };
  if (tied_copy_param() >= 0) piece_from(tied_copy_param());
  // The last block's first piece runs on through the final norm (and an untied lm_head).
  for (size_t j = parts_.blocks.size(); j-- > 0;) {
    for (int start : parts_.blocks[j]->piece_starts()) piece_from(start);
  }
  if (parts_.embedding) {
    const int wpe = parts_.embedding->positions();
    // wte on a piece of its own: it is final only after the exchange with the last stage.
    if (exchanges_tied_embedding() && wpe >= 0) piece_from(wpe);
    piece_from(embedding_param());
  }
  return pieces;
}

int Gpt::tied_embedding_piece() const {
  if (!exchanges_tied_embedding()) return -1;
  if (tied_copy_param() >= 0) return 0;
  return static_cast<int>(grad_pieces().size()) - 1;  // wte is the last piece
}

int Gpt::tied_embedding_param() const {
  if (!ctx_.config.tied()) return -1;
  return tied_copy_param() >= 0 ? tied_copy_param() : embedding_param();
}

int Gpt::head_weight() const {
  const int lm_head = parts_.head ? parts_.head->untied_weight() : -1;
  return lm_head >= 0 ? lm_head : tied_embedding_param();
}

// --- forward and backward -----------------------------------------------------------------

const float* Gpt::forward_chunk(int chunk, int slot, const int32_t* tokens, const int32_t* targets,
                                bool backward, float grad_scale, ChunkLoss* loss) {
  // 16-bit kept activations: the chunk reads its input through the fp32 working buffer.
  void* stored = input_buffer(chunk, slot);
  const bool packs = arena_.packs();
  float* input = packs ? parts_.input_working : static_cast<float*>(stored);
  ctx_.grad_scale = backward ? grad_scale : 0.0f;  // for losses inside blocks (MoE aux)
  if (has_embedding(chunk)) {
    // Each TP rank embeds the tokens of its vocabulary rows; the allreduce sums (under
    // sequence parallelism, the reduce-scatter: this rank's rows of the sum).
    float* embedded = ctx_.sp() ? parts_.sp_full : input;
    resident_hook(true, ResidentUse::embedding_forward, false);
    parts_.embedding->forward(tokens, embedded);
    resident_hook(false, ResidentUse::embedding_forward, false);
    if (ctx_.sp()) {
      ctx_.sp_scatter_sum(embedded, input);
    } else {
      ctx_.tp_allreduce(input, ctx_.NC());
    }
    ctx_.round_kept(input, ctx_.rows_C());
    if (packs && backward) backend().cast(stored, arena_.kept(), input, DType::fp32, ctx_.rows_C());
  } else if (packs) {
    backend().cast(input, DType::fp32, stored, arena_.kept(), ctx_.rows_C());
  }
  const float* x = input;
  const int first = parts_.chunk_first_block[static_cast<size_t>(chunk)];
  const int end = first + ctx_.shard.chunks[static_cast<size_t>(chunk)].size();
  for (int b = first; b < end; ++b) {
    if (block_hooks_.before_forward) block_hooks_.before_forward(b);
    observe::TraceScope trace(trace_, "forward", "compute", layer_fields(b, chunk));
    x = parts_.blocks[static_cast<size_t>(b)]->forward(slot, x);
    if (backward) arena_.pack(b, slot);  // 16-bit kept activations: into the slot's store
  }
  if (!has_head(chunk)) return x;  // the last block's working buffer (ModelParts::allocate)
  observe::TraceScope trace(trace_, "forward.lm_head", "compute", layer_fields(-1, chunk));
  resident_hook(true, ResidentUse::head_forward, backward);
  parts_.head->forward(slot, x, targets, backward, grad_scale, loss);
  resident_hook(false, ResidentUse::head_forward, backward);
  return nullptr;
}

const float* Gpt::backward_chunk(int chunk, int slot, const int32_t* tokens, bool report,
                                 DeferredWeightGrads* weights_later) {
  // Deferred, a piece is reported in W, behind the products that make it final.
  const std::function<void(int)> report_later = [this, weights_later](int piece) {
    weights_later->add([this, piece] { report_grad_ready(piece); });
  };
  const std::function<void(int)>* hook = weights_later ? &report_later : &grad_ready_;
  ctx_.defer = weights_later;
  struct Undefer {
    ModelContext& ctx;
    ~Undefer() { ctx.defer = nullptr; }
  } undefer{ctx_};
  void* stored = input_buffer(chunk, slot);
  const bool packs = arena_.packs();
  float* input = packs ? parts_.input_working : static_cast<float*>(stored);
  float* dres = parts_.dres;
  const int first = parts_.chunk_first_block[static_cast<size_t>(chunk)];
  const int end = first + ctx_.shard.chunks[static_cast<size_t>(chunk)].size();
  auto& blocks = parts_.blocks;
  if (has_head(chunk)) {
    if (packs && end > first) arena_.unpack_output(end - 1, slot);
    resident_hook(true, ResidentUse::head_backward, true);
    parts_.head->backward(slot, blocks[static_cast<size_t>(end) - 1]->output(slot), dres);
    resident_hook(false, ResidentUse::head_backward, true);
  }
  for (int b = end - 1; b >= first; --b) {
    Block& block = *blocks[static_cast<size_t>(b)];
    const float* x = b == first ? input : blocks[static_cast<size_t>(b) - 1]->output(slot);
    if (block_hooks_.before_backward) block_hooks_.before_backward(b);
    {
      observe::TraceScope trace(trace_, "backward", "compute", layer_fields(b, chunk));
      if (packs && b == first) {  // 16 bits: this block's input back into its working buffer
        backend().cast(input, DType::fp32, stored, arena_.kept(), ctx_.rows_C());
      } else if (packs) {
        arena_.unpack_output(b - 1, slot);
      }
      arena_.unpack(b, slot);
      block.recompute(slot, x);
      const PieceReport pieces =
          report ? PieceReport(hook, block_first_piece_[static_cast<size_t>(b)]) : PieceReport();
      block.backward(slot, x, dres, pieces);
    }
    if (block_hooks_.after_backward) block_hooks_.after_backward(b);
  }
  if (!has_embedding(chunk)) return dres;
  // Sequence parallel: the backward of the embedding's reduce-scatter gathers every row.
  if (ctx_.sp()) ctx_.sp_gather(dres, parts_.sp_full);
  resident_hook(true, ResidentUse::embedding_backward, true);
  parts_.embedding->backward(ctx_.sp() ? parts_.sp_full : dres, tokens);
  resident_hook(false, ResidentUse::embedding_backward, true);
  // The embeddings' piece(s): wte's own piece, when it has one, the caller reports (llama's
  // only embedding piece is the tied one when it is exchanged).
  const bool wte_alone = parts_.embedding->positions() < 0 && exchanges_tied_embedding();
  if (report && !wte_alone) {
    if (weights_later != nullptr) {
      report_later(embedding_piece_);
    } else {
      report_grad_ready(embedding_piece_);
    }
  }
  return nullptr;
}

// --- the whole model ------------------------------------------------------------------------

double Gpt::forward_backward(const int32_t* tokens, const int32_t* targets, float grad_scale,
                             int64_t* count) {
  if (num_chunks() != 1 || !ctx_.shard.embedding || !ctx_.shard.head) {
    throw std::logic_error("Gpt::forward_backward needs the whole model on this rank");
  }
  ChunkLoss loss;
  forward_chunk(0, 0, tokens, targets, true, grad_scale, &loss);
  backward_chunk(0, 0, tokens, true);
  *count = loss.count;
  return loss.sum;
}

double Gpt::forward_loss(const int32_t* tokens, const int32_t* targets, int64_t* count) {
  if (num_chunks() != 1 || !ctx_.shard.embedding || !ctx_.shard.head) {
    throw std::logic_error("Gpt::forward_loss needs the whole model on this rank");
  }
  ChunkLoss loss;
  forward_chunk(0, 0, tokens, targets, false, 0.0f, &loss);
  *count = loss.count;
  return loss.sum;
}

}  // namespace trainctl::model
