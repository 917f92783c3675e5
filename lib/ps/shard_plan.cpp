#include "ps/shard_plan.h"

#include <stdexcept>
#include <string>

namespace trainctl::ps {

std::vector<ServerShard> plan_shards(const std::vector<model::Param>& params, int servers) {
  const auto n = params.size();
  if (servers < 1 || static_cast<size_t>(servers) > n) {
    throw std::invalid_argument("parameter servers: " + std::to_string(servers) + " servers for " +
                                std::to_string(n) +
                                " parameters (each server needs at least one whole parameter)");
  }
  int64_t total = 0;
  for (const model::Param& p : params) total += p.numel;

  // Greedy: server s ends at the parameter whose end is nearest to (s + 1) / S of the
  // total, so no shard exceeds total / S by more than one parameter, and every server
  // keeps at least one parameter for itself and leaves one for each server after it.
  std::vector<ServerShard> shards;
  size_t first = 0;
  int64_t done = 0;  // numel of the parameters before `first`
  for (int s = 0; s < servers; ++s) {
    size_t last = n;
    int64_t cum = done;
    if (s + 1 < servers) {
      const double target = static_cast<double>(total) * (s + 1) / servers;
      const size_t max_last = n - static_cast<size_t>(servers - 1 - s);
      last = first + 1;
      cum += params[first].numel;
      while (last < max_last && static_cast<double>(cum) < target) {
        const int64_t after = cum + params[last].numel;
        // Crossing the target: stop before this parameter when that is closer to it.
        if (static_cast<double>(after) >= target &&
            target - static_cast<double>(cum) < static_cast<double>(after) - target) {
          break;
        }
        cum = after;
        ++last;
      }
    } else {
      for (size_t i = first; i < n; ++i) cum += params[i].numel;
    }
    ServerShard shard;
    shard.first_param = first;
    shard.last_param = last;
    shard.begin = params[first].offset;
    shard.end = params[last - 1].offset + params[last - 1].numel;
    shards.push_back(shard);
    first = last;
    done = cum;
  }
  return shards;
}

std::vector<ServerShard> plan_shards(const std::vector<model::ParamSpec>& specs, int servers) {
  const std::vector<int64_t> offsets = model::flat_offsets(specs);
  std::vector<model::Param> params(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    params[i].name = specs[i].name;
    params[i].offset = offsets[i];
    params[i].numel = numel_of(specs[i].shard.local_shape());
  }
  return plan_shards(params, servers);
}

}  // namespace trainctl::ps
