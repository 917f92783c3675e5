#include "config/validate.h"

#include <limits.h>
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "config/number_text.h"
#include "config/suggest.h"
#include "util/regular_file.h"

namespace trainctl::config::detail {

std::string divisors_of(long long n) {
  std::vector<std::string> found;
  for (long long d = 1; d <= n; ++d) {
    if (n % d == 0) found.push_back(std::to_string(d));
  }
  if (found.size() > 12) {
    found.erase(found.begin() + 10, found.end() - 1);
    found.insert(found.end() - 1, "...");
  }
  return "{" + join(found) + "}";
}

namespace {

namespace fs = std::filesystem;

// Rules report through this: "<where the key was given>: <key>: <problem>".
class Checker {
 public:
  explicit Checker(const Locations& locations) : locations_(locations) {}
  [[noreturn]] void fail(const std::string& key_path, const std::string& problem) const {
    detail::fail(locations_.where(key_path), key_path, problem);
  }
  std::string relative_rule(const std::string& key_path) const {
    return locations_.relative_rule(key_path);
  }

 private:
  const Locations& locations_;
};

void check_model(const JobSpec& s, const Checker& c) {
  const ModelSpec& m = s.model;
  if (m.d_model % m.n_head != 0) {
    c.fail("model.n_head", "must divide model.d_model (" + std::to_string(m.d_model) + "); got " +
                               std::to_string(m.n_head) + ". Use n_head in " +
                               divisors_of(m.d_model) + ".");
  }
  if (!m.is_llama()) return;
  if (m.n_head % m.kv_heads() != 0) {
    c.fail("model.n_kv_head", "must divide model.n_head (" + std::to_string(m.n_head) +
                                  ") so each k/v head serves the same number of query heads; got " +
                                  std::to_string(m.kv_heads()) + ". Use n_kv_head in " +
                                  divisors_of(m.n_head) + ".");
  }
  if ((m.d_model / m.n_head) % 2 != 0) {
    c.fail("model.n_head",
           "rotary embeddings rotate pairs of dimensions: the head size d_model / "
           "n_head = " +
               std::to_string(m.d_model / m.n_head) + " must be even.");
  }
}

// model.moe (docs/job-spec.md, "model.moe"): what is built is dropless or capacity-capped
// routing with aux-loss, bias or no balancing, on the CPU backend, experts split over tp like the
// dense MLP.
void check_moe(const JobSpec& s, const Checker& c) {
  const ModelSpec& m = s.model;
  const MoeSpec& e = m.moe;
  if (!e.enabled()) return;
  if (e.top_k > e.num_experts) {
    c.fail("model.moe.top_k", "must be at most model.moe.num_experts (" +
                                  std::to_string(e.num_experts) + "); got " +
                                  std::to_string(e.top_k) + ". Lower top_k or add experts.");
  }
  bool any = false;
  for (int l = 0; l < m.n_layer; ++l) any = any || m.moe_layer(l);
  if (!any) {
    c.fail("model.moe.layers", "\"" + e.layers + "\" selects none of the model's " +
                                   std::to_string(m.n_layer) + " layers (0.." +
                                   std::to_string(m.n_layer - 1) +
                                   "); use all, a smaller every_N or from_K, or remove model.moe.");
  }
  if (e.balance == "bias" && s.parallel.mode == "parameter_server") {
    c.fail("model.moe.balance",
           "bias moves each expert's bias from every step's token counts over all workers, "
           "which asynchronous parameter-server workers never share; use aux_loss or none, "
           "or parallel.mode: data_parallel.");
  }
  if (s.device == Device::cuda) {
    c.fail("model.moe",
           "mixture-of-experts layers run on the CPU backend only (the CUDA "
           "backend has no grouped expert kernels yet); use device: cpu, or "
           "remove model.moe.");
  }
  if (m.expert_hidden() % s.parallel.tp != 0) {
    c.fail("parallel.tp", "must divide the experts' width model.moe.expert_ffn_hidden (" +
                              std::to_string(m.expert_hidden()) +
                              "), which tensor parallelism "
                              "splits like the dense MLP's; got " +
                              std::to_string(s.parallel.tp) + ". Use tp in " +
                              divisors_of(m.expert_hidden()) + ".");
  }
}

// parallel.ep (docs/job-spec.md): the experts of each MoE layer split over ep consecutive
// DP ranks, tokens exchanged by all-to-all (model/moe/expert_dispatch.h).
void check_expert_parallel(const JobSpec& s, const Checker& c) {
  const ParallelSpec& p = s.parallel;
  if (p.ep == 1) return;
  const std::string ep = std::to_string(p.ep);
  if (!s.model.moe.enabled()) {
    c.fail("parallel.ep",
           "splits the experts of mixture-of-experts layers, but the model has "
           "none; set model.moe or use ep: 1.");
    return;
  }
  if (p.dp % p.ep != 0) {
    c.fail("parallel.ep", "must divide parallel.dp (" + std::to_string(p.dp) +
                              "): the experts are split over ep of the DP ranks; got " + ep +
                              ". Use ep in " + divisors_of(p.dp) + " or raise dp.");
  }
  const int experts = s.model.moe.num_experts;
  if (experts % p.ep != 0) {
    c.fail("parallel.ep", "must divide model.moe.num_experts (" + std::to_string(experts) +
                              ") so every rank holds as many experts; got " + ep + ". Use ep in " +
                              divisors_of(experts) + ".");
  }
  auto refuse = [&](const std::string& key, const std::string& what, const std::string& fix) {
    c.fail(key, what +
                    " does not combine with parallel.ep yet (it treats the DP ranks as "
                    "replicas of every parameter); " +
                    fix);
  };
  if (p.zero == 3) refuse("parallel.zero", "ZeRO-3", "use zero: 0, 1 or 2 with ep > 1.");
  if (p.dp_sync != "allreduce") refuse("parallel.dp_sync", p.dp_sync, "use allreduce or ep: 1.");
  if (p.grad_compression == "powersgd") {
    refuse("parallel.grad_compression", "powersgd", "use none or bf16, or ep: 1.");
  }
  if (p.mode != "data_parallel") refuse("parallel.mode", p.mode, "use data_parallel or ep: 1.");
}

void check_parallel(const JobSpec& s, const Checker& c) {
  const ParallelSpec& p = s.parallel;
  const ModelSpec& m = s.model;
  const long long world = 1LL * p.dp * p.tp * p.pp * p.cp;
  if (world > (1 << 20)) {
    c.fail("parallel.dp", "dp × tp × pp × cp = " + std::to_string(world) +
                              " workers is more than trainctl supports (1048576).");
  }
  // Megatron splits heads, the vocabulary (embedding/logits) and the MLP's 4·d_model hidden
  // units over tp ranks: each must divide evenly.
  const long long usable_tp =
      std::gcd(std::gcd(std::gcd<long long>(m.n_head, m.vocab_size), m.mlp_hidden()), m.kv_heads());
  const std::string use = " Use tp in " + divisors_of(usable_tp) + ".";
  // Llama: each TP rank holds whole k/v heads with the query heads that read them.
  if (m.is_llama() && m.kv_heads() % p.tp != 0) {
    c.fail("parallel.tp", "must divide model.n_kv_head (" + std::to_string(m.kv_heads()) +
                              "): each tensor-parallel rank holds whole k/v heads; got " +
                              std::to_string(p.tp) + "." + use);
  }
  if (m.n_head % p.tp != 0) {
    c.fail("parallel.tp", "must divide model.n_head (" + std::to_string(m.n_head) + "); got " +
                              std::to_string(p.tp) + "." + use);
  }
  if (m.vocab_size % p.tp != 0) {
    const long long padded = (m.vocab_size + p.tp - 1) / p.tp * p.tp;
    c.fail("parallel.tp", "must divide model.vocab_size (" + std::to_string(m.vocab_size) +
                              "); got " + std::to_string(p.tp) +
                              ". Pad model.vocab_size to a "
                              "multiple of tp (e.g. " +
                              std::to_string(padded) + "), or use tp in " + divisors_of(usable_tp) +
                              ".");
  }
  if (m.mlp_hidden() % p.tp != 0) {
    c.fail("parallel.tp", std::string("must divide the MLP width ") +
                              (m.is_llama() ? "model.ffn_hidden (" : "4 × model.d_model (") +
                              std::to_string(m.mlp_hidden()) + "); got " + std::to_string(p.tp) +
                              "." + use);
  }
  if (p.zero == 3 && p.dp * p.cp > 1 && p.grad_comm != "fp32") {
    c.fail("parallel.grad_comm",
           "ZeRO-3 reduce-scatters each block's gradients in fp32; bf16 gradient communication "
           "applies to zero: 0 and 1. Use grad_comm: fp32 with zero: 3.");
  }
  if (p.zero == 3 && p.dp * p.cp > 1 && s.precision.compute != DType::fp32) {
    c.fail("parallel.zero",
           std::string("ZeRO-3 keeps fp32 parameter shards, and precision.compute: ") +
               dtype_name(s.precision.compute) +
               " keeps the model's weights in 16 bits with fp32 master weights in the optimizer "
               "(the mixed-precision layout), which is built for zero: 0, 1 and 2. Use zero: 2 "
               "(it shards the master weights with the optimizer state), or compute: fp32.");
  }
  if (p.zero == 3 && p.dp * p.cp > 1 && s.device == Device::cuda) {
    c.fail("parallel.zero",
           "ZeRO-3 runs on device: cpu only for now (it initialises, checkpoints and exports "
           "its parameter shards through host memory). On GPUs use zero: 2 with "
           "training.activation_checkpointing: selective or full.");
  }
  if (p.pp > m.n_layer) {
    c.fail("parallel.pp", "must be <= model.n_layer (" + std::to_string(m.n_layer) +
                              ") so that every pipeline stage holds at least one layer; got " +
                              std::to_string(p.pp) + ".");
  }
  if (p.schedule == "interleaved") {
    if (p.pp < 2) {
      c.fail("parallel.pp",
             "the interleaved schedule passes model chunks between pipeline ranks: it needs "
             "pp >= 2; got pp " +
                 std::to_string(p.pp) + ". Use schedule: 1f1b, or pp >= 2.");
    } else if (p.virtual_stages < 2) {
      c.fail("parallel.virtual_stages",
             "the interleaved schedule runs several model chunks per pipeline rank: set "
             "virtual_stages >= 2, or use schedule: 1f1b.");
    } else if (1LL * p.pp * p.virtual_stages > m.n_layer) {
      c.fail("parallel.virtual_stages",
             "pp × virtual_stages = " + std::to_string(p.pp * p.virtual_stages) +
                 " chunks needs at least that many layers; model.n_layer is " +
                 std::to_string(m.n_layer) +
                 ". Use virtual_stages <= " + std::to_string(std::max(1, m.n_layer / p.pp)) + ".");
    }
    const long long unit = 1LL * s.training.micro_batch_size * p.dp;
    const long long accum = unit > 0 ? s.training.global_batch_size / unit : 0;
    if (accum > 0 && accum % p.pp != 0) {
      c.fail("training.global_batch_size",
             "the interleaved schedule runs micro-batches in groups of pp (" +
                 std::to_string(p.pp) + "): global_batch_size / (micro_batch_size × dp) = " +
                 std::to_string(accum) + " must be a multiple of pp. Use global_batch_size " +
                 std::to_string(unit * ((accum + p.pp - 1) / p.pp * p.pp)) + ".");
    }
  } else if (p.virtual_stages != 1 && p.schedule != "zbv") {
    c.fail("parallel.virtual_stages", "only the interleaved schedule uses virtual stages; got " +
                                          std::to_string(p.virtual_stages) + " with schedule " +
                                          p.schedule +
                                          ". Use virtual_stages: 1 or schedule: "
                                          "interleaved.");
  }
}

// The zero-bubble schedules (parallel/zero_bubble_schedule.h): W runs after B, when ZeRO-3
// has already given a block's gradient storage back.
void check_zero_bubble(const JobSpec& s, const Checker& c) {
  const ParallelSpec& p = s.parallel;
  if (p.schedule == "zbv" && p.virtual_stages != 2) {
    c.fail("parallel.virtual_stages",
           "the zbv schedule runs exactly 2 model chunks per pipeline rank, in V order; got "
           "virtual_stages " +
               std::to_string(p.virtual_stages) + ". Set virtual_stages: 2.");
  }
  if (p.schedule == "zbv" && p.pp < 2) {
    c.fail("parallel.pp",
           "the zbv schedule turns its V on the last of at least 2 pipeline ranks; got pp " +
               std::to_string(p.pp) + ". Use pp >= 2, or schedule: 1f1b.");
  } else if (p.schedule == "zbv" && 2LL * p.pp > s.model.n_layer) {
    c.fail("parallel.pp", "the zbv schedule needs 2 × pp = " + std::to_string(2 * p.pp) +
                              " chunks of at least one layer; model.n_layer is " +
                              std::to_string(s.model.n_layer) + ". Use pp <= " +
                              std::to_string(std::max(1, s.model.n_layer / 2)) + ".");
  }
  if ((p.schedule == "zb1p" || p.schedule == "zbv") && p.pp > 1 && p.zero == 3 && p.dp * p.cp > 1) {
    c.fail("parallel.zero",
           "ZeRO-3 gives each block's gradient storage back right after its backward, but "
           "schedule: " +
               p.schedule +
               " computes weight gradients later (its W pass). Use zero: 1 or 2 "
               "with " +
               p.schedule + ", or schedule: 1f1b with zero: 3.");
  }
}

// local_sgd and diloco: each replica steps on its own gradients between synchronisations.
// What relies on every replica holding the same gradient or model at every step is refused.
void check_dp_sync(const JobSpec& s, const Checker& c) {
  const ParallelSpec& p = s.parallel;
  if (p.dp_sync == "allreduce") return;
  const std::string mode = "dp_sync: " + p.dp_sync;
  if (p.zero > 0) {
    c.fail("parallel.zero", "ZeRO shards the optimizer state of one shared model over dp; with " +
                                mode +
                                " every replica keeps its own model and optimizer. Use zero: 0, "
                                "or dp_sync: allreduce.");
  }
  if (p.grad_comm != "fp32") {
    c.fail("parallel.grad_comm", "sets how gradients are summed over dp, which " + mode +
                                     " never does (replicas exchange parameters, in fp32). "
                                     "Remove it, or use dp_sync: allreduce.");
  }
  if (s.precision.compute == DType::fp16) {
    c.fail("precision.compute",
           "fp16's loss scaler skips a step when any gradient overflowed, which all replicas "
           "must agree on; with " +
               mode +
               " each replica has its own gradients. Use compute: bf16 (no loss scaling), or "
               "dp_sync: allreduce.");
  }
  if (s.device == Device::cuda) {
    c.fail("parallel.dp_sync", mode +
                                   " runs on the CPU backend only (its averaging and outer "
                                   "step work on host memory); use device: cpu, or "
                                   "dp_sync: allreduce.");
  }
  if (s.training.eval_every > 0 && s.training.eval_every % p.sync_every != 0) {
    c.fail("training.eval_every", "must be a multiple of parallel.sync_every (" +
                                      std::to_string(p.sync_every) + ") with " + mode +
                                      ", so that validation sees the synchronised model; got " +
                                      std::to_string(s.training.eval_every) + ".");
  }
}

// PowerSGD compresses the gradient buckets of synchronous DP (parallel/grad_sync.h).
void check_powersgd(const JobSpec& s, const Checker& c) {
  const ParallelSpec& p = s.parallel;
  if (p.grad_compression != "powersgd") return;
  if (p.dp_sync != "allreduce") {
    c.fail("parallel.grad_compression",
           "powersgd compresses the gradients synchronous DP sums every step; dp_sync: " +
               p.dp_sync + " exchanges parameters instead. Use one of them.");
  }
  if (p.zero >= 2) {
    c.fail("parallel.grad_compression",
           "powersgd works inside the overlapped gradient buckets, which ZeRO-2 replaces by "
           "a reduce-scatter of the whole buffer. Use zero: 0 or 1 with powersgd.");
  }
  if (s.device == Device::cuda) {
    c.fail("parallel.grad_compression",
           "powersgd runs on the CPU backend only (its low-rank products work on host "
           "memory); use device: cpu, or grad_compression: none or bf16.");
  }
}

// Parameter servers (lib/ps/): each of dp workers holds the whole model and pushes its
// whole gradient; the servers own the optimizer. What needs another split of the model or
// of the optimizer, or a step all workers take together, is refused.
void check_parameter_server(const JobSpec& s, const Checker& c) {
  const ParallelSpec& p = s.parallel;
  if (p.mode != "parameter_server") return;
  const std::string why =
      " with mode: parameter_server (each worker holds the whole model "
      "and the servers hold the optimizer). ";
  if (p.tp > 1) c.fail("parallel.tp", "must be 1" + why + "Use tp: 1, or mode: data_parallel.");
  if (p.pp > 1) c.fail("parallel.pp", "must be 1" + why + "Use pp: 1, or mode: data_parallel.");
  if (p.zero > 0) {
    c.fail("parallel.zero", "must be 0" + why +
                                "The servers already shard the optimizer "
                                "state; use zero: 0.");
  }
  if (p.dp_sync != "allreduce") {
    c.fail("parallel.dp_sync", "must be allreduce" + why +
                                   "Parameter servers are their own "
                                   "way to combine the replicas; use one of them.");
  }
  if (p.grad_compression != "none" || p.grad_comm != "fp32") {
    c.fail(p.grad_compression != "none" ? "parallel.grad_compression" : "parallel.grad_comm",
           "is not supported" + why + "Gradients travel to the servers in fp32; remove it.");
  }
  if (s.device == Device::cuda) {
    c.fail("parallel.mode",
           "parameter_server runs on the CPU backend only (the servers "
           "update host memory over TCP); use device: cpu, or mode: "
           "data_parallel.");
  }
  if (s.precision.compute == DType::fp16) {
    c.fail("precision.compute",
           "fp16's loss scaler needs every worker to agree on skipping "
           "a step, which asynchronous workers cannot. Use compute: bf16 "
           "or fp32.");
  }
  if (s.checkpoint.every_minutes > 0) {
    c.fail("checkpoint.every_minutes", "is not supported" + why +
                                           "Server 0 counts the gradients it receives and asks for "
                                           "checkpoints by steps: use checkpoint.every_steps.");
  }
  // Every server holds whole parameters: at least one; a model has at least n_layer + 2.
  if (p.ps_servers > s.model.n_layer + 2) {
    c.fail("parallel.parameter_server.servers",
           "must be at most n_layer + 2 = " + std::to_string(s.model.n_layer + 2) +
               " (each server holds whole parameter tensors); got " + std::to_string(p.ps_servers) +
               ".");
  }
}

void check_batch(const JobSpec& s, const Checker& c) {
  const TrainingSpec& t = s.training;
  const long long unit = 1LL * t.micro_batch_size * s.parallel.dp;
  const std::string unit_text = "micro_batch_size × dp = " + std::to_string(t.micro_batch_size) +
                                " × " + std::to_string(s.parallel.dp) + " = " +
                                std::to_string(unit);
  // Token counts of a micro-batch are 32-bit in the engine's buffers.
  const long long micro_tokens = 1LL * t.micro_batch_size * s.model.seq_len;
  if (micro_tokens > std::numeric_limits<int32_t>::max()) {
    c.fail("training.micro_batch_size",
           "micro_batch_size × model.seq_len = " + std::to_string(micro_tokens) +
               " tokens is too many for one micro-batch (at most 2^31 - 1); use a smaller one.");
  }
  if (t.global_batch_size % unit == 0) return;
  const long long below = t.global_batch_size / unit * unit;
  const long long above = below + unit;
  std::string use =
      below > 0 ? std::to_string(below) + " or " + std::to_string(above) : std::to_string(above);
  c.fail("training.global_batch_size", "must be a multiple of " + unit_text +
                                           " (global batch = micro batch × grad_accum × dp); got " +
                                           std::to_string(t.global_batch_size) + ". Use " + use +
                                           ", or change micro_batch_size.");
}

void check_schedule(const JobSpec& s, const Checker& c) {
  const TrainingSpec& t = s.training;
  const OptimizerSpec& o = s.optimizer;
  if (o.warmup_steps > t.steps) {
    c.fail("optimizer.warmup_steps", "must be <= training.steps (" + std::to_string(t.steps) +
                                         "); got " + std::to_string(o.warmup_steps) + ".");
  }
  if (o.min_lr > o.lr) {
    c.fail("optimizer.min_lr", "must be <= optimizer.lr (" + format_real(o.lr) + "); got " +
                                   format_real(o.min_lr) + ".");
  }
  if (t.eval_every > 0 && t.eval_batches < 1) {
    c.fail("training.eval_batches", "must be >= 1 when training.eval_every is " +
                                        std::to_string(t.eval_every) + "; got " +
                                        std::to_string(t.eval_batches) + ". Or set eval_every: 0.");
  }
}

void check_text_size(const JobSpec& s, const Checker& c, uintmax_t bytes) {
  // Byte-level tokens: one sequence needs seq_len + 1 bytes (inputs plus shifted targets).
  const uintmax_t needed = static_cast<uintmax_t>(s.model.seq_len) + 1;
  const auto held_out = static_cast<uintmax_t>(static_cast<double>(bytes) * s.data.val_fraction);
  if (bytes - held_out < needed) {
    c.fail("data.path", s.data.path.string() + " has " + std::to_string(bytes) + " bytes, " +
                            std::to_string(bytes - held_out) +
                            " for training; one sequence needs model.seq_len + 1 = " +
                            std::to_string(needed) + ".");
  }
  if (s.training.eval_every > 0 && held_out < needed) {
    c.fail("data.val_fraction",
           "holds out " + std::to_string(held_out) + " of " + std::to_string(bytes) +
               " bytes for evaluation; one sequence needs model.seq_len + 1 = " +
               std::to_string(needed) + ". Raise val_fraction or set training.eval_every: 0.");
  }
}

// data.type blend: sources with weights summing to a positive number, each an existing
// path (its contents are checked before launch like data.path's, train/data_check.h).
void check_blend(const JobSpec& s, const Checker& c) {
  const DataSpec& d = s.data;
  if (!d.path.empty()) {
    c.fail("data.path",
           "is not used by data.type blend (each source has its own path); remove it.");
  }
  if (d.sources.empty()) {
    c.fail("data.sources",
           "is required for data.type blend: a list like [{path: web, weight: "
           "0.7}, {path: code, weight: 0.3}].");
  }
  double total = 0;
  std::set<std::string> names;
  for (size_t i = 0; i < d.sources.size(); ++i) {
    const DataSourceSpec& src = d.sources[i];
    const std::string key = "data.sources[" + std::to_string(i) + "]";
    total += src.weight;
    if (!names.insert(src.name).second) {
      c.fail(key + ".name", "'" + src.name +
                                "' names another source too; give each a distinct "
                                "name (it tags val_loss/<name>).");
    }
    std::error_code ec;
    if (!fs::exists(src.path, ec)) {
      c.fail(key + ".path", "no such file or directory: " + src.path.string() + " " +
                                c.relative_rule(key + ".path") + ".");
    }
    if (src.type == "text" && s.model.vocab_size < 256) {
      c.fail("model.vocab_size", "must be >= 256 for a text source (one token per byte); got " +
                                     std::to_string(s.model.vocab_size) + ".");
    }
  }
  if (!(total > 0)) {
    c.fail("data.sources", "the weights sum to " + format_real(total) +
                               "; they must sum to a positive number (each source is drawn in "
                               "proportion to its weight).");
  }
}

void check_data(const JobSpec& s, const Checker& c) {
  const DataSpec& d = s.data;
  if (d.type != "blend" && !d.sources.empty()) {
    c.fail("data.sources", "is used only with data.type blend; remove it or set data.type: blend.");
  }
  if (d.type != "blend" && d.seed) {
    c.fail("data.seed",
           "is used only with data.type blend (other data follows the job's seed); "
           "remove it.");
  }
  if (d.type == "blend") return check_blend(s, c);
  if (d.type == "synthetic") {
    if (!d.path.empty()) {
      c.fail("data.path",
             "must not be given for data.type synthetic (its tokens are generated); "
             "remove it, or set data.type to text or tokens.");
    }
    return;
  }
  if (d.path.empty()) {
    c.fail("data.path", "is required for data.type " + d.type + "; add `path: <file>` under data.");
  }
  if (d.type == "text" && s.model.vocab_size < 256) {
    c.fail("model.vocab_size", "must be >= 256 for data.type text (one token per byte); got " +
                                   std::to_string(s.model.vocab_size) + ".");
  }
  if (s.training.eval_every > 0 && d.val_fraction == 0) {
    c.fail("data.val_fraction", "must be > 0 when training.eval_every is " +
                                    std::to_string(s.training.eval_every) +
                                    " (evaluation needs held-out data); e.g. 0.05, or set "
                                    "training.eval_every: 0.");
  }
  std::error_code ec;
  const fs::file_status status = fs::status(d.path, ec);
  if (!fs::exists(status)) {
    c.fail("data.path",
           "no such file: " + d.path.string() + " " + c.relative_rule("data.path") + ".");
  }
  // A FIFO would hang whoever opens it, a device never ends, a directory is no corpus. The
  // token file's contents are checked before launch too, by data/file_checks.h (the config
  // layer knows no file formats).
  struct stat st {};
  // data.type tokens also takes a directory written by `trainctl data prepare` (its
  // manifest.json is checked with the data, data/manifest.h).
  if (::stat(d.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) &&
      !(d.type == "tokens" && S_ISDIR(st.st_mode))) {
    c.fail("data.path", d.path.string() + " is " + file_kind(st.st_mode) +
                            ", not a regular file; data.path names one " +
                            (d.type == "text" ? "text file."
                                              : "token file or a directory written by "
                                                "`trainctl data prepare`."));
  }
  if (d.type == "text") {
    const uintmax_t bytes = fs::file_size(d.path, ec);
    if (ec) c.fail("data.path", "cannot read the size of " + d.path.string() + ": " + ec.message());
    check_text_size(s, c, bytes);
  }
}

void check_run_dir(const JobSpec& s, const Checker& c) {
  // Too long a path fails only when run_dir is made ("File name too long"); say it now.
  // Room is left for what a run writes below it (checkpoints/.tmp_step_<N>/rank_<R>...).
  constexpr size_t kRoomBelow = 96;
  const std::string text = s.run_dir.string();
  if (text.size() + kRoomBelow > PATH_MAX) {
    c.fail("run_dir", "the path is " + std::to_string(text.size()) + " characters long; at most " +
                          std::to_string(PATH_MAX - kRoomBelow) +
                          " (the system's PATH_MAX, less room for the files a run writes).");
  }
  for (const fs::path& part : s.run_dir) {
    if (part.native().size() > NAME_MAX) {
      c.fail("run_dir", "its component \"" + part.native().substr(0, 40) + "...\" is " +
                            std::to_string(part.native().size()) + " characters long; at most " +
                            std::to_string(NAME_MAX) + " per name.");
    }
  }
  std::error_code ec;
  const fs::file_status status = fs::status(s.run_dir, ec);
  if (fs::exists(status) && !fs::is_directory(status)) {
    c.fail("run_dir", s.run_dir.string() + " exists and is not a directory.");
  }
}

}  // namespace

void check_fault_tolerance(const JobSpec& spec, const Locations& locations);  // its own file

void validate_job_spec(const JobSpec& spec, const Locations& locations) {
  const Checker c(locations);
  check_model(spec, c);
  check_moe(spec, c);
  check_expert_parallel(spec, c);
  check_parallel(spec, c);
  check_zero_bubble(spec, c);
  check_context_parallel(spec, locations);
  check_dp_sync(spec, c);
  check_powersgd(spec, c);
  check_parameter_server(spec, c);
  check_fault_tolerance(spec, locations);
  check_batch(spec, c);
  check_schedule(spec, c);
  check_stage_split(spec, locations);
  check_data(spec, c);
  check_run_dir(spec, c);
  check_sequence_parallel(spec, locations);
}

}  // namespace trainctl::config::detail
