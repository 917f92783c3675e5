#pragma once
// Alpha-beta costs of ring collectives: alpha is the per-message latency, beta the time per
// byte (1 / bandwidth per GPU per direction). `bytes` is each rank's full buffer; times are
// seconds. A group of one costs nothing.
#include "plan/cluster_spec.h"

namespace trainctl::plan {

// (n-1) steps, each moving bytes/n: (n-1) * (alpha + bytes / (n * bw)).
double ring_reduce_scatter_seconds(double bytes, int ranks, const LinkTier& link);
double ring_allgather_seconds(double bytes, int ranks, const LinkTier& link);
// Reduce-scatter then allgather: 2 (n-1) * (alpha + bytes / (n * bw)).
double ring_allreduce_seconds(double bytes, int ranks, const LinkTier& link);
// One message from one rank to another: alpha + bytes / bw.
double p2p_seconds(double bytes, const LinkTier& link);
// All-to-all of `bytes` per rank spread evenly over the group (pairwise exchange): each
// rank sends bytes/n to each of the n-1 others, (n-1) * (alpha + bytes / (n * bw)).
double alltoall_seconds(double bytes, int ranks, const LinkTier& link);

}  // namespace trainctl::plan
