#include "model/gpt.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace trainctl::model {

// Llama reuses the slots: ln1_w/ln2_w the two RMSNorms, attn_w q_proj (k_w, v_w its k and
// v), attn_proj_w o_proj, fc_w gate_proj (up_w up_proj), fc_proj_w down_proj; no biases (-1).
struct Gpt::BlockParams {
  int ln1_w, ln1_b, attn_w, attn_b, attn_proj_w, attn_proj_b;
  int ln2_w, ln2_b, fc_w, fc_b, fc_proj_w, fc_proj_b;
  int k_w = -1, v_w = -1, up_w = -1;
};

// What one block keeps from forward for its backward (local TP widths).
struct Gpt::BlockActs {
  float *ln1, *ln1_mean, *ln1_rstd;  // [N,C], [N], [N] (llama: RMSNorm, mean unused)
  float* qkv;                        // [N,3C/tp]; llama [N,(NH+2NKV)hd/tp] after RoPE
  float* att;                        // [N,C/tp]  attention output before c_proj
  float* lse;                        // [B,NH/tp,T]
  float* res1;                       // [N,C]  residual stream after attention
  float *ln2, *ln2_mean, *ln2_rstd;  // [N,C], [N], [N]
  float* fc;                         // [N,4C/tp] before GELU; llama [N,2H/tp] gate | up
  float* gelu;                       // [N,4C/tp]; llama [N,H/tp] SwiGLU output
  float* res2;                       // [N,C]  residual stream after the MLP: the block output
};

// One micro-batch's activations of one chunk.
struct Gpt::ChunkActs {
  float* input = nullptr;  // [N,C]: the embedding's output, or the previous stage's
  std::vector<BlockActs> blocks;
  // Head chunk only: ln_f, per-token losses, and d(ln_f output) from the fused loss.
  float *lnf = nullptr, *lnf_mean = nullptr, *lnf_rstd = nullptr;
  float *losses = nullptr, *dlnf = nullptr;
};

Gpt::Gpt(const ModelConfig& config, ops::Backend& backend, int batch, int seq_len,
         GptOptions options)
    : config_(config),
      shard_(options.shard.chunks.empty() ? GptShardSpec::whole(config) : options.shard),
      tp_(options.tp),
      backend_(backend),
      B_(batch),
      T_(seq_len),
      recompute_(options.recompute),
      params_(backend) {
  if (seq_len > config.max_seq_len) {
    throw std::invalid_argument("sequence length exceeds the model's position table");
  }
  if (config.llama() && (config.n_head % config.kv_heads() != 0 || config.head_dim() % 2 != 0)) {
    throw std::invalid_argument("Gpt: llama needs n_kv_head dividing n_head and an even head size");
  }
  const int tp = shard_.tp_size;
  if (tp > 1 && (tp_ == nullptr || tp_->size() != tp || tp_->rank() != shard_.tp_rank)) {
    throw std::invalid_argument("Gpt: a tensor-parallel shard needs its TP communicator");
  }
  if (options.slots < 1) throw std::invalid_argument("Gpt: slots must be >= 1");
  check_tp_divisible(config, tp);
  C_attn_ = config.d_model / tp;
  C_mlp_ = config.mlp_hidden() / tp;
  NH_local_ = config.n_head / tp;
  NKV_local_ = config.kv_heads() / tp;
  qkv_width_ = config.qkv_rows() / tp;
  fc_width_ = config.llama() ? 2 * C_mlp_ : C_mlp_;
  V_local_ = config.vocab_size / tp;
  vocab_ = {shard_.tp_rank * V_local_, V_local_};
  declare_params(options.unbound_params);
  allocate_activations(options.slots);
}

Gpt::~Gpt() {
  for (void* p : buffers_) backend_.free(p);
}

float* Gpt::act(size_t n) {
  void* p = backend_.alloc(n * sizeof(float));
  buffers_.push_back(p);
  return static_cast<float*>(p);
}

