// Expert parallelism's token exchange (model/moe/expert_dispatch.h) between real Gloo
// ranks: rows reach the rank holding their expert, grouped by local expert in source-rank
// order, and combine() brings each row back to where it came from.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "comm/gloo/gloo_communicator.h"
#include "model/moe/expert_dispatch.h"
#include "test_comm_support.h"

namespace comm = trainctl::comm;
using trainctl::model::moe::DispatchPlan;
using trainctl::model::moe::ExpertDispatch;

namespace {
// Rows of global expert e on rank r: some experts get none from some ranks.
int rows_of(int rank, int expert) { return (3 * rank + 2 * expert + 1) % 4; }
// Row values: (source rank, expert, row within that expert's rows, column) in one float.
float value(int rank, int expert, int row, int col) {
  return static_cast<float>(rank * 10000 + expert * 1000 + row * 10 + col);
}
}  // namespace

TEST_CASE("expert dispatch sends rows to their expert's rank and combine brings them back",
          "[moe][ep]") {
  for (const int p : {2, 3}) {
    DYNAMIC_SECTION(p << " ranks") {
      const int E = 2 * p, El = 2, width = 3;
      gloo::rendezvous::HashStore store;
      std::vector<std::string> wrong(static_cast<size_t>(p));  // per rank: what differed
      comm::testing::run_ranks(p, [&](int rank) {
        comm::GlooCommunicator ep(comm::testing::connect_world(store, rank, p), "ep[0]");
        ExpertDispatch dispatch(ep, E);
        std::vector<int> offsets(static_cast<size_t>(E) + 1, 0);
        std::vector<float> local;
        for (int e = 0; e < E; ++e) {
          offsets[static_cast<size_t>(e) + 1] = offsets[static_cast<size_t>(e)] + rows_of(rank, e);
          for (int i = 0; i < rows_of(rank, e); ++i) {
            for (int c = 0; c < width; ++c) local.push_back(value(rank, e, i, c));
          }
        }
        DispatchPlan plan;
        dispatch.make_plan(offsets.data(), plan);
        // What this rank's experts must receive: expert-major, then source rank, then row.
        std::vector<float> want;
        std::vector<int> want_offsets = {0};
        for (int j = 0; j < El; ++j) {
          const int e = rank * El + j;
          for (int s = 0; s < p; ++s) {
            for (int i = 0; i < rows_of(s, e); ++i) {
              for (int c = 0; c < width; ++c) want.push_back(value(s, e, i, c));
            }
          }
          want_offsets.push_back(static_cast<int>(want.size()) / width);
        }
        std::string& bad = wrong[static_cast<size_t>(rank)];
        if (plan.local_offsets != want_offsets) bad += "local offsets; ";
        std::vector<float> experts(want.size() + 1), scratch(want.size() + 1);
        dispatch.dispatch(plan, local.data(), experts.data(), scratch.data(), width);
        experts.resize(want.size());
        if (experts != want) bad += "dispatched rows; ";
        std::vector<float> back(local.size() + 1, -1.0f);
        dispatch.combine(plan, experts.data(), back.data(), scratch.data(), width);
        back.resize(local.size());
        if (back != local) bad += "combined rows; ";
        ep.barrier();
      });
      for (int r = 0; r < p; ++r) {
        INFO("rank " << r);
        CHECK(wrong[static_cast<size_t>(r)].empty());
      }
    }
  }
}
