// The command line as a user meets it: help, version, validate, bench, and the exit code
// and message of bad invocations.
#include <catch2/catch.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;
using namespace std::chrono_literals;

TEST_CASE("trainctl --version prints the version and build", "[cli][integration]") {
  TempDir dir("cli");
  ProcResult r = run_trainctl({"--version"}, dir.path());
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith(std::string("trainctl ") + TRAINCTL_VERSION));
  CHECK_THAT(r.out, Catch::Contains("build:"));
}

TEST_CASE("every subcommand has help with an example", "[cli][integration]") {
  TempDir dir("cli");
  for (std::vector<std::string> cmd : {std::vector<std::string>{"train"},
                                       {"selftest"},
                                       {"validate"},
                                       {"plan"},
                                       {"inspect", "step"},
                                       {"bench", "comm"}}) {
    cmd.push_back("--help");
    ProcResult r = run_trainctl(cmd, dir.path());
    INFO(cmd[0]);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("Example:"));
  }
  ProcResult top = run_trainctl({"--help"}, dir.path());
  CHECK(top.exit_code == 0);
  CHECK_THAT(top.out, Catch::Contains("Exit codes"));
  CHECK_THAT(top.out, !Catch::Contains("\n  worker"));  // internal subcommand stays hidden
  CHECK_THAT(top.out, !Catch::Contains("--resume"));
}

TEST_CASE("validate prints the summary and the rank map without starting anything",
          "[cli][integration]") {
  TempDir dir("validate");
  fs::path job = write_job(dir.path(), "val", 2, 2, 2);
  ProcResult r = run_trainctl({"validate", job.string(), "--nnodes", "2"}, dir.path());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("rank map (2 node(s), 4 worker(s) per node)"));
  CHECK_THAT(r.out, Catch::Contains(" rank  node  local   dp   tp   pp\n"));
  CHECK_THAT(r.out, Catch::Contains("    5     1      1    0    1    1\n"));
  CHECK_THAT(r.out, Catch::Contains("comm:       Gloo over TCP; allreduce, reduce-scatter and "
                                    "allgather through shared memory between workers on one node, "
                                    "gradients in fp32\n"));
  CHECK_FALSE(fs::exists(dir / "runs"));  // nothing launched, no run directory
}

TEST_CASE("validate takes the node count from Slurm's environment", "[cli][integration]") {
  TempDir dir("slurm");
  fs::path job = write_job(dir.path(), "slurm", 4, 1, 1);
  Proc p({"validate", job.string()}, dir.path(),
         {{"SLURM_JOB_NODELIST", "node[07-08]"},
          {"SLURM_NNODES", "2"},
          {"SLURM_NODEID", "1"},
          {"SLURM_JOB_ID", "4242"}});
  ProcResult r = p.wait(30s);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("rank map (2 node(s), 2 worker(s) per node)"));
  CHECK_THAT(r.out, Catch::Contains("    3     1      1    3    0    0\n"));
}

TEST_CASE("bad invocations exit with code 2 and say what is wrong", "[cli][integration]") {
  TempDir dir("badcli");
  fs::path job = write_job(dir.path(), "bad", 2, 1, 1);

  ProcResult missing = run_trainctl({"train", "no-such-job.yaml"}, dir.path());
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("error:") && Catch::Contains("no-such-job.yaml"));

  ProcResult bad_set =
      run_trainctl({"selftest", job.string(), "--set", "parallel.tp=abc"}, dir.path());
  CHECK(bad_set.exit_code == 2);
  CHECK_THAT(bad_set.err, Catch::Contains("parallel.tp"));

  ProcResult unknown_key =
      run_trainctl({"validate", job.string(), "--set", "parallel.tq=2"}, dir.path());
  CHECK(unknown_key.exit_code == 2);
  CHECK_THAT(unknown_key.err, Catch::Contains("parallel.tq"));

  ProcResult unknown_flag = run_trainctl({"train", job.string(), "--bogus"}, dir.path());
  CHECK(unknown_flag.exit_code == 2);
  CHECK_THAT(unknown_flag.err, Catch::Contains("--bogus"));

  ProcResult no_command = run_trainctl({}, dir.path());
  CHECK(no_command.exit_code == 2);

  ProcResult not_divisible = run_trainctl({"train", job.string(), "--nnodes", "3"}, dir.path());
  CHECK(not_divisible.exit_code == 2);
  CHECK_THAT(not_divisible.err, Catch::Contains("not divisible by the 3 nodes"));
  CHECK_FALSE(fs::exists(dir / "runs"));  // refused before anything was started

  ProcResult bad_rank =
      run_trainctl({"train", job.string(), "--nnodes", "2", "--node-rank", "2"}, dir.path());
  CHECK(bad_rank.exit_code == 2);
  CHECK_THAT(bad_rank.err, Catch::Contains("--node-rank"));

  // A human message, not CLI11's "Value 0 not in range 0.000000 to 1797...".
  for (const char* cmd : {"train", "validate"}) {
    ProcResult zero_nodes = run_trainctl({cmd, job.string(), "--nnodes", "0"}, dir.path());
    CHECK(zero_nodes.exit_code == 2);
    CHECK_THAT(zero_nodes.err, Catch::Contains("--nnodes: must be at least 1; got 0"));
    CHECK_THAT(zero_nodes.err, !Catch::Contains("not in range"));
  }
  ProcResult negative_rank = run_trainctl({"train", job.string(), "--node-rank", "-1"}, dir.path());
  CHECK(negative_rank.exit_code == 2);
  CHECK_THAT(negative_rank.err, Catch::Contains("--node-rank: must be at least 0; got -1"));

  ProcResult worker = run_trainctl({"worker"}, dir.path());
  CHECK(worker.exit_code == 2);
  CHECK_THAT(worker.err, Catch::Contains("TRAINCTL_RANK"));
}

