#include "comm/self_test.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <sstream>

namespace trainctl::comm {

namespace {

void fill(std::vector<float>& v, int rank, size_t first_index = 0) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = self_test_value(rank, first_index + i);
}

std::string op_label(std::string_view op, size_t count) {
  return std::string(op) + " (" + std::to_string(count) + " elements)";
}

void check_allreduce(Communicator& comm, size_t n, ReduceOp op) {
  std::vector<float> data(n);
  fill(data, comm.rank());
  comm.allreduce(data.data(), n, op);
  const int p = comm.size();
  const char* name = op == ReduceOp::sum ? "allreduce sum" : "allreduce max";
  check_collective_result(comm.name(), op_label(name, n), data.data(), n, [&](size_t i) {
    float acc = self_test_value(0, i);
    for (int r = 1; r < p; ++r) {
      acc =
          op == ReduceOp::sum ? acc + self_test_value(r, i) : std::max(acc, self_test_value(r, i));
    }
    return acc;
  });
}

// Rank `from` sends rank `to` a block whose size varies with both (zero for some pairs, as
// experts that receive no tokens), holding self_test_value(from, to * (n + 2) + i).
size_t alltoallv_block(int from, int to, size_t n) {
  return (n + static_cast<size_t>(3 * from + 5 * to)) % (n + 2);
}

void check_alltoallv(Communicator& comm, size_t n) {
  const int p = comm.size(), me = comm.rank();
  std::vector<size_t> sends, recvs;
  std::vector<float> in;
  for (int d = 0; d < p; ++d) {
    sends.push_back(alltoallv_block(me, d, n));
    recvs.push_back(alltoallv_block(d, me, n));
    for (size_t i = 0; i < sends.back(); ++i) {
      in.push_back(self_test_value(me, static_cast<size_t>(d) * (n + 2) + i));
    }
  }
  size_t total = 0;
  for (size_t c : recvs) total += c;
  std::vector<float> out(total, -1.0f);
  comm.alltoallv(in.data(), sends.data(), out.data(), recvs.data());
  size_t at = 0;
  for (int s = 0; s < p; ++s) {
    const size_t block = recvs[static_cast<size_t>(s)];
    check_collective_result(
        comm.name(), op_label("alltoallv", n), out.data() + at, block,
        [&](size_t i) { return self_test_value(s, static_cast<size_t>(me) * (n + 2) + i); });
    at += block;
  }
}

void check_reduce_scatter(Communicator& comm, size_t n) {
  const int p = comm.size();
  std::vector<float> in(n * static_cast<size_t>(p));
  fill(in, comm.rank());
  std::vector<float> out(n, -1.0f);
  comm.reduce_scatter(in.data(), out.data(), n);
  const size_t first = static_cast<size_t>(comm.rank()) * n;
  check_collective_result(comm.name(), op_label("reduce_scatter", n), out.data(), n, [&](size_t i) {
    float acc = 0.0f;
    for (int r = 0; r < p; ++r) acc += self_test_value(r, first + i);
    return acc;
  });
}

void check_allgather(Communicator& comm, size_t n) {
  const int p = comm.size();
  std::vector<float> in(n);
  fill(in, comm.rank());
  std::vector<float> out(n * static_cast<size_t>(p), -1.0f);
  comm.allgather(in.data(), out.data(), n);
  check_collective_result(
      comm.name(), op_label("allgather", n), out.data(), out.size(),
      [&](size_t i) { return self_test_value(static_cast<int>(i / n), i % n); });
}

void check_broadcast(Communicator& comm, size_t n) {
  for (int root = 0; root < comm.size(); ++root) {
    std::vector<float> data(n);
    fill(data, comm.rank());
    comm.broadcast(data.data(), n, root);
    check_collective_result(comm.name(), op_label("broadcast from root " + std::to_string(root), n),
                            data.data(), n, [&](size_t i) { return self_test_value(root, i); });
  }
}

// Each rank sends to the next and receives from the previous. Rank 0 sends first and
// every other rank receives first, so the blocking calls form a chain, not a cycle.
void check_send_recv_ring(Communicator& comm, size_t n, uint32_t tag) {
  const int p = comm.size();
  if (p == 1) return;
  const int next = (comm.rank() + 1) % p;
  const int prev = (comm.rank() + p - 1) % p;
  std::vector<float> out(n);
  fill(out, comm.rank());
  std::vector<float> in(n, -1.0f);
  const size_t bytes = n * sizeof(float);
  if (comm.rank() == 0) {
    comm.send(out.data(), bytes, next, tag);
    comm.recv(in.data(), bytes, prev, tag);
  } else {
    comm.recv(in.data(), bytes, prev, tag);
    comm.send(out.data(), bytes, next, tag);
  }
  check_collective_result(comm.name(), op_label("recv from rank " + std::to_string(prev), n),
                          in.data(), n, [&](size_t i) { return self_test_value(prev, i); });
}

}  // namespace

float self_test_value(int rank, size_t index) {
  // 1021 is prime, so two ranks (fewer than 1021 apart) never agree at the same index.
  return static_cast<float>((index * 7 + static_cast<size_t>(rank) * 131 + 1) % 1021);
}

void check_collective_result(std::string_view group, std::string_view op, const float* got,
                             size_t count, const std::function<float(size_t)>& expected) {
  for (size_t i = 0; i < count; ++i) {
    const float want = expected(i);
    if (got[i] != want) {
      std::ostringstream msg;
      msg << "collective self-test failed: " << op << " on group " << group << ": element " << i
          << " is " << got[i] << ", expected " << want;
      throw SelfTestError(msg.str());
    }
  }
}

void run_collective_self_test(Communicator& comm, const SelfTestOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  uint32_t tag = 0;
  for (size_t n : options.counts) {
    check_allreduce(comm, n, ReduceOp::sum);
    check_allreduce(comm, n, ReduceOp::max);
    check_reduce_scatter(comm, n);
    check_allgather(comm, n);
    check_broadcast(comm, n);
    check_send_recv_ring(comm, n, tag++);
    check_alltoallv(comm, n);
    comm.barrier();
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const size_t largest =
      options.counts.empty() ? 0 : *std::max_element(options.counts.begin(), options.counts.end());
  spdlog::info(
      "comm self-test on group {} ({} ranks, this is rank {}): allreduce sum/max, "
      "reduce_scatter, allgather, broadcast, send/recv, alltoallv, barrier correct for {} sizes up "
      "to {} "
      "elements in {:.0f} ms",
      comm.name(), comm.size(), comm.rank(), options.counts.size(), largest, ms);
}

void run_collective_self_test(const ProcessGroups& groups, const SelfTestOptions& options) {
  for (Communicator* comm :
       {groups.world.get(), groups.dp.get(), groups.tp.get(), groups.pp.get()}) {
    if (comm == nullptr)
      throw std::invalid_argument("run_collective_self_test: a group is missing");
    run_collective_self_test(*comm, options);
  }
  // The CP ring (send/recv around the ring is what ring attention does).
  if (groups.cp && groups.layout.cp > 1) run_collective_self_test(*groups.cp, options);
  // The expert-parallel groups exist only with parallel.ep > 1.
  for (Communicator* comm : {groups.ep.get(), groups.edp.get()}) {
    if (comm != nullptr) run_collective_self_test(*comm, options);
  }
  // Ranks of different sub-groups finish at different times; the world barrier makes the
  // self-test end together, so no rank moves on (or exits) while another still checks.
  groups.world->barrier();
}

}  // namespace trainctl::comm
