#include "plan/collective_cost.h"

namespace trainctl::plan {
namespace {

double ring_steps(double bytes, int ranks, int passes, const LinkTier& link) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double chunk = bytes / ranks;
  return passes * (ranks - 1) * (link.latency_us * 1e-6 + chunk / (link.bandwidth_gbs * 1e9));
}

}  // namespace

double ring_reduce_scatter_seconds(double bytes, int ranks, const LinkTier& link) {
  return ring_steps(bytes, ranks, 1, link);
}

double ring_allgather_seconds(double bytes, int ranks, const LinkTier& link) {
  return ring_steps(bytes, ranks, 1, link);
}

double ring_allreduce_seconds(double bytes, int ranks, const LinkTier& link) {
  return ring_steps(bytes, ranks, 2, link);
}

double alltoall_seconds(double bytes, int ranks, const LinkTier& link) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double n = ranks;
  return (n - 1) * (link.latency_us * 1e-6 + bytes / (n * link.bandwidth_gbs * 1e9));
}

double p2p_seconds(double bytes, const LinkTier& link) {
  if (bytes <= 0) return 0;
  return link.latency_us * 1e-6 + bytes / (link.bandwidth_gbs * 1e9);
}

}  // namespace trainctl::plan