void Gpt::declare_params(bool unbound) {
  for (const ParamSpec& spec : gpt_param_specs(config_, shard_)) {
    const int index = static_cast<int>(params_.declare(spec));
    const std::string& n = spec.name;
    if (n == "model.embed_tokens.weight") {
      (spec.tied_copy ? wte_copy_ : wte_) = index;
    } else if (n == "model.norm.weight") {
      lnf_w_ = index;
    } else if (n == "lm_head.weight") {
      lm_head_ = index;
    } else if (n == "transformer.wte.weight") {
      (spec.tied_copy ? wte_copy_ : wte_) = index;
    } else if (n == "transformer.wpe.weight") {
      wpe_ = index;
    } else if (n == "transformer.ln_f.weight") {
      lnf_w_ = index;
    } else if (n == "transformer.ln_f.bias") {
      lnf_b_ = index;
    }
  }
  // Blocks: look the names up once, chunk by chunk.
  for (const LayerRange& chunk : shard_.chunks) {
    chunk_first_block_.push_back(static_cast<int>(blocks_.size()));
    for (int l = chunk.begin; l < chunk.end; ++l) {
      const std::string p =
          (config_.llama() ? "model.layers." : "transformer.h.") + std::to_string(l) + ".";
      auto at = [&](const char* suffix) {
        const Param& param = params_.find(p + suffix);
        return static_cast<int>(&param - params_.list().data());
      };
      if (config_.llama()) {
        BlockParams b{at("input_layernorm.weight"),
                      -1,
                      at("self_attn.q_proj.weight"),
                      -1,
                      at("self_attn.o_proj.weight"),
                      -1,
                      at("post_attention_layernorm.weight"),
                      -1,
                      at("mlp.gate_proj.weight"),
                      -1,
                      at("mlp.down_proj.weight"),
                      -1};
        b.k_w = at("self_attn.k_proj.weight");
        b.v_w = at("self_attn.v_proj.weight");
        b.up_w = at("mlp.up_proj.weight");
        blocks_.push_back(b);
        continue;
      }
      blocks_.push_back({at("ln_1.weight"), at("ln_1.bias"), at("attn.c_attn.weight"),
                         at("attn.c_attn.bias"), at("attn.c_proj.weight"), at("attn.c_proj.bias"),
                         at("ln_2.weight"), at("ln_2.bias"), at("mlp.c_fc.weight"),
                         at("mlp.c_fc.bias"), at("mlp.c_proj.weight"), at("mlp.c_proj.bias")});
    }
  }
  if (unbound) {
    params_.allocate_unbound();
  } else {
    params_.allocate();
  }
}

int Gpt::num_blocks() const { return static_cast<int>(blocks_.size()); }

int Gpt::chunk_of_block(int block) const {
  int chunk = 0;
  while (chunk + 1 < num_chunks() && chunk_first_block_[static_cast<size_t>(chunk) + 1] <= block) {
    ++chunk;
  }
  return chunk;
}

std::pair<int64_t, int64_t> Gpt::block_param_range(int block) const {
  const BlockParams& b = blocks_.at(static_cast<size_t>(block));
  // The block's last parameter: GPT's mlp.c_proj.bias, llama's mlp.down_proj.weight.
  const Param& last = params_.at(static_cast<size_t>(b.fc_proj_b >= 0 ? b.fc_proj_b : b.fc_proj_w));
  return {params_.at(static_cast<size_t>(b.ln1_w)).offset, last.offset + last.numel};
}

void Gpt::allocate_activations(int slots) {
  const size_t N = static_cast<size_t>(B_) * T_;
  const size_t C = static_cast<size_t>(config_.d_model);
  const size_t Ca = static_cast<size_t>(C_attn_), Cm = static_cast<size_t>(C_mlp_);
  const size_t lse_n = static_cast<size_t>(B_) * NH_local_ * T_;
  // Backward and head scratch, shared by chunks and slots.
  dres_ = act(N * C);
  dC_ = act(N * C);
  dC2_ = act(N * C);
  const size_t Cqkv = static_cast<size_t>(qkv_width_), Cfc = static_cast<size_t>(fc_width_);
  dqkv_ = act(N * Cqkv);
  d4C_a_ = act(N * Cm);
  d4C_b_ = act(N * Cfc);
  scratchC_ = act(N * C);
  if (shard_.head && shard_.tp_size > 1) {
    logits_ = act(N * static_cast<size_t>(V_local_));
    row_max_ = act(N);
    xent_stats_ = act(2 * N);
  }
  const bool full = recompute_ == Recompute::full;
  // What recomputation drops: one set for the whole model, refilled block by block. Three
  // of them live in backward scratch that is idle whenever they are alive (block_backward
  // reads them before it first writes that scratch; forward never touches it): the GELU
  // output in d4C_b_ (overwritten only by gelu_backward, after its last read), ln_2's
  // output in dC2_ (overwritten only by ln_2's layernorm_backward, after the c_fc weight
  // gradient read it), and for selective ln_1's output in scratchC_ (forward overwrites it
  // with the attention projection only after c_attn read it; selective recomputation
  // writes the projection there before ln_1; backward never uses scratchC_; full
  // recomputation runs that projection after ln_1, so not for full).
  BlockActs shared{};
  if (recompute_ != Recompute::none) {
    shared.ln1 = full ? act(N * C) : scratchC_;
    shared.ln1_mean = act(N);
    shared.ln1_rstd = act(N);
    shared.res1 = act(N * C);
    shared.ln2 = dC2_;
    shared.ln2_mean = act(N);
    shared.ln2_rstd = act(N);
    shared.gelu = d4C_b_;
    if (full) {
      shared.qkv = act(N * Cqkv);
      shared.att = act(N * Ca);
      shared.lse = act(lse_n);
      shared.fc = act(N * Cfc);
    }
  }
  for (int c = 0; c < num_chunks(); ++c) {
    std::vector<ChunkActs> per_slot;
    for (int s = 0; s < slots; ++s) {
      ChunkActs a;
      a.input = act(N * C);
      for (int l = 0; l < shard_.chunks[static_cast<size_t>(c)].size(); ++l) {
        BlockActs b = shared;
        if (recompute_ == Recompute::none) {
          b.ln1 = act(N * C);
          b.ln1_mean = act(N);
          b.ln1_rstd = act(N);
          b.res1 = act(N * C);
          b.ln2 = act(N * C);
          b.ln2_mean = act(N);
          b.ln2_rstd = act(N);
          b.gelu = act(N * Cm);
        }
        if (!full) {
          b.qkv = act(N * Cqkv);
          b.att = act(N * Ca);
          b.lse = act(lse_n);
          b.fc = act(N * Cfc);
        }
        b.res2 = act(N * C);
        a.blocks.push_back(b);
      }
      if (has_head(c)) {
        a.lnf = act(N * C);
        a.lnf_mean = act(N);
        a.lnf_rstd = act(N);
        a.losses = act(N);
        a.dlnf = act(N * C);
      }
      per_slot.push_back(std::move(a));
    }
    acts_.push_back(std::move(per_slot));
  }
}

