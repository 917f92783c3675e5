// The NCCL communicator through the plugin: groups of one rank on any GPU machine, and
// real collectives between two ranks (threads, one GPU each) where two GPUs are visible.
#include <gloo/rendezvous/hash_store.h>

#include <thread>

#include "device/cuda_plugin.h"
#include "device/nccl_groups.h"
#include "gpu/gpu_support.h"

using namespace trainctl;
using namespace trainctl::gpu_test;

TEST_CASE("NCCL groups of one rank: collectives are local", "[gpu][nccl]") {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  comm::ProcessGroups g =
      device::make_nccl_groups(store, comm::Layout{}, 0, 0, std::chrono::seconds(30));
  REQUIRE(g.world->size() == 1);
  CHECK(g.dp->name() == "dp[0]");
  auto be = device::make_backend(Device::cuda, {}, 0);
  DeviceVec x(*be, std::vector<float>{1, 2, 3}), y(*be, 3);
  g.world->allreduce(x.get(), 3);
  g.dp->reduce_scatter(x.get(), y.get(), 3);
  CHECK(y.download() == std::vector<float>{1, 2, 3});
  g.tp->allgather(x.get(), y.get(), 3);
  g.pp->broadcast(x.get(), 3, 0);
  g.world->barrier();
  CHECK(y.download() == std::vector<float>{1, 2, 3});
}

TEST_CASE("NCCL between two GPUs: collectives and point-to-point, device and host memory",
          "[gpu][nccl]") {
  const int gpus = device::load_cuda_plugin().device_count();
  if (gpus < 2) {
    WARN("one GPU visible: the two-rank NCCL case needs two (NCCL allows one rank per GPU)");
    return;
  }
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  const comm::Layout layout{.dp = 2, .tp = 1, .pp = 1};
  std::vector<std::string> failures(2);
  auto rank_main = [&](int rank) {
    try {
      comm::ProcessGroups g =
          device::make_nccl_groups(store, layout, rank, rank, std::chrono::seconds(60));
      auto be = device::make_backend(Device::cuda, {}, rank);
      const size_t n = 1 << 20;
      std::vector<float> mine(n, static_cast<float>(rank + 1));
      DeviceVec d(*be, mine);
      g.dp->allreduce(d.get(), n);
      if (d.download() != std::vector<float>(n, 3.0f)) throw std::runtime_error("allreduce device");
      std::vector<float> host(1000, static_cast<float>(rank + 1));
      g.world->allreduce(host.data(), host.size(), comm::ReduceOp::max);
      if (host != std::vector<float>(1000, 2.0f)) throw std::runtime_error("allreduce host max");
      std::vector<float> both(2 * 5);
      for (int i = 0; i < 10; ++i) both[i] = static_cast<float>(i + 10 * rank);
      DeviceVec in(*be, both), out(*be, 5), gathered(*be, 10);
      g.dp->reduce_scatter(in.get(), out.get(), 5);
      const auto rs = out.download();
      for (int i = 0; i < 5; ++i) {
        if (rs[i] != static_cast<float>(2 * (i + 5 * rank) + 10)) {
          throw std::runtime_error("reduce_scatter");
        }
      }
      g.dp->allgather(out.get(), gathered.get(), 5);
      std::vector<float> b(7, static_cast<float>(rank * 5 + 1));
      g.world->broadcast(b.data(), b.size(), 1);
      if (b != std::vector<float>(7, 6.0f)) throw std::runtime_error("broadcast host");
      // Both ranks send to each other at once, then receive: must not deadlock.
      const int peer = 1 - rank;
      DeviceVec msg(*be, std::vector<float>(4096, static_cast<float>(100 + rank)));
      DeviceVec got(*be, 4096);
      auto pending = g.world->isend(msg.get(), 4096 * sizeof(float), peer, 7);
      g.world->recv(got.get(), 4096 * sizeof(float), peer, 7);
      pending->wait();
      if (got.download() != std::vector<float>(4096, static_cast<float>(100 + peer))) {
        throw std::runtime_error("isend/recv device");
      }
      std::vector<float> hsend(10, static_cast<float>(rank)), hrecv(10, -1.0f);
      if (rank == 0) {
        g.world->send(hsend.data(), sizeof(float) * 10, 1, 3);
      } else {
        g.world->recv(hrecv.data(), sizeof(float) * 10, 0, 3);
        if (hrecv != std::vector<float>(10, 0.0f)) throw std::runtime_error("send/recv host");
      }
      g.world->barrier();
    } catch (const std::exception& e) {
      failures[static_cast<size_t>(rank)] = e.what();
    }
  };
  std::thread t0(rank_main, 0), t1(rank_main, 1);
  t0.join();
  t1.join();
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(failures[static_cast<size_t>(r)].empty());
    if (!failures[static_cast<size_t>(r)].empty()) FAIL_CHECK(failures[static_cast<size_t>(r)]);
  }
}
