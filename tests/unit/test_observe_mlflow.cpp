// logging.mlflow (issue 37, item 8): the spec keys and their checks, the spec as MLflow
// params, and the tracker's promise that training never waits on a server that is not
// there. tests/observe/check_mlflow.sh runs against a real `mlflow server`.
#include <sys/socket.h>
#include <unistd.h>

#include <netinet/in.h>
#include <chrono>

#include "config/load.h"
#include "observe/mlflow_client.h"
#include "observe/mlflow_tracker.h"
#include "test_config_helpers.h"

namespace {

using trainctl::config::parse_job_spec;
using trainctl::config::testing::require_error;
using trainctl::config::testing::TempDir;
using namespace std::chrono_literals;

const std::string kBase = "name: tracked\nmodel: {n_layer: 2}\n";

// A TCP port on 127.0.0.1 that refuses connections: bound, never listened on.
class ClosedPort {
 public:
  ClosedPort() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t n = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n);
    port_ = ntohs(a.sin_port);
  }
  ~ClosedPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

}  // namespace

TEST_CASE("logging.mlflow reads its keys, defaults the names to the job's and is dumped",
          "[config][mlflow]") {
  const auto spec = parse_job_spec(
      kBase + "logging: {mlflow: {tracking_uri: \"http://127.0.0.1:5000\"}}\n", "job.yaml", "/tmp");
  CHECK(spec.logging.mlflow.enabled());
  CHECK(spec.logging.mlflow.experiment == "tracked");
  CHECK(spec.logging.mlflow.run_name == "tracked");
  const std::string yaml = trainctl::config::to_yaml(spec);
  CHECK_THAT(yaml, Catch::Contains("  mlflow:\n    tracking_uri: \"http://127.0.0.1:5000\"\n"
                                   "    experiment: \"tracked\"\n    run_name: \"tracked\"\n"));
  CHECK(parse_job_spec(yaml, "resolved.yaml", "/tmp").logging.mlflow == spec.logging.mlflow);
  CHECK_FALSE(parse_job_spec(kBase, "job.yaml", "/tmp").logging.mlflow.enabled());
}

TEST_CASE("logging.mlflow refuses what its REST client cannot use, with file:line",
          "[config][mlflow]") {
  require_error(kBase + "logging:\n  mlflow: {tracking_uri: ./mlruns}\n",
                "job.yaml:4:", "logging.mlflow.tracking_uri",
                {"http:// or https://", "mlflow server"});
  require_error(kBase + "logging:\n  mlflow: {experiment: x}\n", "job.yaml:4:", "logging.mlflow",
                {"needs tracking_uri"});
  require_error(kBase + "logging:\n  mlflow: {tracking_uri: \"http://h:1\", experiments: x}\n",
                "job.yaml:4:", "logging.mlflow.experiments", {"experiment"});
}

TEST_CASE("the resolved spec becomes one MLflow param per leaf", "[observe][mlflow]") {
  const trainctl::observe::KeyValues params = trainctl::observe::spec_params(
      "name: \"j\"\nmodel:\n  n_layer: 2\noptimizer:\n  betas: [0.9, 0.95]\n"
      "logging:\n  mlflow:\n    experiment: \"e\"\n");
  const trainctl::observe::KeyValues want = {{"name", "j"},
                                             {"model.n_layer", "2"},
                                             {"optimizer.betas", "[0.9, 0.95]"},
                                             {"logging.mlflow.experiment", "e"}};
  CHECK(params == want);
}

TEST_CASE("a tracker whose server is not there never holds up logging, warns, and ends soon",
          "[observe][mlflow]") {
  TempDir dir;
  const ClosedPort port;
  trainctl::observe::MlflowSettings s;
  s.tracking_uri = "http://127.0.0.1:" + std::to_string(port.port());
  s.experiment = s.run_name = "t";
  s.retry_every = 200ms;
  s.flush_limit = 500ms;
  const auto begin = std::chrono::steady_clock::now();
  {
    trainctl::observe::MlflowTracker tracker(s, dir.path(), "name: t\n", 1);
    for (int step = 1; step <= 2000; ++step) tracker.log(step, {{"loss", 1.0 / step}});
    const auto logged = std::chrono::steady_clock::now() - begin;
    CHECK(logged < 2s);  // 2000 lines queued, none sent: no network wait in log()
    tracker.finished();
  }
  CHECK(std::chrono::steady_clock::now() - begin < 30s);             // flush_limit plus one request
  CHECK_FALSE(trainctl::observe::read_mlflow_run_file(dir.path()));  // no run was opened
}