// Mirrors allocate_activations and declare_params buffer by buffer.
GptMemoryFloats gpt_memory_floats(const ModelConfig& config, const GptOptions& options, int batch,
                                  int seq_len) {
  const GptShardSpec shard =
      options.shard.chunks.empty() ? GptShardSpec::whole(config) : options.shard;
  const int tp = shard.tp_size;
  check_tp_divisible(config, tp);
  const int64_t N = int64_t{batch} * seq_len, C = config.d_model;
  const int64_t Ca = C / tp, Cm = config.mlp_hidden() / tp, V = config.vocab_size / tp;
  const int64_t Cqkv = config.qkv_rows() / tp, Cfc = config.llama() ? 2 * Cm : Cm;
  const int64_t lse = int64_t{batch} * (config.n_head / tp) * seq_len;
  // The buffers of one block, split by what each mode keeps.
  const int64_t dropped_by_selective = 2 * (N * C + 2 * N) + N * C + N * Cm;  // ln_*, res1, GELU
  const int64_t dropped_by_full = N * Cqkv + N * Ca + lse + N * Cfc;  // qkv, attention + lse, fc
  const int64_t output = N * C;                                       // res2
  int64_t per_block = output + dropped_by_full + dropped_by_selective;
  GptMemoryFloats m;
  m.params = flat_size(gpt_param_specs(config, shard));
  switch (options.recompute) {
    case Recompute::none:
      break;
    case Recompute::selective:
      per_block = output + dropped_by_full;
      // ln_1, ln_2 and GELU outputs live in backward scratch (allocate_activations).
      m.recompute = dropped_by_selective - 2 * N * C - N * Cm;
      break;
    case Recompute::full:
      per_block = output;
      m.recompute = dropped_by_selective + dropped_by_full - N * C - N * Cm;  // ln_2, GELU
      break;
  }
  const int64_t head = 2 * N * C + 3 * N;  // ln_f output and statistics, losses, d(ln_f)
  for (size_t c = 0; c < shard.chunks.size(); ++c) {
    const bool has_head = shard.head && c + 1 == shard.chunks.size();
    const int64_t slot = N * C + shard.chunks[c].size() * per_block + (has_head ? head : 0);
    m.activations += options.slots * slot;
  }
  m.workspace = 4 * N * C + N * Cqkv + N * Cm + N * Cfc;
  if (shard.head && tp > 1) m.workspace += N * V + 3 * N;
  return m;
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "none";
}

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  throw std::invalid_argument("activation recomputation must be none, selective or full, not '" +
                              name + "'");
}

void Gpt::init_weights(uint64_t seed) { params_.initialize(seed); }

int64_t Gpt::boundary_floats() const { return int64_t{B_} * T_ * config_.d_model; }

Gpt::ChunkActs& Gpt::acts(int chunk, int slot) {
  if (chunk < 0 || chunk >= num_chunks() || slot < 0 ||
      slot >= static_cast<int>(acts_[static_cast<size_t>(chunk)].size())) {
    throw std::out_of_range("Gpt: no activation slot " + std::to_string(slot) + " of chunk " +
                            std::to_string(chunk));
  }
  return acts_[static_cast<size_t>(chunk)][static_cast<size_t>(slot)];
}

