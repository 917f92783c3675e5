#include "comm/bench_comm.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace trainctl::comm {

namespace {

double bus_factor(const std::string& op, int n) {
  if (n == 1) return 0.0;  // nothing crosses a link
  const double ranks = n;
  if (op == "allreduce") return 2.0 * (ranks - 1) / ranks;
  return (ranks - 1) / ranks;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

BenchRow bench_one(Communicator& comm, const std::string& op, size_t bytes,
                   const BenchOptions& options) {
  const auto n = static_cast<size_t>(comm.size());
  BenchRow row;
  row.op = op;
  row.count = op == "allreduce" ? bytes / sizeof(float) : bytes / sizeof(float) / n;
  const size_t total = op == "allreduce" ? row.count : row.count * n;
  row.bytes = total * sizeof(float);
  row.algo = comm.algorithm_name(op, row.count);

  std::vector<float> big(total, 1.0f);
  std::vector<float> small(row.count, 1.0f);
  auto run = [&] {
    if (op == "allreduce") {
      comm.allreduce(big.data(), row.count);
    } else if (op == "allgather") {
      comm.allgather(small.data(), big.data(), row.count);
    } else {
      comm.reduce_scatter(big.data(), small.data(), row.count);
    }
  };
  for (int i = 0; i < options.warmup_iters; ++i) run();
  std::vector<double> times_us;
  for (int i = 0; i < options.iters; ++i) {
    comm.barrier();  // start together, so a rank's time is not another's lateness
    const auto t0 = std::chrono::steady_clock::now();
    run();
    times_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  float slowest = static_cast<float>(median(times_us));
  comm.allreduce(&slowest, 1, ReduceOp::max);
  row.time_us = slowest;
  row.algbw_GBps = row.time_us > 0 ? static_cast<double>(row.bytes) / (row.time_us * 1e3) : 0.0;
  row.busbw_GBps = row.algbw_GBps * bus_factor(op, comm.size());
  return row;
}

}  // namespace

std::vector<BenchRow> bench_collectives(Communicator& comm, const BenchOptions& options) {
  if (options.min_bytes == 0 || options.max_bytes < options.min_bytes || options.factor < 2 ||
      options.iters < 1 || options.warmup_iters < 0) {
    throw std::invalid_argument(
        "bench_collectives: need 0 < min_bytes <= max_bytes, factor >= 2, iters >= 1");
  }
  for (const auto& op : options.ops) {
    if (op != "allreduce" && op != "allgather" && op != "reduce_scatter") {
      throw std::invalid_argument("bench_collectives: unknown op '" + op +
                                  "' (expected allreduce, allgather or reduce_scatter)");
    }
  }
  std::vector<BenchRow> rows;
  for (const auto& op : options.ops) {
    // At least one float per rank (allgather's input, reduce_scatter's output block).
    const size_t min_total =
        sizeof(float) * (op == "allreduce" ? 1 : static_cast<size_t>(comm.size()));
    for (size_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= options.factor) {
      if (bytes < min_total) continue;
      rows.push_back(bench_one(comm, op, bytes, options));
    }
  }
  return rows;
}

std::string format_bench_table(const std::vector<BenchRow>& rows) {
  std::string out = fmt::format("#{:>15} {:>12} {:>12} {:>6} {:>12} {:>8} {:>8}  {}\n", "op",
                                "size", "count", "type", "time", "algbw", "busbw", "algo");
  out += fmt::format("#{:>15} {:>12} {:>12} {:>6} {:>12} {:>8} {:>8}\n", "", "(B)", "(elements)",
                     "", "(us)", "(GB/s)", "(GB/s)");
  for (const auto& r : rows) {
    out += fmt::format(" {:>15} {:>12} {:>12} {:>6} {:>12.1f} {:>8.3f} {:>8.3f}  {}\n", r.op,
                       r.bytes, r.count, "float", r.time_us, r.algbw_GBps, r.busbw_GBps, r.algo);
  }
  return out;
}

}  // namespace trainctl::comm
