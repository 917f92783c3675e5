#pragma once
// Collective bandwidth benchmark in the style of nccl-tests: time per call, algorithm
// bandwidth (bytes / time) and bus bandwidth (algbw times the op's link-traffic factor:
// allreduce 2(n-1)/n, allgather and reduce_scatter (n-1)/n), comparable across group sizes.
#include <cstddef>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace trainctl::comm {

struct BenchOptions {
  // Message sizes from min_bytes to max_bytes, multiplying by `factor`. The size is the
  // whole buffer as in nccl-tests: allreduce's data, allgather's output, reduce_scatter's
  // input.
  size_t min_bytes = 4 * 1024;
  size_t max_bytes = 64 * 1024 * 1024;
  size_t factor = 4;
  int warmup_iters = 2;
  int iters = 5;
  std::vector<std::string> ops = {"allreduce", "allgather", "reduce_scatter"};
};

struct BenchRow {
  std::string op;
  size_t bytes = 0;    // as defined in BenchOptions
  size_t count = 0;    // floats per rank: allreduce's, allgather's input, reduce_scatter's output
  double time_us = 0;  // median over iterations, then the slowest rank's
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  std::string algo;  // comm.algorithm_name(op, count)
};

// Collective over `comm`: every rank calls it with the same options and gets the same
// rows (times are reduced to the slowest rank). Sizes too small to give every rank one
// element are skipped. Throws std::invalid_argument for an unknown op or bad sizes.
std::vector<BenchRow> bench_collectives(Communicator& comm, const BenchOptions& options = {});

// An nccl-tests-like table, one line per row, with a header.
std::string format_bench_table(const std::vector<BenchRow>& rows);

}  // namespace trainctl::comm