TEST_CASE("bench comm prints an nccl-tests style table", "[cli][integration]") {
  TempDir dir("bench");
  ProcResult r = run_trainctl({"bench", "comm", "--world", "2", "--min-bytes", "4K", "--max-bytes",
                               "64K", "--iters", "2", "--run-dir", (dir / "bench-run").string()},
                              dir.path(), 60s);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("allreduce") && Catch::Contains("busbw"));
  CHECK_THAT(r.out, Catch::Contains("65536"));
  CHECK(fs::exists(dir / "bench-run/logs/rank1.log"));
  // Workers on one host: every allreduce size goes through shared memory...
  CHECK_THAT(r.out, Catch::Matches("(.|\n)*allreduce +65536 .* shm\n(.|\n)*"));
  // ...unless a TCP algorithm is asked for; a wrong name is refused before launching.
  ProcResult tcp = run_trainctl({"bench", "comm", "--min-bytes", "64K", "--max-bytes", "64K",
                                 "--iters", "1", "--allreduce-algo", "ring"},
                                dir.path(), 60s);
  INFO(tcp.err);
  REQUIRE(tcp.exit_code == 0);
  CHECK_THAT(tcp.out, Catch::Matches("(.|\n)*allreduce +65536 .* ring\n(.|\n)*"));
  ProcResult bad = run_trainctl({"bench", "comm", "--allreduce-algo", "bcube"}, dir.path(), 60s);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--allreduce-algo"));
}

TEST_CASE("the CPU kernel path: --version names it, workers run the forced one, bad ones exit 2",
          "[cli][integration][isa]") {
  TempDir dir("isa");
  ProcResult version = run_trainctl({"--version"}, dir.path());
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.out, Catch::Contains("cpu kernels: ") &&
                              Catch::Contains("(this CPU: generic") &&
                              Catch::Contains("TRAINCTL_CPU_ISA forces one)"));

  // Every worker of the job runs the path the launcher was given.
  fs::path job = write_job(dir.path(), "isa", 2, 1, 1);
  ProcResult train = Proc({"train", job.string(), "--set", "training.steps=2"}, dir.path(),
                          {{"TRAINCTL_CPU_ISA", "generic"}})
                         .wait(std::chrono::seconds(120));
  INFO(train.err);
  REQUIRE(train.exit_code == 0);
  for (const char* log : {"rank0.log", "rank1.log"}) {
    CHECK_THAT(read_text(dir / "runs" / "isa" / "logs" / log),
               Catch::Contains("cpu kernels: generic"));
  }

  // An unknown path, for every command that computes, before anything starts.
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"train", job.string(), "--resume", "none"},
        std::vector<std::string>{"validate", job.string()}}) {
    ProcResult bad = Proc(cmd, dir.path(), {{"TRAINCTL_CPU_ISA", "avx9"}}).wait(60s);
    INFO(cmd[0]);
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Catch::Contains("TRAINCTL_CPU_ISA=avx9 is not a CPU kernel path; this "
                                        "CPU supports: generic"));
  }
}

TEST_CASE("inspect step refuses an --out it cannot write with exit 2 and the reason",
          "[cli][integration]") {
  TempDir dir("inspect-out");
  const fs::path job = dir / "inspect.yaml";
  write_text(job,
             "name: inspect\nmodel: {vocab_size: 64, seq_len: 8, n_layer: 1, n_head: 2, "
             "d_model: 16}\ntraining: {steps: 1, micro_batch_size: 1}\n");
  const fs::path file = dir / "passwd";  // a file that is not a directory, like /etc/passwd
  write_text(file, "root:x:0:0\n");
  for (const auto& [out, why] : std::vector<std::pair<fs::path, std::string>>{
           {file, "exists and is not a directory"},
           {file / "sub", "cannot create it: Not a directory"},
       }) {
    const ProcResult r =
        run_trainctl({"inspect", "step", job.string(), "--out", out.string()}, dir.path());
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("error: --out " + out.string() + ": " + why));
  }
  CHECK(read_text(file) == "root:x:0:0\n");
  // An output file that is a directory is refused before any work, too.
  fs::create_directories(dir / "out" / "step.json");
  const ProcResult taken =
      run_trainctl({"inspect", "step", job.string(), "--out", (dir / "out").string()}, dir.path());
  CHECK(taken.exit_code == 2);
  CHECK_THAT(taken.err, Catch::Contains("step.json: exists and is not a regular file"));
  // And a writable one works.
  const ProcResult ok =
      run_trainctl({"inspect", "step", job.string(), "--out", (dir / "fine").string()}, dir.path());
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  CHECK(fs::exists(dir / "fine" / "step.json"));
}