float* Gpt::input_buffer(int chunk, int slot) { return acts(chunk, slot).input; }

void Gpt::tp_allreduce(float* data, size_t count, comm::ReduceOp op) {
  if (shard_.tp_size > 1) tp_->allreduce(data, count, op);
}

// --- gradient pieces ------------------------------------------------------------------------

std::vector<std::pair<int64_t, int64_t>> Gpt::grad_pieces() const {
  std::vector<std::pair<int64_t, int64_t>> pieces;
  int64_t end = params_.total();
  if (wte_copy_ >= 0) {
    const int64_t begin = params_.at(static_cast<size_t>(wte_copy_)).offset;
    pieces.emplace_back(begin, end);
    end = begin;
  }
  // kPiecesPerBlock per block, in block_backward's order; the last block's first piece
  // runs on through ln_f.
  for (size_t j = blocks_.size(); j-- > 0;) {
    const BlockParams& b = blocks_[j];
    const int64_t starts[kPiecesPerBlock] = {
        params_.at(static_cast<size_t>(b.fc_w)).offset,    // c_fc, mlp.c_proj
        params_.at(static_cast<size_t>(b.ln2_w)).offset,   // ln_2
        params_.at(static_cast<size_t>(b.attn_w)).offset,  // c_attn, attn.c_proj
        params_.at(static_cast<size_t>(b.ln1_w)).offset};  // ln_1
    for (int64_t begin : starts) {
      pieces.emplace_back(begin, end);
      end = begin;
    }
  }
  if (wte_ >= 0) {
    const int64_t wte_begin = params_.at(static_cast<size_t>(wte_)).offset;
    if (exchanges_tied_embedding() && wpe_ >= 0) {
      // wte on a piece of its own: it is final only after the exchange with the last stage.
      const int64_t wpe_begin = params_.at(static_cast<size_t>(wpe_)).offset;
      pieces.emplace_back(wpe_begin, end);
      pieces.emplace_back(wte_begin, wpe_begin);
    } else {
      pieces.emplace_back(wte_begin, end);
    }
  }
  return pieces;
}

int Gpt::tied_embedding_piece() const {
  if (!exchanges_tied_embedding()) return -1;
  if (wte_copy_ >= 0) return 0;
  return static_cast<int>(grad_pieces().size()) - 1;  // wte is the last piece
}

int Gpt::tied_embedding_param() const {
  if (!config_.tied()) return -1;
  return wte_copy_ >= 0 ? wte_copy_ : wte_;
}

int Gpt::head_weight() const { return lm_head_ >= 0 ? lm_head_ : tied_embedding_param(); }

// --- fused projections ------------------------------------------------------------------
// Llama's q | k | v and gate | up are separate parameters (model/shard.h) whose outputs sit
// side by side in one activation row: one product per part, into or out of its columns.

void Gpt::fused_forward(float* out, int out_width, const float* inp, std::initializer_list<int> ws,
                        int IC) {
  const int N = B_ * T_;
  int col = 0;
  for (int w : ws) {
    const int rows = static_cast<int>(params_.at(static_cast<size_t>(w)).shape[0]);
    backend_.gemm(false, true, N, rows, IC, 1.0f, inp, IC, params_.data(w), IC, 0.0f, out + col,
                  out_width);
    col += rows;
  }
}

void Gpt::fused_weight_grads(const float* dout, int out_width, const float* inp,
                             std::initializer_list<int> ws, int IC) {
  const int N = B_ * T_;
  int col = 0;
  for (int w : ws) {
    const int rows = static_cast<int>(params_.at(static_cast<size_t>(w)).shape[0]);
    backend_.gemm(true, false, rows, IC, N, 1.0f, dout + col, out_width, inp, IC, 1.0f,
                  params_.grad(w), IC);
    col += rows;
  }
}

void Gpt::fused_input_grad(float* dinp, const float* dout, int out_width,
                           std::initializer_list<int> ws, int IC) {
  const int N = B_ * T_;
  int col = 0;
  for (int w : ws) {
    const int rows = static_cast<int>(params_.at(static_cast<size_t>(w)).shape[0]);
    backend_.gemm(false, false, N, IC, rows, 1.0f, dout + col, out_width, params_.data(w), IC,
                  col == 0 ? 0.0f : 1.0f, dinp, IC);
    col += rows;
  }
}

ops::AttentionShape Gpt::attention_shape() const {
  return {B_, T_, NH_local_, NKV_local_, config_.head_dim()};
}

