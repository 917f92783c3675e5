// The hierarchical allreduce (comm/gloo/hierarchical.h): which ranks share a host, and the
// allreduce itself with 2 "hosts" x 2 ranks as threads (shared memory within a host, a
// Gloo context between the hosts' leaders). tests/multihost/ runs it across real hosts.
#include <catch2/catch.hpp>

#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/prefix_store.h>

#include <limits>
#include <string>
#include <vector>

#include "comm/gloo/gloo_communicator.h"
#include "comm/gloo/hierarchical.h"
#include "test_comm_support.h"

using namespace trainctl::comm;

TEST_CASE("ranks are grouped by host in order of their lowest rank", "[comm]") {
  const auto hosts = group_by_host({"b", "a", "b", "a", "c"});
  CHECK(hosts == std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4}});
  CHECK(hierarchy_pays(hosts));
  CHECK_FALSE(hierarchy_pays(group_by_host({"a", "a", "a"})));  // one host: plain shm
  CHECK_FALSE(hierarchy_pays(group_by_host({"a", "b", "c"})));  // one rank per host: flat
}

TEST_CASE("hierarchical allreduce over 2 hosts x 2 ranks gives the sum and max everywhere",
          "[comm]") {
  constexpr int kHosts = 2, kPerHost = 2, kRanks = kHosts * kPerHost;
  // Odd, and longer than a few shared-memory slots.
  const size_t count = GENERATE(size_t{1}, size_t{3001});
  gloo::rendezvous::HashStore store;
  std::vector<std::vector<float>> sums(kRanks), maxes(kRanks);
  testing::run_ranks(kRanks, [&](int rank) {
    const int host = rank / kPerHost, local_rank = rank % kPerHost;
    gloo::rendezvous::PrefixStore host_store("host" + std::to_string(host), store);
    shm::ShmOptions shm_options;
    shm_options.slot_bytes = 4096;
    std::string why_not;
    auto local = shm::ShmGroup::connect(host_store, local_rank, kPerHost, shm_options, &why_not);
    if (!local) throw std::runtime_error("no shared memory: " + why_not);
    std::unique_ptr<Communicator> leaders;
    if (local_rank == 0) {
      gloo::rendezvous::PrefixStore leaders_store("leaders", store);
      leaders = std::make_unique<GlooCommunicator>(
          testing::connect_world(leaders_store, host, kHosts), "hosts");
    }
    HierarchicalAllreduce hier(std::move(local), std::move(leaders), kHosts);
    // Integer values: every order of summation gives the exact sum.
    std::vector<float> data(count), high(count);
    for (size_t i = 0; i < count; ++i) {
      data[i] = static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 97));
      high[i] = static_cast<float>(-100 + rank * 10 - static_cast<int>(i % 7));
    }
    hier.allreduce(data.data(), count, ReduceOp::sum);
    hier.allreduce(high.data(), count, ReduceOp::max);
    sums[static_cast<size_t>(rank)] = data;
    maxes[static_cast<size_t>(rank)] = high;
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    for (size_t i = 0; i < count; ++i) {
      const float sum = static_cast<float>(10000 + kRanks * static_cast<int>(i % 97));
      const float max = static_cast<float>(-100 + (kRanks - 1) * 10 - static_cast<int>(i % 7));
      INFO("rank " << rank << ", element " << i);
      REQUIRE(sums[static_cast<size_t>(rank)][i] == sum);
      REQUIRE(maxes[static_cast<size_t>(rank)][i] == max);
    }
  }
}
