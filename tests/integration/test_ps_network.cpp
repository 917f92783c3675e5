// Parameter-server jobs through the real binary and the network (issue 36): the servers
// listen only on the address the workers use, and `eval` and `selftest` of a
// parameter-server job start no servers, so they end as soon as they printed their result
// (they used to wait runtime.comm_timeout_s, 300 s by default, for workers, then exit 3).
#include <catch2/catch.hpp>
#include <regex>
#include <sstream>

#include "integration/helpers.h"

using namespace trainctl::test;

namespace {

// The job of test_parameter_server.cpp, with the default communication timeout (300 s).
fs::path ps_job(const fs::path& dir) {
  const fs::path file = dir / "job.yaml";
  write_text(file,
             "name: psnet\nseed: 5\n"
             "model: {vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 4, d_model: 32}\n"
             "data: {type: synthetic}\n"
             "parallel: {dp: 2, mode: parameter_server, parameter_server: {servers: 1, "
             "max_staleness: 0}}\n"
             "training: {steps: 12, micro_batch_size: 2, global_batch_size: 8, grad_clip: 0}\n"
             "optimizer: {type: adamw, lr: 1.0e-2, warmup_steps: 2, min_lr: 1.0e-3}\n"
             "checkpoint: {every_steps: 6, async: false}\n"
             "logging: {every_steps: 1, tensorboard: false}\n"
             "runtime: {comm_selftest: false}\n");
  return file;
}

// The local addresses (hex, as /proc/net/tcp{,6} write them) of the sockets listening on
// `port`.
std::vector<std::string> listening_addresses(int port) {
  std::vector<std::string> found;
  char want[8];
  std::snprintf(want, sizeof(want), "%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream in(read_text(table));
    std::string line;
    std::getline(in, line);  // the column names
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const size_t colon = local.rfind(':');
      if (state == "0A" && colon != std::string::npos && local.substr(colon + 1) == want) {
        found.push_back(local.substr(0, colon));
      }
    }
  }
  return found;
}

}  // namespace

TEST_CASE("parameter servers listen on the workers' address only", "[ps][security]") {
  TempDir dir("ps-net");
  const fs::path spec = ps_job(dir.path());
  Proc p({"train", spec.string(), "--set", "run_dir=run"}, dir.path(),
         {{"TRAINCTL_TEST_SLOWDOWN", "1:3"}});
  const fs::path log = dir / "run" / "logs" / "server0.log";
  std::smatch m;
  const std::regex listening("listening on 127\\.0\\.0\\.1:(\\d+)");
  std::string text;
  REQUIRE(eventually(
      [&] {
        text = read_text(log);
        return std::regex_search(text, m, listening);
      },
      std::chrono::seconds(60)));
  // One node: loopback only (it was 0.0.0.0, every interface).
  const std::vector<std::string> addresses = listening_addresses(std::stoi(m[1]));
  CHECK(addresses == std::vector<std::string>{"0100007F"});
  const ProcResult r = p.wait(std::chrono::seconds(180));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
}

TEST_CASE("eval and selftest of a parameter-server job end promptly after their result",
          "[ps][eval]") {
  TempDir dir("ps-eval");
  const fs::path spec = ps_job(dir.path());
  const ProcResult t = run_trainctl({"train", spec.string(), "--set", "run_dir=run"}, dir.path(),
                                    std::chrono::seconds(180));
  INFO(t.out << t.err);
  REQUIRE(t.exit_code == 0);

  // Far below comm_timeout_s (300 s), which they used to wait out before exiting 3.
  const ProcResult eval = run_trainctl({"eval", spec.string(), "--set", "run_dir=run", "--from",
                                        (dir / "run" / "checkpoints" / "step_00000006").string()},
                                       dir.path(), std::chrono::seconds(60));
  INFO(eval.out << eval.err);
  CHECK_FALSE(eval.timed_out);
  CHECK(eval.exit_code == 0);
  CHECK_THAT(eval.out, Catch::Contains("eval step 6: val_loss"));
  CHECK_FALSE(fs::exists(dir / "run" / "eval" / "logs" / "server0.log"));

  const ProcResult selftest =
      run_trainctl({"selftest", spec.string(), "--set", "run_dir=st", "--quick"}, dir.path(),
                   std::chrono::seconds(60));
  INFO(selftest.out << selftest.err);
  CHECK_FALSE(selftest.timed_out);
  CHECK(selftest.exit_code == 0);
  CHECK_THAT(selftest.out, Catch::Contains("selftest passed: 2 ranks"));
  CHECK(processes_mentioning(dir.path().string()).empty());
}
