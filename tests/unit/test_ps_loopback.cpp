// Parameter servers and their workers in one process, over 127.0.0.1: servers on threads,
// each worker's client on its own thread, checked against one optimizer stepping on the
// whole model.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model/parameters.h"
#include "ops/backend.h"
#include "optim/optimizer.h"
#include "ps/ps_client.h"
#include "ps/ps_server.h"
#include "ps/shard_plan.h"

using namespace trainctl;
using model::Init;
using model::ParamSpec;
using ps::PsClient;
using ps::PsServer;
using ps::PushInfo;
using ps::PushReply;

namespace {

constexpr auto kTimeout = std::chrono::seconds(10);  // a broken test fails, it never hangs

ParamSpec spec(std::string name, Shape shape, Init init, bool weight_decay) {
  ParamSpec s;
  s.name = std::move(name);
  s.shard.global_shape = std::move(shape);
  s.init = init;
  s.init_std = 0.2f;
  s.weight_decay = weight_decay;
  return s;
}

// Sizes that are not multiples of 16 (padding between parameters), decay on some.
std::vector<ParamSpec> test_specs() {
  return {spec("a.weight", {5, 7}, Init::normal, true), spec("a.bias", {7}, Init::normal, false),
          spec("b.weight", {3, 20}, Init::normal, true), spec("c.scale", {33}, Init::ones, false),
          spec("d.weight", {4, 4}, Init::normal, true)};
}

optim::LrSchedule test_schedule() { return {1e-2, 1e-3, 2, 5, "cosine"}; }

ps::ServerConfig base_config(int servers, int workers, int K) {
  ps::ServerConfig c;
  c.servers = servers;
  c.workers = workers;
  c.max_staleness = K;
  c.params = test_specs();
  c.optimizer.type = "adamw";
  c.optimizer.weight_decay = 0.1;
  c.schedule = test_schedule();
  c.total_steps = 1000;
  c.bind_addr = "127.0.0.1";
  c.connect_timeout = kTimeout;
  // The staleness rule alone decides, so what is applied when does not depend on timing
  // (the grouping window has its own test below).
  c.group_window = 0.0;
  return c;
}

ps::ClientOptions client_options() { return {kTimeout, kTimeout}; }

// The model on one rank: the reference the servers must reproduce.
struct Whole {
  std::unique_ptr<ops::Backend> backend = ops::make_cpu_backend({.threads = 1});
  model::ParameterSet set{*backend};
  std::unique_ptr<optim::Optimizer> optimizer;
  explicit Whole(const ps::ServerConfig& c) {
    for (const ParamSpec& s : c.params) set.declare(s);
    set.allocate();
    set.initialize(42);
    optimizer = optim::make_optimizer(c.optimizer, set, *backend);
  }
  // One update on the mean of `grads`, added in order then scaled, as a server does.
  void step(const std::vector<std::vector<float>>& grads, double lr) {
    set.zero_grads();
    float* g = set.grads();
    for (const auto& gw : grads) {
      for (size_t k = 0; k < gw.size(); ++k) g[k] += gw[k];
    }
    if (grads.size() > 1) {
      const float inv = 1.0f / static_cast<float>(grads.size());
      for (int64_t k = 0; k < set.total(); ++k) g[k] *= inv;
    }
    optimizer->step(lr);
  }
};

// Worker w's gradient of its step t, over the whole flat layout (zeros in the padding).
std::vector<float> gradient(const model::ParameterSet& set, int w, int t) {
  std::vector<float> g(static_cast<size_t>(set.total()), 0.0f);
  for (const model::Param& p : set.list()) {
    for (int64_t k = 0; k < p.numel; ++k) {
      g[static_cast<size_t>(p.offset + k)] = static_cast<float>(
          0.05 * std::sin(0.37 * static_cast<double>(k) + 1.3 * w + 0.71 * t) + 0.01 * w);
    }
  }
  return g;
}

// Parameter by parameter (the padding is nobody's), bitwise.
int64_t mismatches(const model::ParameterSet& set, const float* a, const float* b) {
  int64_t bad = 0;
  for (const model::Param& p : set.list()) {
    for (int64_t k = 0; k < p.numel; ++k) {
      if (a[p.offset + k] != b[p.offset + k]) ++bad;
    }
  }
  return bad;
}

// Servers serving on their own threads; serve()'s exception, if any, kept per server.
struct Servers {
  std::vector<std::unique_ptr<PsServer>> servers;
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors;
  std::vector<std::string> addresses;

