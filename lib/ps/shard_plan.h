#pragma once
// Which parameters each parameter server holds. The flat parameter layout
// (model/parameters.h) is cut into `servers` contiguous runs of whole parameters, balanced
// by size, so a worker sends server s one contiguous range of its gradient buffer and
// reads back one contiguous range of its parameter buffer, and a server's own
// ParameterSet of those parameters has the same layout as that range (parameters start on
// 64-byte boundaries, so offsets relative to the first one are unchanged).
//
// Every process computes the plan from the same parameter list, so workers and servers
// agree on it without exchanging it.
#include <cstdint>
#include <vector>

#include "model/parameters.h"

namespace trainctl::ps {

struct ServerShard {
  int64_t begin = 0;       // floats into the flat layout (the first parameter's offset)
  int64_t end = 0;         // one past the last parameter's last float (padding excluded)
  size_t first_param = 0;  // parameters [first_param, last_param) of the list
  size_t last_param = 0;
  int64_t floats() const { return end - begin; }
};

// Throws std::invalid_argument when servers < 1 or servers > params.size() (a server
// would hold nothing).
std::vector<ServerShard> plan_shards(const std::vector<model::Param>& params, int servers);
// The same for a parameter list not yet declared (offsets and sizes as a ParameterSet
// declaring `specs` would give them: model::flat_offsets).
std::vector<ServerShard> plan_shards(const std::vector<model::ParamSpec>& specs, int servers);

}  // namespace trainctl::ps