// --- forward ----------------------------------------------------------------------------

void Gpt::llama_block_forward(const BlockParams& p, BlockActs& a, const float* x, bool output) {
  const int N = B_ * T_, C = config_.d_model, hd = config_.head_dim();
  const size_t NC = static_cast<size_t>(N) * C;
  auto& be = backend_;
  auto& w = params_;
  be.rmsnorm_forward(a.ln1, a.ln1_rstd, x, w.data(p.ln1_w), N, C, config_.norm_eps);
  fused_forward(a.qkv, qkv_width_, a.ln1, {p.attn_w, p.k_w, p.v_w}, C);
  // q and k rotate together (they are the first heads of each row); v does not.
  be.rope_forward(a.qkv, B_, T_, qkv_width_, NH_local_ + NKV_local_, hd, config_.rope_theta, 0);
  be.attention_forward(a.att, a.lse, a.qkv, attention_shape());
  be.linear_forward(scratchC_, a.att, w.data(p.attn_proj_w), nullptr, N, C_attn_, C);
  tp_allreduce(scratchC_, NC);
  be.add(a.res1, x, scratchC_, NC);
  be.rmsnorm_forward(a.ln2, a.ln2_rstd, a.res1, w.data(p.ln2_w), N, C, config_.norm_eps);
  fused_forward(a.fc, fc_width_, a.ln2, {p.fc_w, p.up_w}, C);
  be.swiglu_forward(a.gelu, a.fc, N, C_mlp_);
  be.linear_forward(scratchC_, a.gelu, w.data(p.fc_proj_w), nullptr, N, C_mlp_, C);
  tp_allreduce(scratchC_, NC);
  if (output) be.add(a.res2, a.res1, scratchC_, NC);
}

void Gpt::block_forward(const BlockParams& p, BlockActs& a, const float* x, bool output) {
  if (config_.llama()) {
    llama_block_forward(p, a, x, output);
    return;
  }
  const int N = B_ * T_, C = config_.d_model;
  const size_t NC = static_cast<size_t>(N) * C;
  // Row-parallel outputs are partial sums: one rank adds the bias, the allreduce the rest.
  const bool bias_here = shard_.tp_rank == 0;
  auto& be = backend_;
  auto& w = params_;
  be.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.data(p.ln1_w), w.data(p.ln1_b), N, C);
  be.linear_forward(a.qkv, a.ln1, w.data(p.attn_w), w.data(p.attn_b), N, C, 3 * C_attn_);
  be.attention_forward(a.att, a.lse, a.qkv, B_, T_, C_attn_, NH_local_);
  be.linear_forward(scratchC_, a.att, w.data(p.attn_proj_w),
                    bias_here ? w.data(p.attn_proj_b) : nullptr, N, C_attn_, C);
  tp_allreduce(scratchC_, NC);
  be.add(a.res1, x, scratchC_, NC);
  be.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res1, w.data(p.ln2_w), w.data(p.ln2_b), N,
                       C);
  be.linear_forward(a.fc, a.ln2, w.data(p.fc_w), w.data(p.fc_b), N, C, C_mlp_);
  be.gelu_forward(a.gelu, a.fc, static_cast<size_t>(N) * C_mlp_);
  be.linear_forward(scratchC_, a.gelu, w.data(p.fc_proj_w),
                    bias_here ? w.data(p.fc_proj_b) : nullptr, N, C_mlp_, C);
  tp_allreduce(scratchC_, NC);
  if (output) be.add(a.res2, a.res1, scratchC_, NC);
}

void Gpt::recompute_block(const BlockParams& p, BlockActs& a, const float* x) {
  const int N = B_ * T_, C = config_.d_model;
  auto& be = backend_;
  auto& w = params_;
  switch (recompute_) {
    case Recompute::none:
      return;
    case Recompute::selective:
      // The same calls on the same inputs as block_forward: the same bits. The attention
      // projection goes to scratchC_ before ln_1 reuses it (allocate_activations).
      be.linear_forward(scratchC_, a.att, w.data(p.attn_proj_w),
                        shard_.tp_rank == 0 && p.attn_proj_b >= 0 ? w.data(p.attn_proj_b) : nullptr,
                        N, C_attn_, C);
      tp_allreduce(scratchC_, static_cast<size_t>(N) * C);
      be.add(a.res1, x, scratchC_, static_cast<size_t>(N) * C);
      if (config_.llama()) {
        be.rmsnorm_forward(a.ln1, a.ln1_rstd, x, w.data(p.ln1_w), N, C, config_.norm_eps);
        be.rmsnorm_forward(a.ln2, a.ln2_rstd, a.res1, w.data(p.ln2_w), N, C, config_.norm_eps);
        be.swiglu_forward(a.gelu, a.fc, N, C_mlp_);
        return;
      }
      be.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.data(p.ln1_w), w.data(p.ln1_b), N,
                           C);
      be.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res1, w.data(p.ln2_w), w.data(p.ln2_b),
                           N, C);
      be.gelu_forward(a.gelu, a.fc, static_cast<size_t>(N) * C_mlp_);
      return;
    case Recompute::full:
      // The stored output may still be on its way to the next stage: leave it alone.
      block_forward(p, a, x, false);
      return;
  }
}

