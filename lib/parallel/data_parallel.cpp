#include "parallel/data_parallel.h"

#include "parallel/exact_sum.h"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

namespace trainctl::parallel {

DataParallel::DataParallel(comm::Communicator& dp, model::Gpt& gpt, ops::Backend& backend,
                           const optim::OptimizerOptions& optimizer,
                           const DataParallelOptions& options)
    : dp_(dp), gpt_(gpt), backend_(backend), zero_stage_(options.zero_stage), norm_(options.norm) {
  if (zero_stage_ < 0 || zero_stage_ > 3) {
    throw std::invalid_argument("parallel.zero must be 0, 1, 2 or 3, got " +
                                std::to_string(zero_stage_));
  }
  if (options.weights != DType::fp32) {
    if (zero_stage_ == 3) {
      throw std::invalid_argument(
          "ZeRO-3 keeps fp32 parameter shards: the mixed-precision layout (16-bit weights, "
          "fp32 master) is built for ZeRO 0-2");
    }
    // The master is sharded like ZeRO's moments: over the ranks holding the same
    // parameters (expert-DP with expert parallelism).
    comm::Communicator& shards =
        zero_stage_ > 0 && options.sync.expert_dp ? *options.sync.expert_dp : dp;
    mixed_ = std::make_unique<MixedParams>(gpt, backend, options.weights, shards, zero_stage_ > 0);
  }
  // The fp32 values the optimizer updates: the model's own, or the mixed layout's master.
  float* const weights = mixed_ ? mixed_->master() : nullptr;
  if (options.periodic.mode != DpSyncMode::allreduce) {
    if (zero_stage_ != 0) {
      throw std::invalid_argument("parallel.dp_sync " +
                                  std::string(to_string(options.periodic.mode)) +
                                  " keeps a model per replica: ZeRO does not apply");
    }
    // Replicas step on their own gradients: no buckets, no grad-ready hook.
    optimizer_ = optim::make_optimizer(optimizer, gpt.params(), backend, weights);
    periodic_ =
        std::make_unique<PeriodicSync>(dp, gpt.params(), backend, options.periodic, weights);
    return;
  }
  if (zero_stage_ == 3) {
    zero3_ = std::make_unique<Zero3Params>(dp, gpt, backend);
    auto adamw = std::make_unique<Zero3AdamW>(*zero3_, gpt.params(), backend, optimizer);
    zero3_adamw_ = adamw.get();
    optimizer_ = std::move(adamw);
    return;  // gradients are reduce-scattered block by block from the model's hooks
  }
  if (zero_stage_ == 0) {
    optimizer_ = optim::make_optimizer(optimizer, gpt.params(), backend, weights);
  } else {
    // Expert parallelism: the DP ranks differ in their experts, so ZeRO shards over the
    // expert-DP group, whose ranks hold the same parameters and (after the sums below) the
    // same gradients.
    comm::Communicator& shards = options.sync.expert_dp ? *options.sync.expert_dp : dp;
    auto zero =
        std::make_unique<ZeroAdamW>(shards, gpt.params(), backend, optimizer, zero_stage_, weights);
    zero_ = zero.get();
    optimizer_ = std::move(zero);
  }
  if (zero_stage_ != 2) {
    sync_ = attach_grad_sync(gpt, dp, options.sync);
  } else if (options.sync.expert_dp != nullptr) {
    // ZeRO-2 with expert parallelism: the reduce-scatter over expert-DP sums each float over
    // the ranks holding the same experts, which is the whole sum for the experts but only
    // 1/ep of it for the dense parameters. So reduce_gradients() first sums the dense ranges
    // over the ep group (ep x edp = dp). It runs after the backward pass, on this thread:
    // the ep group carries the MoE layers' all-to-alls while the backward runs.
    if (options.ep == nullptr) {
      throw std::invalid_argument("ZeRO-2 with expert parallelism needs the ep group");
    }
    dense_over_ep_ = std::make_unique<GradReducer>(*options.ep, options.sync.dtype);
    int64_t at = 0;
    for (const model::Param& p : gpt.params().list()) {
      if (!p.expert) continue;
      if (p.offset > at) dense_ranges_.emplace_back(at, p.offset);
      at = p.offset + p.numel;
    }
    if (gpt.params().total() > at) dense_ranges_.emplace_back(at, gpt.params().total());
  }
  // Otherwise ZeRO-2 keeps only its shard of the summed gradient: no bucketed allreduce.
}

DataParallel::~DataParallel() {
  if (sync_) gpt_.set_grad_ready_hook({});
}

void DataParallel::begin_step(int64_t step) {
  if (sync_) sync_->begin_step(step);
  if (zero3_) zero3_->begin_step();
}

void DataParallel::begin_micro_batch(bool last) {
  if (sync_) sync_->begin_micro_batch(last);
}

void DataParallel::reduce_gradients() {
  if (sync_) sync_->finish();
  dense_over_ep_stats_ = {};
  if (dense_over_ep_ && dense_over_ep_->comm_size() > 1) {
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& [b, e] : dense_ranges_) {
      const auto n = static_cast<size_t>(e - b);
      dense_over_ep_->allreduce_sum(gpt_.params().grads() + b, n);
      dense_over_ep_stats_.collectives += 1;
      dense_over_ep_stats_.wire_bytes += n * dense_over_ep_->wire_bytes_per_element();
      dense_over_ep_stats_.sent_bytes += dense_over_ep_->sent_bytes(n);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    dense_over_ep_stats_.comm_s = dense_over_ep_stats_.exposed_s = s;
  }
  if (zero_) zero_->reduce_gradients();
  if (zero3_) zero3_->finish_backward();
}

double DataParallel::grad_norm() {
  if (zero3_adamw_) {  // each rank holds a shard of the sum: add every shard's part
    comm::Communicator& group = norm_.group != nullptr ? *norm_.group : dp_;
    return std::sqrt(allsum_exact(group, zero3_adamw_->local_grad_sumsq(norm_.counted)));
  }
  if (periodic_) return replica_grad_norm();
  if (norm_.group == nullptr) {
    return zero_ ? zero_->grad_norm() : optim::grad_norm(gpt_.params(), backend_);
  }
  double local = 0.0;
  if (zero_ && norm_.expert_dp != nullptr) {
    // ZeRO over expert-DP: each edp group holds the whole (summed) buffer in shards; the
    // dense part is counted in the first one only (ep rank 0), every group's experts.
    if (norm_.first_in_ep_group) local = zero_->local_grad_sumsq(norm_.counted);
    local += zero_->local_grad_sumsq(norm_.expert_counted);
  } else if (zero_) {
    local = zero_->local_grad_sumsq(norm_.counted);
  } else {
    // DP replicas hold the same summed gradient: count one (of each expert block, the
    // first DP rank holding it).
    const float* grads = gpt_.params().grads();
    auto add = [&](const std::vector<FloatRange>& ranges) {
      for (const auto& [b, e] : ranges) {
        local += backend_.sum_squares(grads + b, static_cast<size_t>(e - b));
      }
    };
    if (dp_.rank() == 0) add(norm_.counted);
    if (norm_.expert_dp != nullptr && norm_.expert_dp->rank() == 0) add(norm_.expert_counted);
  }
  return std::sqrt(allsum_exact(*norm_.group, local));
}

double DataParallel::replica_grad_norm() {
  if (norm_.group == nullptr) return optim::grad_norm(gpt_.params(), backend_);
  double local = 0.0;
  const float* grads = gpt_.params().grads();
  for (const auto& [b, e] : norm_.counted) {
    local += backend_.sum_squares(grads + b, static_cast<size_t>(e - b));
  }
  // Every world rank's sum travels; each adds, in rank order, those of its own replica.
  comm::Communicator& world = *norm_.group;
  const int replica = (world.rank() / norm_.dp_stride) % dp_.size();
  return std::sqrt(allsum_exact_where(
      world, local, [&](int rank) { return (rank / norm_.dp_stride) % dp_.size() == replica; }));
}

namespace {
std::vector<FloatRange> counted_ranges(const model::ParameterSet& params,
                                       bool (*take)(const model::Param&)) {
  std::vector<FloatRange> out;
  for (const model::Param& p : params.list()) {
    if (!take(p) || p.tied_copy || (!p.shard.split() && p.shard.index != 0)) continue;
    if (!out.empty() && out.back().second >= p.offset) {
      out.back().second = p.offset + p.numel;
    } else {
      out.emplace_back(p.offset, p.offset + p.numel);
    }
  }
  return out;
}
}  // namespace

std::vector<FloatRange> norm_counted_ranges(const model::ParameterSet& params, bool skip_experts) {
  if (!skip_experts) return counted_ranges(params, [](const model::Param&) { return true; });
  return counted_ranges(params, [](const model::Param& p) { return !p.expert; });
}

std::vector<FloatRange> expert_counted_ranges(const model::ParameterSet& params) {
  return counted_ranges(params, [](const model::Param& p) { return p.expert; });
}

double DataParallel::clip_grad_norm(double norm, double max_norm, double unscale) {
  const double clip = optim::clip_factor(norm, max_norm);
  const double factor = clip * unscale;
  if (factor == 1.0) return clip;
  if (zero3_adamw_) {
    zero3_adamw_->scale_grads(factor);
  } else if (zero_) {
    zero_->scale_grads(factor);
  } else {
    backend_.scale(gpt_.params().grads(), static_cast<float>(factor),
                   static_cast<size_t>(gpt_.params().total()));
  }
  return clip;
}

void DataParallel::step(double lr) {
  optimizer_->step(lr);
  if (mixed_) mixed_->publish();  // the 16-bit weights from the new master (ZeRO: allgather)
}

void DataParallel::after_update(int64_t step, bool last) {
  if (!periodic_) return;
  periodic_->after_update(step, last);
  if (mixed_) mixed_->publish();  // the replicas may have averaged their masters
}

float DataParallel::local_grad_factor() const {
  return periodic_ ? static_cast<float>(dp_.size()) : 1.0f;
}

StepCommStats DataParallel::stats() const {
  StepCommStats s;
  if (sync_) s += sync_->stats();
  s += dense_over_ep_stats_;
  if (zero_) s += zero_->stats();
  if (zero3_) s += zero3_->stats();
  if (periodic_) s += periodic_->stats();
  if (mixed_) s += mixed_->publish_stats();
  return s;
}

}  // namespace trainctl::parallel
