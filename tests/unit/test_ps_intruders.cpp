// Parameter servers against strangers (issue 36): connections that do not prove they hold
// the job token, that claim a worker's index, or that just sit idle are dropped while the
// server keeps accepting, and the job's own workers still train to the exact result of one
// optimizer on the mean gradient. In one process over 127.0.0.1, like test_ps_loopback.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model/parameters.h"
#include "ops/backend.h"
#include "optim/optimizer.h"
#include "ps/ps_client.h"
#include "ps/ps_server.h"
#include "ps/ps_wire.h"
#include "ps/shard_plan.h"

using namespace trainctl;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kTimeout = std::chrono::seconds(10);  // a broken test fails, it never hangs
const std::string kToken = "0123456789abcdef0123456789abcdef";

model::ParamSpec spec(std::string name, Shape shape) {
  model::ParamSpec s;
  s.name = std::move(name);
  s.shard.global_shape = std::move(shape);
  s.init = model::Init::normal;
  s.init_std = 0.2f;
  s.weight_decay = true;
  return s;
}

ps::ServerConfig server_config() {
  ps::ServerConfig c;
  c.servers = 1;
  c.workers = 2;
  c.params = {spec("a.weight", {5, 7}), spec("b.weight", {3, 20})};
  c.optimizer.type = "adamw";
  c.optimizer.weight_decay = 0.1;
  c.schedule = {1e-2, 1e-3, 2, 5, "cosine"};
  c.total_steps = 3;
  c.connect_timeout = kTimeout;
  c.group_window = 0.0;
  c.token = kToken;
  return c;
}

ps::ClientOptions client_options(std::string token = kToken) {
  ps::ClientOptions o;
  o.connect_timeout = kTimeout;
  o.timeout = kTimeout;
  o.token = std::move(token);
  return o;
}

std::vector<float> gradient(const model::ParameterSet& set, int w, int t) {
  std::vector<float> g(static_cast<size_t>(set.total()), 0.0f);
  for (const model::Param& p : set.list()) {
    for (int64_t k = 0; k < p.numel; ++k) {
      g[static_cast<size_t>(p.offset + k)] =
          static_cast<float>(0.05 * std::sin(0.37 * static_cast<double>(k) + 1.3 * w + 0.71 * t));
    }
  }
  return g;
}

// One server serving on its thread, and the model on one rank stepping alongside (the
// result the job must reach).
struct Job {
  ps::ServerConfig config = server_config();
  std::unique_ptr<ops::Backend> backend = ops::make_cpu_backend({.threads = 1});
  model::ParameterSet ref{*backend};
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<ps::PsServer> server;
  std::thread thread;
  std::string server_error;
  std::string address;

  explicit Job(std::chrono::milliseconds handshake_timeout = std::chrono::seconds(10)) {
    for (const model::ParamSpec& s : config.params) ref.declare(s);
    ref.allocate();
    ref.initialize(42);
    optimizer = optim::make_optimizer(config.optimizer, ref, *backend);
    config.handshake_timeout = handshake_timeout;
    server = std::make_unique<ps::PsServer>(config);
    address = "127.0.0.1:" + std::to_string(server->port());
    thread = std::thread([this] {
      try {
        server->serve();
      } catch (const std::exception& e) {
        server_error = e.what();
      }
    });
  }
  ~Job() {
    if (thread.joinable()) thread.join();
  }

  std::unique_ptr<ps::PsClient> connect(int w) {
    return std::make_unique<ps::PsClient>(std::vector<std::string>{address}, w,
                                          ps::plan_shards(config.params, 1), client_options());
  }