void Gpt::head_forward(ChunkActs& a, const float* top, const int32_t* targets, bool backward,
                       float grad_scale, ChunkLoss* loss) {
  const int N = B_ * T_, C = config_.d_model;
  auto& be = backend_;
  auto& w = params_;
  const int wte = head_weight();
  if (config_.llama()) {
    be.rmsnorm_forward(a.lnf, a.lnf_rstd, top, w.data(lnf_w_), N, C, config_.norm_eps);
  } else {
    be.layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, top, w.data(lnf_w_), w.data(lnf_b_), N, C);
  }
  if (shard_.tp_size == 1) {
    // The fused head writes d(ln_f output) and accumulates the tied embedding's gradient
    // without ever materialising [N, V] logits.
    be.lm_head_cross_entropy(a.losses, backward ? a.dlnf : nullptr,
                             backward ? w.grad(wte) : nullptr, a.lnf, w.data(wte), targets, N, C,
                             config_.vocab_size, grad_scale);
  } else {
    // Vocab-parallel: this rank's [N, V/tp] logits; only per-row max and sums cross ranks.
    be.linear_forward(logits_, a.lnf, w.data(wte), nullptr, N, C, V_local_);
    be.xent_row_max(row_max_, logits_, N, V_local_);
    tp_allreduce(row_max_, static_cast<size_t>(N), comm::ReduceOp::max);
    be.xent_partial_sums(xent_stats_, logits_, row_max_, targets, vocab_, N);
    tp_allreduce(xent_stats_, 2 * static_cast<size_t>(N));
    be.xent_finish(a.losses, backward ? logits_ : nullptr, logits_, row_max_, xent_stats_, targets,
                   vocab_, N, grad_scale);
    if (backward) {
      be.linear_backward(a.dlnf, w.grad(wte), nullptr, logits_, a.lnf, w.data(wte), N, C, V_local_);
      tp_allreduce(a.dlnf, static_cast<size_t>(N) * C);
    }
  }
  for (int i = 0; i < N; ++i) {
    if (targets[i] >= 0) {
      loss->sum += a.losses[i];
      ++loss->count;
    }
  }
}

namespace {
observe::TraceFields layer_fields(int layer, int chunk) {
  observe::TraceFields f;
  f.layer = layer;
  f.chunk = chunk;
  return f;
}
}  // namespace

const float* Gpt::forward_chunk(int chunk, int slot, const int32_t* tokens, const int32_t* targets,
                                bool backward, float grad_scale, ChunkLoss* loss) {
  ChunkActs& a = acts(chunk, slot);
  const int C = config_.d_model;
  if (has_embedding(chunk)) {
    // Each TP rank embeds the tokens of its vocabulary rows; rank 0 adds the positions.
    resident_hook(true, ResidentUse::embedding_forward, false);
    // Llama has no position table: RoPE places tokens inside attention.
    backend_.embedding_forward(a.input, tokens, params_.data(wte_), vocab_,
                               shard_.tp_rank == 0 && wpe_ >= 0 ? params_.data(wpe_) : nullptr, B_,
                               T_, C);
    resident_hook(false, ResidentUse::embedding_forward, false);
    tp_allreduce(a.input, static_cast<size_t>(boundary_floats()));
  }
  const float* x = a.input;
  const int first = chunk_first_block_[static_cast<size_t>(chunk)];
  for (size_t j = 0; j < a.blocks.size(); ++j) {
    if (block_hooks_.before_forward) block_hooks_.before_forward(first + static_cast<int>(j));
    observe::TraceScope trace(trace_, "forward", "compute",
                              layer_fields(first + static_cast<int>(j), chunk));
    block_forward(blocks_[static_cast<size_t>(first) + j], a.blocks[j], x);
    x = a.blocks[j].res2;
  }
  if (!has_head(chunk)) return x;
  observe::TraceScope trace(trace_, "forward.lm_head", "compute", layer_fields(-1, chunk));
  resident_hook(true, ResidentUse::head_forward, backward);
  head_forward(a, x, targets, backward, grad_scale, loss);
  resident_hook(false, ResidentUse::head_forward, backward);
  return nullptr;
}