  explicit Servers(ps::ServerConfig c) {
    for (int s = 0; s < c.servers; ++s) {
      c.index = s;
      servers.push_back(std::make_unique<PsServer>(c));
      addresses.push_back("127.0.0.1:" + std::to_string(servers.back()->port()));
    }
    errors.resize(servers.size());
    for (size_t s = 0; s < servers.size(); ++s) {
      threads.emplace_back([this, s] {
        try {
          servers[s]->serve();
        } catch (...) {
          errors[s] = std::current_exception();
        }
      });
    }
  }
  void join() {
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }
  ~Servers() { join(); }
  std::string error(size_t s) const {
    if (!errors[s]) return "";
    try {
      std::rethrow_exception(errors[s]);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
};

void wait_received(const Servers& servers, int64_t n) {
  const auto until = std::chrono::steady_clock::now() + kTimeout;
  for (const auto& s : servers.servers) {
    while (s->gradients_received() < n && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(s->gradients_received() == n);
  }
}

}  // namespace

TEST_CASE(
    "parameter servers, K=0: the same parameters and state as one optimizer on the "
    "mean gradient, and done, checkpoint and stop steering",
    "[ps]") {
  for (int S : {1, 2}) {
    INFO("servers: " << S);
    constexpr int W = 2, kSteps = 3;
    ps::ServerConfig config = base_config(S, W, 0);
    config.threads = S;      // the update is elementwise: threads change nothing
    config.total_steps = 4;  // seeded at global step 1: done after 3 more
    config.checkpoint_every = 2;
    Whole ref(config);
    // One update before seeding, so the seed carries a state that is not all zeros.
    ref.step({gradient(ref.set, 7, -1)}, config.schedule.at(0));
    const std::vector<float> seed_params(ref.set.data(), ref.set.data() + ref.set.total());
    const optim::OptimizerState seed_state = ref.optimizer->save_state();
    const auto plan = ps::plan_shards(config.params, S);

    Servers servers(config);
    std::vector<std::vector<PushReply>> replies(W);
    std::vector<std::vector<float>> finals(W);
    optim::OptimizerState fetched;
    std::vector<float> fetched_params(static_cast<size_t>(ref.set.total()), 0.0f);
    std::vector<int64_t> pulled(W, -1);
    std::vector<std::string> worker_errors(W);
    std::vector<std::thread> workers;
    for (int w = 0; w < W; ++w) {
      workers.emplace_back([&, w] {
        try {
          PsClient client(servers.addresses, w, plan, client_options());
          std::vector<float> params(static_cast<size_t>(ref.set.total()), 0.0f);
          if (w == 0) client.seed(seed_params.data(), seed_state, 1);
          pulled[static_cast<size_t>(w)] = client.pull(params.data());
          if (mismatches(ref.set, params.data(), seed_params.data()) != 0) {
            throw std::runtime_error("pulled parameters differ from the seed");
          }
          for (int t = 1; t <= kSteps; ++t) {
            const std::vector<float> g = gradient(ref.set, w, t);
            PushInfo info;
            info.local_step = t - 1;
            info.loss_sum = 1.5 * (w + 1) + t;
            info.loss_count = 10;
            info.stop_request = w == 1 && t == 2;
            replies[static_cast<size_t>(w)].push_back(client.push(g.data(), info, params.data()));
          }
          finals[static_cast<size_t>(w)] = params;
          if (w == 0) fetched = client.fetch_state(fetched_params.data(), ref.set.total());
          client.goodbye();
        } catch (const std::exception& e) {
          worker_errors[static_cast<size_t>(w)] = e.what();
        }
      });
    }
    for (auto& t : workers) t.join();
    servers.join();
    for (int w = 0; w < W; ++w) REQUIRE(worker_errors[static_cast<size_t>(w)].empty());
    for (int s = 0; s < S; ++s) REQUIRE(servers.error(static_cast<size_t>(s)).empty());

    for (int t = 1; t <= kSteps; ++t) {
      ref.step({gradient(ref.set, 0, t), gradient(ref.set, 1, t)}, config.schedule.at(t));
    }
    for (int w = 0; w < W; ++w) {
      CHECK(pulled[static_cast<size_t>(w)] == 1);
      CHECK(mismatches(ref.set, finals[static_cast<size_t>(w)].data(), ref.set.data()) == 0);
    }
    CHECK(mismatches(ref.set, fetched_params.data(), ref.set.data()) == 0);
    const optim::OptimizerState want = ref.optimizer->save_state();
    CHECK(fetched.step == want.step);
    CHECK(fetched.step == 1 + kSteps);
    REQUIRE(fetched.names == want.names);
    for (size_t b = 0; b < want.buffers.size(); ++b) {
      REQUIRE(fetched.buffers[b].size() == want.buffers[b].size());
      CHECK(mismatches(ref.set, fetched.buffers[b].data(), want.buffers[b].data()) == 0);
    }

    int64_t shard_floats = 0;
    for (const auto& shard : plan) shard_floats += shard.floats();
    for (int w = 0; w < W; ++w) {
      const auto& r = replies[static_cast<size_t>(w)];
      REQUIRE(r.size() == kSteps);
      for (int t = 1; t <= kSteps; ++t) {
        const PushReply& x = r[static_cast<size_t>(t - 1)];
        INFO("worker " << w << ", step " << t);
        CHECK(x.global_step == 1 + t);
        CHECK(x.version == 1 + t);
        // Received reaches 4 = checkpoint_every x W after step 1, 8 = total_steps x W after
        // step 3 (done, and no checkpoint then).
        CHECK(x.checkpoint == (t == 1));
        CHECK(x.done == (t == kSteps));
        CHECK(x.stop == (t >= 2));  // worker 1 asked at step 2; sticky
        // Each reply: both gradients of the step, staleness 0.
        CHECK(x.gradients == 2);
        CHECK(x.staleness == std::vector<int64_t>{2});
        CHECK(x.loss_count == 20);
        CHECK(x.loss_sum == Approx(1.5 + t + 3.0 + t));
        CHECK(x.bytes_sent == 4 * shard_floats);
        CHECK(x.bytes_received == 4 * shard_floats);
      }
    }
    CHECK(servers.servers[0]->updates() == kSteps);
    CHECK(servers.servers[0]->max_staleness_seen() == 0);
  }
}

TEST_CASE(
    "parameter servers, K=1: a fast worker's gradient is applied alone, the slow "
    "one's with staleness 1",
    "[ps]") {
  constexpr int W = 2, S = 2;
  ps::ServerConfig config = base_config(S, W, 1);
  Whole ref(config);
  const auto plan = ps::plan_shards(config.params, S);
  Servers servers(config);
  const auto total = static_cast<size_t>(ref.set.total());

  auto fast = std::make_unique<PsClient>(servers.addresses, 0, plan, client_options());
  auto slow = std::make_unique<PsClient>(servers.addresses, 1, plan, client_options());
  std::vector<float> fast_params(total), slow_params(total);
  fast->seed(ref.set.data(), ref.optimizer->save_state(), 0);
  CHECK(slow->pull(slow_params.data()) == 0);  // version 0
  CHECK(fast->pull(fast_params.data()) == 0);

  const auto g_fast1 = gradient(ref.set, 0, 1), g_fast2 = gradient(ref.set, 0, 2);
  const auto g_slow = gradient(ref.set, 1, 1);
  std::vector<PushReply> fast_replies;
  std::string fast_error;
  std::thread fast_thread([&] {
    try {
      fast_replies.push_back(fast->push(g_fast1.data(), {0, 1.0, 1, false}, fast_params.data()));
      fast_replies.push_back(fast->push(g_fast2.data(), {1, 2.0, 1, false}, fast_params.data()));
    } catch (const std::exception& e) {
      fast_error = e.what();
    }
  });
  // The fast worker's second gradient is in (and held: applying it would leave the slow
  // worker, on version 0, two updates behind); only now does the slow one push.
  wait_received(servers, 2);
  const PushReply slow_reply = slow->push(g_slow.data(), {0, 4.0, 1, false}, slow_params.data());
  fast_thread.join();
  REQUIRE(fast_error.empty());
  fast->goodbye();
  slow->goodbye();
  // The servers end when the workers' connections close after their goodbyes.
  fast.reset();
  slow.reset();
  servers.join();
  for (int s = 0; s < S; ++s) REQUIRE(servers.error(static_cast<size_t>(s)).empty());

  // Update 1: the fast gradient alone, at half the rate (one of W = 2 parts of a global
  // batch); update 2: the fast and the slow together. Both at global step 0 (fewer than W
  // gradients applied before each).
  ref.step({g_fast1}, config.schedule.at(0) * 0.5);
  ref.step({g_fast2, g_slow}, config.schedule.at(0));
  CHECK(mismatches(ref.set, fast_params.data(), ref.set.data()) == 0);
  CHECK(mismatches(ref.set, slow_params.data(), ref.set.data()) == 0);

  REQUIRE(fast_replies.size() == 2);
  CHECK(fast_replies[0].version == 1);
  CHECK(fast_replies[0].gradients == 1);
  CHECK(fast_replies[0].staleness == std::vector<int64_t>{1, 0});
  CHECK(fast_replies[0].loss_sum == 1.0);
  CHECK(fast_replies[1].version == 2);
  CHECK(fast_replies[1].global_step == 1);
  CHECK(fast_replies[1].gradients == 2);
  CHECK(fast_replies[1].staleness == std::vector<int64_t>{1, 1});
  CHECK(fast_replies[1].loss_sum == 6.0);
  // The slow worker hears of all three gradients since it pulled: the slow one stale by 1.
  CHECK(slow_reply.version == 2);
  CHECK(slow_reply.gradients == 3);
  CHECK(slow_reply.staleness == std::vector<int64_t>{2, 1});
  CHECK(slow_reply.loss_sum == 7.0);
  CHECK(slow_reply.loss_count == 3);
  CHECK(servers.servers[0]->updates() == 2);
  CHECK(servers.servers[1]->updates() == 2);
  CHECK(servers.servers[0]->max_staleness_seen() == 1);
}

TEST_CASE("parameter servers: a worker that disconnects without goodbye fails serve()", "[ps]") {
  ps::ServerConfig config = base_config(1, 2, 0);
  Whole ref(config);
  const auto plan = ps::plan_shards(config.params, 1);
  Servers servers(config);
  const auto total = static_cast<size_t>(ref.set.total());
  auto w0 = std::make_unique<PsClient>(servers.addresses, 0, plan, client_options());
  auto w1 = std::make_unique<PsClient>(servers.addresses, 1, plan, client_options());
  std::vector<float> params(total);
  w0->seed(ref.set.data(), ref.optimizer->save_state(), 0);
  w0->pull(params.data());
  w1->pull(params.data());
  w1.reset();  // worker 1 dies
  servers.join();
  const std::string error = servers.error(0);
  CHECK_THAT(error, Catch::Contains("worker 1 closed its connection without saying goodbye"));
  // The surviving worker learns it from its next push instead of hanging.
  const auto g = gradient(ref.set, 0, 1);
  CHECK_THROWS_AS(w0->push(g.data(), {}, params.data()), ps::ClientError);
}

TEST_CASE("parameter servers: a worker that planned another layout is refused at hello", "[ps]") {
  ps::ServerConfig config = base_config(1, 1, 0);
  Servers servers(config);
  auto plan = ps::plan_shards(config.params, 1);
  plan[0].end += 16;
  CHECK_THROWS_WITH(PsClient(servers.addresses, 0, plan, client_options()),
                    Catch::Contains("do the model or the server count differ"));
  servers.join();  // the refused worker hung up: the server stops too
  CHECK_THAT(servers.error(0), Catch::Contains("worker 0 closed its connection"));
}

TEST_CASE("parameter servers: a reply that does not come within the timeout fails the push",
          "[ps]") {
  ps::ServerConfig config = base_config(1, 2, 0);
  Whole ref(config);
  const auto plan = ps::plan_shards(config.params, 1);
  Servers servers(config);
  ps::ClientOptions impatient = client_options();
  impatient.timeout = std::chrono::milliseconds(200);
  auto w0 = std::make_unique<PsClient>(servers.addresses, 0, plan, impatient);
  PsClient w1(servers.addresses, 1, plan, client_options());
  std::vector<float> params(static_cast<size_t>(ref.set.total()));
  w0->seed(ref.set.data(), ref.optimizer->save_state(), 0);
  w0->pull(params.data());
  w1.pull(params.data());
  // K = 0: worker 0's gradient waits for worker 1's, which never comes.
  const auto g = gradient(ref.set, 0, 1);
  CHECK_THROWS_WITH(w0->push(g.data(), {}, params.data()), Catch::Contains("timed out"));
  w0.reset();
  w1.goodbye();  // releases worker 0's update; its reply finds nobody listening
  servers.join();
  CHECK_THAT(servers.error(0), Catch::Contains("worker 0 closed its connection"));
}

TEST_CASE(
    "parameter servers, K=2: equal workers share one update, a worker that stalls is waited "
    "for one step at most",
    "[ps]") {
  constexpr int W = 2, S = 1;
  ps::ServerConfig config = base_config(S, W, 2);
  config.group_window = 1.0;
  const auto plan = ps::plan_shards(config.params, S);
  Servers servers(config);
  Whole ref(config);
  const auto total = static_cast<size_t>(ref.set.total());
  std::vector<std::unique_ptr<PsClient>> clients;
  std::vector<std::vector<float>> params(W, std::vector<float>(total));
  for (int w = 0; w < W; ++w) {
    clients.push_back(std::make_unique<PsClient>(servers.addresses, w, plan, client_options()));
  }
  clients[0]->seed(ref.set.data(), ref.optimizer->save_state(), 0);
  CHECK(clients[1]->pull(params[1].data()) == 0);
  CHECK(clients[0]->pull(params[0].data()) == 0);

  // Both "compute" 300 ms a step; worker 1 pushes 100 ms after worker 0, a third of a
  // step: every update holds both gradients, none stale. Then worker 1 takes 3 s for one
  // step: worker 0's gradient waits for it one step (300 ms), then goes alone.
  constexpr int kSteps = 3;
  const auto compute = std::chrono::milliseconds(300);
  std::vector<std::vector<PushReply>> replies(W);
  std::vector<std::string> errors(W);
  std::vector<std::thread> threads;
  for (int w = 0; w < W; ++w) {
    threads.emplace_back([&, w] {
      try {
        for (int t = 1; t <= kSteps + 1; ++t) {
          const bool slow_step = w == 1 && t == kSteps + 1;
          std::this_thread::sleep_for(slow_step ? 10 * compute
                                                : compute + std::chrono::milliseconds(100 * w));
          const auto g = gradient(ref.set, w, t);
          replies[static_cast<size_t>(w)].push_back(clients[static_cast<size_t>(w)]->push(
              g.data(), {t - 1, 1.0, 1, false}, params[static_cast<size_t>(w)].data()));
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(w)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < W; ++w) REQUIRE(errors[static_cast<size_t>(w)].empty());
  for (auto& c : clients) c->goodbye();
  clients.clear();
  servers.join();
  REQUIRE(servers.error(0).empty());

  REQUIRE(replies[0].size() == kSteps + 1);
  for (int t = 1; t <= kSteps; ++t) {
    INFO("step " << t);
    CHECK(replies[0][static_cast<size_t>(t - 1)].version == t);  // one update per step
    CHECK(replies[0][static_cast<size_t>(t - 1)].gradients == 2);
  }
  // Worker 0's last gradient went alone (worker 1 was 2.7 s away) and was not stale.
  CHECK(replies[0][kSteps].version == kSteps + 1);
  CHECK(replies[0][kSteps].gradients == 1);
  CHECK(replies[0][kSteps].staleness == std::vector<int64_t>{1, 0, 0});
  // Since its previous reply: worker 0's lone update, then its own, one update late.
  CHECK(replies[1][kSteps].staleness == std::vector<int64_t>{1, 1, 0});
  CHECK(servers.servers[0]->max_staleness_seen() == 1);
}