  // Both workers train config.total_steps steps (K = 0); returns the parameters each
  // ended with. Clients not given are connected here.
  std::vector<std::vector<float>> train(std::unique_ptr<ps::PsClient> c0 = nullptr,
                                        std::unique_ptr<ps::PsClient> c1 = nullptr) {
    std::vector<std::unique_ptr<ps::PsClient>> clients;
    clients.push_back(c0 ? std::move(c0) : connect(0));
    clients.push_back(c1 ? std::move(c1) : connect(1));
    std::vector<std::vector<float>> params(2, std::vector<float>(static_cast<size_t>(ref.total())));
    clients[0]->seed(ref.data(), optimizer->save_state(), 0);
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w) {
      threads.emplace_back([&, w] {
        try {
          auto& c = *clients[static_cast<size_t>(w)];
          auto& p = params[static_cast<size_t>(w)];
          c.pull(p.data());
          for (int t = 1; t <= config.total_steps; ++t) {
            c.push(gradient(ref, w, t).data(), {t - 1, 1.0, 1, false}, p.data());
          }
          c.goodbye();
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(w)] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const std::string& e : errors) REQUIRE(e.empty());
    clients.clear();
    thread.join();
    REQUIRE(server_error.empty());
    return params;
  }

  // The reference: one update per step on the mean of both workers' gradients.
  void check(const std::vector<std::vector<float>>& params) {
    for (int t = 1; t <= config.total_steps; ++t) {
      ref.zero_grads();
      const auto g0 = gradient(ref, 0, t), g1 = gradient(ref, 1, t);
      for (size_t k = 0; k < g0.size(); ++k) ref.grads()[k] = (g0[k] + g1[k]) * 0.5f;
      optimizer->step(config.schedule.at(t - 1));
    }
    for (const auto& p : params) {
      for (const model::Param& q : ref.list()) {
        for (int64_t k = 0; k < q.numel; ++k) {
          REQUIRE(p[static_cast<size_t>(q.offset + k)] == ref.data()[q.offset + k]);
        }
      }
    }
  }
};

// A plain TCP connection to the server, as any process on the node can open.
int raw_connect(const ps::PsServer& server) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(server.port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  return fd;
}

// A hello as the unauthenticated protocol had it: a worker index and nothing else.
void send_bare_hello(int fd, int64_t worker) {
  const int64_t i[4] = {worker, 0, 0, 0};
  const std::vector<char> h = ps::wire::encode_head(ps::wire::MsgType::hello, i, 0.0, {}, "", 0);
  REQUIRE(::send(fd, h.data(), h.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(h.size()));
}

// True when the server closes `fd` within `limit` (whatever it sent before, a challenge,
// is read and ignored).
bool closed_by_server(int fd, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  char buf[256];
  while (Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("parameter servers drop a hello without a proof of the job token, the job completes",
          "[ps][security]") {
  Job job;
  // Before any worker: the unauthenticated hello of another process claiming worker 0
  // (it took worker 0's slot, and the real worker 0 then failed the job).
  const int forged = raw_connect(*job.server);
  send_bare_hello(forged, 0);
  CHECK(closed_by_server(forged, kTimeout));
  ::close(forged);
  job.check(job.train());
}

TEST_CASE("parameter servers refuse a worker index claimed with the wrong token, the job completes",
          "[ps][security]") {
  Job job;
  // A real worker index and a well-formed handshake, but another job's token.
  CHECK_THROWS_WITH(ps::PsClient({job.address}, 1, ps::plan_shards(job.config.params, 1),
                                 client_options("another job's token")),
                    Catch::Contains("the same job token"));
  job.check(job.train());
}

TEST_CASE("parameter servers drop a second connection for a connected worker, the job completes",
          "[ps][security]") {
  Job job;
  auto w0 = job.connect(0);
  // Even with the right token: worker 0's slot is taken, and stays with the first.
  CHECK_THROWS_AS(job.connect(0), ps::ClientError);
  job.check(job.train(std::move(w0)));
}

TEST_CASE("idle connections do not hold up the workers, and are closed after the handshake timeout",
          "[ps][security]") {
  const auto handshake = std::chrono::milliseconds(3000);
  Job job(handshake);
  std::vector<int> idle;
  for (int k = 0; k < 8; ++k) idle.push_back(raw_connect(*job.server));
  // One by one they held the accept loop 10 s each: the workers never got in.
  const auto start = Clock::now();
  auto w0 = job.connect(0);
  auto w1 = job.connect(1);
  CHECK(Clock::now() - start < handshake);
  job.check(job.train(std::move(w0), std::move(w1)));
  for (int fd : idle) {
    CHECK(closed_by_server(fd, kTimeout));
    ::close(fd);
  }
}