// --- backward ---------------------------------------------------------------------------

// As block_backward, in the same order of pieces and TP allreduces.
void Gpt::llama_block_backward(const BlockParams& p, const BlockActs& a, const float* x,
                               float* dres, int first_piece, bool report) {
  const int N = B_ * T_, C = config_.d_model, hd = config_.head_dim();
  const size_t NC = static_cast<size_t>(N) * C;
  auto& be = backend_;
  auto& w = params_;
  be.linear_backward(d4C_a_, w.grad(p.fc_proj_w), nullptr, dres, a.gelu, w.data(p.fc_proj_w), N,
                     C_mlp_, C);
  be.swiglu_backward(d4C_b_, d4C_a_, a.fc, N, C_mlp_);
  fused_weight_grads(d4C_b_, fc_width_, a.ln2, {p.fc_w, p.up_w}, C);
  if (report) report_grad_ready(first_piece);
  fused_input_grad(dC_, d4C_b_, fc_width_, {p.fc_w, p.up_w}, C);
  tp_allreduce(dC_, NC);
  be.rmsnorm_backward(dC2_, w.grad(p.ln2_w), dC_, a.res1, w.data(p.ln2_w), a.ln2_rstd, N, C);
  if (report) report_grad_ready(first_piece + 1);
  be.add_inplace(dres, dC2_, NC);
  be.linear_backward(dC_, w.grad(p.attn_proj_w), nullptr, dres, a.att, w.data(p.attn_proj_w), N,
                     C_attn_, C);
  be.attention_backward(dqkv_, dC_, a.qkv, a.att, a.lse, attention_shape());
  // From the rotated q and k back to the projections' outputs.
  be.rope_backward(dqkv_, B_, T_, qkv_width_, NH_local_ + NKV_local_, hd, config_.rope_theta, 0);
  fused_weight_grads(dqkv_, qkv_width_, a.ln1, {p.attn_w, p.k_w, p.v_w}, C);
  if (report) report_grad_ready(first_piece + 2);
  fused_input_grad(dC_, dqkv_, qkv_width_, {p.attn_w, p.k_w, p.v_w}, C);
  tp_allreduce(dC_, NC);
  be.rmsnorm_backward(dC2_, w.grad(p.ln1_w), dC_, x, w.data(p.ln1_w), a.ln1_rstd, N, C);
  if (report) report_grad_ready(first_piece + 3);
  be.add_inplace(dres, dC2_, NC);
}

// dres holds d(block output) on entry and d(block input) on exit.
void Gpt::block_backward(const BlockParams& p, const BlockActs& a, const float* x, float* dres,
                         int first_piece, bool report) {
  if (config_.llama()) {
    llama_block_backward(p, a, x, dres, first_piece, report);
    return;
  }
  const int N = B_ * T_, C = config_.d_model;
  const size_t NC = static_cast<size_t>(N) * C;
  auto& be = backend_;
  auto& w = params_;
  // MLP branch. Row-parallel c_proj: its bias gradient is the full one on every rank.
  be.linear_backward(d4C_a_, w.grad(p.fc_proj_w), w.grad(p.fc_proj_b), dres, a.gelu,
                     w.data(p.fc_proj_w), N, C_mlp_, C);
  be.gelu_backward(d4C_b_, a.fc, d4C_a_, static_cast<size_t>(N) * C_mlp_);
  // Column-parallel c_fc: its weight gradient first, so that data parallelism can reduce
  // the MLP's matrices while this rank computes d(ln_2 output) (the same product as
  // linear_backward's, through gemm). Each TP rank has part of that; the allreduce sums.
  be.linear_backward(nullptr, w.grad(p.fc_w), w.grad(p.fc_b), d4C_b_, a.ln2, w.data(p.fc_w), N, C,
                     C_mlp_);
  if (report) report_grad_ready(first_piece);
  be.gemm(false, false, N, C, C_mlp_, 1.0f, d4C_b_, C_mlp_, w.data(p.fc_w), C, 0.0f, dC_, C);
  tp_allreduce(dC_, NC);
  be.layernorm_backward(dC2_, w.grad(p.ln2_w), w.grad(p.ln2_b), dC_, a.res1, w.data(p.ln2_w),
                        a.ln2_mean, a.ln2_rstd, N, C);
  if (report) report_grad_ready(first_piece + 1);
  be.add_inplace(dres, dC2_, NC);
  // Attention branch, c_attn's weight gradient before its input gradient likewise: in
  // block 0 this leaves only ln_1 and the embeddings for the exposed tail of the step.
  be.linear_backward(dC_, w.grad(p.attn_proj_w), w.grad(p.attn_proj_b), dres, a.att,
                     w.data(p.attn_proj_w), N, C_attn_, C);
  be.attention_backward(dqkv_, dC_, a.qkv, a.att, a.lse, B_, T_, C_attn_, NH_local_);
  be.linear_backward(nullptr, w.grad(p.attn_w), w.grad(p.attn_b), dqkv_, a.ln1, w.data(p.attn_w), N,
                     C, 3 * C_attn_);
  if (report) report_grad_ready(first_piece + 2);
  be.gemm(false, false, N, C, 3 * C_attn_, 1.0f, dqkv_, 3 * C_attn_, w.data(p.attn_w), C, 0.0f, dC_,
          C);
  tp_allreduce(dC_, NC);
  be.layernorm_backward(dC2_, w.grad(p.ln1_w), w.grad(p.ln1_b), dC_, x, w.data(p.ln1_w), a.ln1_mean,
                        a.ln1_rstd, N, C);
  if (report) report_grad_ready(first_piece + 3);
  be.add_inplace(dres, dC2_, NC);
}

const float* Gpt::backward_chunk(int chunk, int slot, const int32_t* tokens, bool report) {
  ChunkActs& a = acts(chunk, slot);
  const int N = B_ * T_, C = config_.d_model;
  if (has_head(chunk)) {
    const float* top = a.blocks.back().res2;
    resident_hook(true, ResidentUse::head_backward, true);
    if (config_.llama()) {
      backend_.rmsnorm_backward(dres_, params_.grad(lnf_w_), a.dlnf, top, params_.data(lnf_w_),
                                a.lnf_rstd, N, C);
    } else {
      backend_.layernorm_backward(dres_, params_.grad(lnf_w_), params_.grad(lnf_b_), a.dlnf, top,
                                  params_.data(lnf_w_), a.lnf_mean, a.lnf_rstd, N, C);
    }
    resident_hook(false, ResidentUse::head_backward, true);
  }
  const int first = chunk_first_block_[static_cast<size_t>(chunk)];
  const int base = wte_copy_ >= 0 ? 1 : 0;  // pieces before the blocks' (see grad_pieces)
  const int nb = static_cast<int>(blocks_.size());
  for (int j = static_cast<int>(a.blocks.size()) - 1; j >= 0; --j) {
    const float* x = j == 0 ? a.input : a.blocks[static_cast<size_t>(j) - 1].res2;
    const int block = first + j;
    if (block_hooks_.before_backward) block_hooks_.before_backward(block);
    {
      observe::TraceScope trace(trace_, "backward", "compute", layer_fields(block, chunk));
      recompute_block(blocks_[static_cast<size_t>(block)], a.blocks[static_cast<size_t>(j)], x);
      block_backward(blocks_[static_cast<size_t>(block)], a.blocks[static_cast<size_t>(j)], x,
                     dres_, base + kPiecesPerBlock * (nb - 1 - block), report);
    }
    if (block_hooks_.after_backward) block_hooks_.after_backward(block);
  }
  if (!has_embedding(chunk)) return dres_;
  resident_hook(true, ResidentUse::embedding_backward, true);
  backend_.embedding_backward(params_.grad(wte_), wpe_ >= 0 ? params_.grad(wpe_) : nullptr, dres_,
                              tokens, vocab_, B_, T_, C);
  resident_hook(false, ResidentUse::embedding_backward, true);
  // The embeddings' piece(s): wte's own piece, when it has one, the caller reports (llama's
  // only embedding piece is the tied one when it is exchanged).
  const bool wte_alone = wpe_ < 0 && exchanges_tied_embedding();
  if (report && !wte_alone) report_grad_ready(base + kPiecesPerBlock * nb);
  return nullptr;
}

// --- the whole model ------------------------------------------------------------------------

double Gpt::forward_backward(const int32_t* tokens, const int32_t* targets, float grad_scale,
                             int64_t* count) {
  if (num_chunks() != 1 || !shard_.embedding || !shard_.head) {
    throw std::logic_error("Gpt::forward_backward needs the whole model on this rank");
  }
  ChunkLoss loss;
  forward_chunk(0, 0, tokens, targets, true, grad_scale, &loss);
  backward_chunk(0, 0, tokens, true);
  *count = loss.count;
  return loss.sum;
}

double Gpt::forward_loss(const int32_t* tokens, const int32_t* targets, int64_t* count) {
  if (num_chunks() != 1 || !shard_.embedding || !shard_.head) {
    throw std::logic_error("Gpt::forward_loss needs the whole model on this rank");
  }
  ChunkLoss loss;
  forward_chunk(0, 0, tokens, targets, false, 0.0f, &loss);
  *count = loss.count;
  return loss.sum;
}

}  // namespace trainctl::model
